"""The shared IK problem generators draw what their docstrings say: limits, FK, spreads, shared targets, seeds."""

from __future__ import annotations

import pytest
import torch
from optional_dependencies import require_module

import assets
from kinematics import DifferentiableIKCfg, DifferentiableIKLayer, InvalidTargetError
from kinematics.lie.rotations import FLOAT32_GEOMETRY_TOLERANCE
from learning.benchmark import peers
from learning.benchmark.problem import (
    targets_away_from_seeds_near_limits,
    targets_near_seeds_in_joint_box,
    targets_near_seeds_near_joint_centre,
    targets_near_seeds_near_ready_pose,
    targets_with_distant_seeds_in_joint_box,
)

N = 4000
GENERATORS = [
    targets_near_seeds_in_joint_box,
    targets_with_distant_seeds_in_joint_box,
    targets_near_seeds_near_ready_pose,
    targets_near_seeds_near_joint_centre,
    targets_away_from_seeds_near_limits,
]


def _mad_sigma(x: torch.Tensor) -> float:
    """Standard deviation of a zero-mean normal sample estimated from its median absolute value."""
    return float(x.abs().median()) / 0.6745


@pytest.mark.parametrize("generate", GENERATORS, ids=lambda f: f.__name__)
def test_seeds_inside_limits_targets_are_fk_and_seeded_draws_repeat(generate, panda64):
    problem = generate(panda64, N, seed=3)
    assert problem.targets.shape == (N, 4, 4) and problem.seeds.shape == problem.target_q.shape == (N, 7)
    assert ((problem.seeds >= panda64.lower) & (problem.seeds <= panda64.upper)).all()
    torch.testing.assert_close(problem.targets, panda64(problem.target_q), rtol=0, atol=0)
    again, other = generate(panda64, N, seed=3), generate(panda64, N, seed=4)
    assert all(torch.equal(a, b) for a, b in zip(problem, again, strict=True))
    assert not torch.equal(problem.seeds, other.seeds)


def test_joint_box_kinds_share_targets_and_differ_in_seeds(panda64):
    near = targets_near_seeds_in_joint_box(panda64, N, seed=0)
    distant = targets_with_distant_seeds_in_joint_box(panda64, N, seed=0)
    assert torch.equal(near.targets, distant.targets)
    span = panda64.upper - panda64.lower
    # Uniform over the box: each joint's mean near the middle, its spread span / sqrt(12).
    torch.testing.assert_close(near.target_q.mean(0), panda64.default_seed(), rtol=0, atol=0.05 * float(span.max()))
    torch.testing.assert_close(near.target_q.std(0), span / 12**0.5, rtol=0.05, atol=0)
    inside = ((near.seeds > panda64.lower) & (near.seeds < panda64.upper)).all(-1)
    assert _mad_sigma((near.seeds - near.target_q)[inside]) == pytest.approx(0.05, rel=0.05)
    assert _mad_sigma(distant.seeds - distant.target_q) > 1.0


@pytest.mark.parametrize("spread", [0.3, 0.5])
def test_ready_pose_seeds_spread_around_it_and_targets_sit_near_them(spread, panda64):
    problem = targets_near_seeds_near_ready_pose(panda64, N, seed=1, spread=spread, target_noise=0.05)
    ready = torch.tensor(assets.PANDA.reference_posture, dtype=torch.float64)
    assert ((problem.target_q >= panda64.lower) & (problem.target_q <= panda64.upper)).all()
    assert _mad_sigma(problem.seeds[:, [0, 2, 4]] - ready[[0, 2, 4]]) == pytest.approx(spread, rel=0.05)
    inside = ((problem.target_q > panda64.lower) & (problem.target_q < panda64.upper)).all(-1)
    assert _mad_sigma((problem.target_q - problem.seeds)[inside]) == pytest.approx(0.05, rel=0.05)


def test_joint_centre_seeds_keep_their_margin_and_targets_are_not_clamped(panda64):
    problem = targets_near_seeds_near_joint_centre(panda64, N, seed=2, spread=1.0)  # wide: many seeds clamped
    assert ((problem.seeds >= panda64.lower + 1e-3 - 1e-12) & (problem.seeds <= panda64.upper - 1e-3 + 1e-12)).all()
    assert _mad_sigma(problem.target_q - problem.seeds) == pytest.approx(0.05, rel=0.05)
    beyond = (problem.target_q < panda64.lower) | (problem.target_q > panda64.upper)
    assert beyond.any()


def test_near_limit_seeds_put_about_half_the_joints_within_31_mm_of_a_limit(panda64):
    problem = targets_away_from_seeds_near_limits(panda64, N, seed=5)
    gap = torch.minimum(problem.seeds - panda64.lower, panda64.upper - problem.seeds)
    assert (gap >= 1e-3 - 1e-12).all()
    assert float((gap <= 0.031 + 1e-12).double().mean()) == pytest.approx(0.5, abs=0.05)
    assert _mad_sigma(problem.target_q - problem.seeds) == pytest.approx(0.2, rel=0.05)


def test_targets_from_another_librarys_float32_forward_kinematics_solve_with_the_checks_on(panda64):
    """pytorch_kinematics parses the URDF and runs its FK in float32: cast to float64, its rotations are
    orthonormal only to float32's precision (above the old 1e-8), yet they are rigid transforms; the float64 layer
    with its input checks on accepts and solves them. A clearly invalid target still raises."""
    require_module("pytorch_kinematics", "pip install pytorch-kinematics, or the dev extra")
    pk_chain = peers.pk_chain(
        assets.PANDA.urdf_text(), "panda_hand_tcp", "panda_link0", panda64.joint_names, "cpu", torch.float32
    )
    generator = torch.Generator().manual_seed(0)
    ready = torch.tensor(assets.PANDA.reference_posture, dtype=torch.float64)
    q = (ready + 0.3 * torch.randn(64, 7, generator=generator, dtype=torch.float64)).clamp(panda64.lower, panda64.upper)
    targets = pk_chain.forward_kinematics(q.float()).get_matrix().double()  # (64, 4, 4), made in float32
    rotation = targets[:, :3, :3]
    deviation = (rotation.transpose(-1, -2) @ rotation - torch.eye(3, dtype=torch.float64)).abs().amax()
    assert 1e-8 < deviation <= FLOAT32_GEOMETRY_TOLERANCE  # float32's rounding, within the documented tolerance
    ik = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=16))
    seeds = (q + 0.02).clamp(panda64.lower, panda64.upper)
    result = ik.solve(targets, seeds)
    assert result.success.double().mean() >= 0.95
    scaled = targets.clone()
    scaled[0, :3, :3] *= 1.001  # a scaled block: not a rotation at any precision
    with pytest.raises(InvalidTargetError, match="orthonormal"):
        ik.solve(scaled, seeds)
