"""The seed's protocol as ``--preset reference``: its start states, target box, splits, network, constant, grid and
online search, checked piece by piece against what its README and config state, and one small run end to end."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from kinematics import DifferentiableIKCfg, DifferentiableIKLayer
from learning.common.panda import franka_kinematics
from learning.grasp_yaw.baselines import angular_grid, candidate_costs, grid_yaws, ik_layer, online_optimization
from learning.grasp_yaw.config import REFERENCE, REFERENCE_POSTURE, REFERENCE_TCP, ExperimentCfg, SplitSizes
from learning.grasp_yaw.predictors import BoundedYawNet, SharedConstant, YawPolicy, build_predictor
from learning.grasp_yaw.splits import make_splits
from learning.grasp_yaw.task import current_heading, failure_penalty, grasp_pose, smooth_cost, yaw_vector


@pytest.fixture(scope="module")
def kin64():
    return franka_kinematics(dtype=torch.float64)


@pytest.fixture(scope="module")
def splits(kin64):
    return make_splits(REFERENCE, kin64)


def test_the_target_box_is_built_around_the_ready_tcp(kin64):
    tcp = kin64(torch.tensor(REFERENCE_POSTURE, dtype=torch.float64))[:3, 3]
    torch.testing.assert_close(tcp, torch.tensor(REFERENCE_TCP, dtype=torch.float64), atol=1e-5, rtol=0)


def test_the_splits_follow_the_seed_protocol(kin64, splits):
    sizes = {name: len(s) for name, s in splits.items()}
    assert sizes == {"train": 1024, "validation": 128, "test_iid": 128, "test_spatial": 128, "test_shift": 128}
    centre = torch.tensor(REFERENCE_TCP, dtype=torch.float64)
    posture = torch.tensor(REFERENCE_POSTURE, dtype=torch.float64)
    half = torch.tensor([0.12] * 6 + [0.82], dtype=torch.float64)
    for name, goals in splits.items():
        offset = goals.p - centre
        assert offset[:, 0].abs().max() <= 0.05 and offset[:, 2].abs().max() <= 0.05, name
        y = offset[:, 1]
        if name == "test_spatial":
            assert y.min() >= 0.025 and y.max() <= 0.055
        else:
            assert y.min() >= -0.05 and y.max() <= 0.01, name
        shift = torch.tensor([0.20, 0, 0.15, 0, 0, 0, 0], dtype=torch.float64) if name == "test_shift" else 0
        assert ((goals.q0 - posture - shift).abs() <= half + 1e-12).all(), name
        assert (goals.q0 >= kin64.lower).all() and (goals.q0 <= kin64.upper).all(), name
        # Uniform draws: the box is filled to near its edges (128 goals put the extremes within a few per cent).
        assert (goals.q0 - posture - shift)[:, 0].abs().max() > 0.1, name
    assert splits["test_spatial"].p[:, 1].min() > splits["train"].p[:, 1].max()


def test_the_bounded_network_starts_at_heading_and_stays_within_90_degrees(kin64, splits):
    goals = splits["validation"]
    net = build_predictor("ik_trained_one_yaw", kin64, REFERENCE).double()
    assert isinstance(net, BoundedYawNet)
    assert sum(p.numel() for p in net.parameters()) == 10 * 64 + 64 + 64 * 64 + 64 + 64 + 1  # the seed's 4,929
    policy = YawPolicy(net, kin64, REFERENCE)
    heading = current_heading(kin64, goals.q0)
    torch.testing.assert_close(policy(goals.p, goals.q0), yaw_vector(heading), atol=1e-12, rtol=0)
    with torch.no_grad():
        for param in net.parameters():
            param.normal_(0, 3.0)
    yaw = policy(goals.p, goals.q0)
    apart = torch.remainder(torch.atan2(yaw[:, 1], yaw[:, 0]) - heading + math.pi, 2 * math.pi) - math.pi
    assert apart.abs().max() <= math.pi / 2 + 1e-9 and apart.abs().max() > 1.0


def test_the_bounded_network_gradient_through_ik_matches_finite_differences(kin64, splits):
    goals = splits["train"].subset(slice(0, 3))
    torch.manual_seed(0)
    net = BoundedYawNet(kin64, REFERENCE.start, REFERENCE.workspace, 8).double()
    with torch.no_grad():
        net.body[-1].weight.normal_(0, 0.1)
    policy = YawPolicy(net, kin64, REFERENCE)
    ik = DifferentiableIKLayer(kin64, DifferentiableIKCfg(iterations=24, validate_inputs=False))
    bias = net.body[-1].bias

    def loss() -> torch.Tensor:
        yaw = policy(goals.p, goals.q0)
        return smooth_cost(ik.solve(grasp_pose(goals.p, yaw), goals.q0), goals.q0, REFERENCE.weights).sum()

    (analytic,) = torch.autograd.grad(loss(), bias)
    with torch.no_grad():
        bias += 1e-6
        plus = loss()
        bias -= 2e-6
        minus = loss()
        bias += 1e-6
    assert float(analytic) == pytest.approx(float(plus - minus) / 2e-6, rel=1e-4, abs=1e-6)


def test_the_absolute_constant_is_one_yaw_for_every_goal(splits):
    constant = SharedConstant(absolute=True).double()
    with torch.no_grad():
        constant.offset.fill_(0.3)
    p = splits["test_iid"].p
    torch.testing.assert_close(constant(p, p), yaw_vector(torch.full((len(p),), 0.3, dtype=torch.float64)))


def test_the_grid_is_the_seeds_129_angles_and_the_cheapest_of_them(kin64, splits):
    goals = splits["test_iid"].subset(slice(0, 4))
    psi = grid_yaws(goals.p, 129, "absolute")
    torch.testing.assert_close(psi[1], torch.linspace(-math.pi, math.pi, 129, dtype=torch.float64))
    ik, penalty = ik_layer(kin64, 64), failure_penalty(kin64)
    result = angular_grid(ik, goals.p, goals.q0, 129, REFERENCE.weights, penalty, "absolute")
    costs = candidate_costs(ik, goals.p, goals.q0, psi, REFERENCE.weights, penalty)
    torch.testing.assert_close(result.cost, costs.min(-1).values)


def test_the_online_search_starts_at_heading_and_keeps_the_fixed_yaw_if_cheaper(kin64, splits):
    goals = splits["test_iid"].subset(slice(0, 8))
    ik, penalty = ik_layer(kin64, 24), failure_penalty(kin64)
    heading = current_heading(kin64, goals.q0)
    none = online_optimization(ik, goals.p, goals.q0, 0, 0.08, REFERENCE.weights, penalty, start=heading)
    torch.testing.assert_close(none.yaw, yaw_vector(heading))
    fixed = candidate_costs(ik, goals.p, goals.q0, torch.zeros(8, 1, dtype=torch.float64), REFERENCE.weights, penalty)
    kept = online_optimization(
        ik, goals.p, goals.q0, 5, 0.08, REFERENCE.weights, penalty, start=heading, incumbents=(0.0,)
    )
    assert (kept.cost <= fixed[:, 0] + 1e-12).all() and (kept.cost <= none.cost + 1e-12).all()
    assert kept.ik_solves == 8 * (5 + 1 + 1)


def test_a_small_run_of_the_reference_protocol_writes_the_seed_table_beside_its_own(tmp_path):
    """The reference preset end to end at a tenth of its sizes and budgets: the report lays the seed's table
    beside this run's, with this run's paired gap to the grid."""
    cfg = dataclasses.replace(
        REFERENCE,
        sizes=SplitSizes(train=128, validation=16, test_iid=16, test_spatial=16, test_shift=16),
        train=dataclasses.replace(REFERENCE.train, seeds=(17,), steps=20, constant_steps=20, supervised_steps=20),
        baselines=dataclasses.replace(REFERENCE.baselines, online_steps=5, teacher_yaws=24, teacher_refine_yaws=3),
        latency_batch=16,
        latency_singles=2,
    )
    from learning.grasp_yaw.experiment import evaluate_run, train_run

    train_run(cfg, tmp_path, show_progress=False)
    report = evaluate_run(tmp_path, show_progress=False)
    assert ExperimentCfg.from_dict(json.loads((tmp_path / "config.json").read_text())) == cfg
    for split in ("test_iid", "test_spatial", "test_shift"):
        assert report["results"][split]["angular_grid"]["grid_gap"]["mean"] == 0.0
        # The teacher's 24-yaw grid plus refinement lands within 1 % of the 129-angle grid, on either side.
        assert abs(report["results"][split]["teacher"]["grid_gap"]["mean"]) <= 1e-2
    markdown = (tmp_path / "report.md").read_text()
    assert "Beside the seed's own run" in markdown
    assert "| learned (IK-trained predictor, one yaw) |" in markdown
