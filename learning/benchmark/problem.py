"""The benchmarked robot and its IK problems: the Panda chain from ``assets`` and generators of targets and seeds,
each named after its distribution, shared by the benchmark and the tests.

Every generator is reproducible from ``seed``: CPU ``torch.Generator``s draw float64 numbers, which are cast to
the layer's device and dtype before they are scaled and added (one exception, noted where it is); clamps and FK
run there too. Each returns an ``IKProblem``. ``ik_problem`` picks the IK suite's two target kinds by label.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

import assets
from kinematics import KinematicsLayer

# Standard deviation (rad) of the per-joint noise between a target's configuration and its seed in the IK suite.
NEAR_SEED_NOISE = 0.05
NEAR_SEED, DISTANT_SEED = "joint box, near seed", "joint box, distant seed"
# The opt-in DLS settings the IK suite measures beside the defaults (DifferentiableIKCfg's opt-in options).
OPT_IN_SETTINGS = {"damping": 0.02, "residual_damping": 1.0, "step_size": 1.0, "hold_joint_box": True}
TARGET_KINDS = (NEAR_SEED, DISTANT_SEED)


class IKProblem(NamedTuple):
    """``targets`` ``(n, 4, 4)`` = FK of ``target_q`` ``(n, dof)``; ``seeds`` ``(n, dof)`` start the solve."""

    targets: torch.Tensor
    seeds: torch.Tensor
    target_q: torch.Tensor


def sampling_limits(layer: KinematicsLayer) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 CPU ``(dof,)`` bounds to sample from: the joint limits, ``[-pi, pi]`` where unbounded."""
    lower = layer.lower.detach().to("cpu", torch.float64)
    upper = layer.upper.detach().to("cpu", torch.float64)
    return torch.where(torch.isfinite(lower), lower, -math.pi), torch.where(torch.isfinite(upper), upper, math.pi)


def random_configs(layer: KinematicsLayer, n: int, seed: int) -> torch.Tensor:
    """``(n, dof)`` float64 CPU configurations, uniform inside the limits, reproducible from ``seed``."""
    lower, upper = sampling_limits(layer)
    gen = torch.Generator().manual_seed(seed)
    return lower + torch.rand(n, layer.dof, generator=gen, dtype=torch.float64) * (upper - lower)


def _normal(n: int, dof: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(n, dof, generator=gen, dtype=torch.float64)


def _on(layer: KinematicsLayer, x: torch.Tensor) -> torch.Tensor:
    return x.to(layer.device, layer.dtype)


@torch.no_grad()
def _problem(layer: KinematicsLayer, target_q: torch.Tensor, seeds: torch.Tensor) -> IKProblem:
    return IKProblem(layer(target_q), seeds, target_q)


def targets_near_seeds_in_joint_box(
    layer: KinematicsLayer, n: int, seed: int, seed_noise: float = NEAR_SEED_NOISE
) -> IKProblem:
    """Target configurations uniform over the joint box (``random_configs`` with ``seed``); each seed is its
    target's configuration plus N(0, ``seed_noise``^2) rad per joint (generator ``seed + 1``), clamped into
    the limits. The IK suite's "joint box, near seed" targets."""
    target_q = _on(layer, random_configs(layer, n, seed))
    noise = seed_noise * _on(layer, _normal(n, layer.dof, torch.Generator().manual_seed(seed + 1)))
    return _problem(layer, target_q, layer.clamp(target_q + noise))


def targets_with_distant_seeds_in_joint_box(layer: KinematicsLayer, n: int, seed: int) -> IKProblem:
    """The targets of ``targets_near_seeds_in_joint_box`` (same ``seed``), seeded at independent configurations
    uniform over the joint box (``random_configs`` with ``seed + 2``). The IK suite's "joint box, distant seed"."""
    target_q = _on(layer, random_configs(layer, n, seed))
    return _problem(layer, target_q, _on(layer, random_configs(layer, n, seed + 2)))


def targets_near_seeds_near_ready_pose(
    layer: KinematicsLayer, n: int, seed: int, spread: float = 0.3, target_noise: float = 0.05
) -> IKProblem:
    """Seeds ``clamp(ready + N(0, spread^2))`` per joint around ``assets.PANDA.reference_posture``; target configurations
    ``clamp(seed + N(0, target_noise^2))``, both in rad and inside the limits. One generator seeded with
    ``seed`` draws the seeds' noise first, then the targets'. ``ready + spread * noise`` is formed in float64
    before the cast (the float32 tests' numbers depend on it). The IK layer tests' targets, and the failure
    analysis's rows near the ready pose."""
    gen = torch.Generator().manual_seed(seed)
    ready = torch.tensor(assets.PANDA.reference_posture, dtype=torch.float64)
    seeds = layer.clamp(_on(layer, ready + spread * _normal(n, layer.dof, gen)))
    target_q = layer.clamp(seeds + target_noise * _on(layer, _normal(n, layer.dof, gen)))
    return _problem(layer, target_q, seeds)


def targets_near_seeds_near_joint_centre(
    layer: KinematicsLayer, n: int, seed: int, spread: float = 0.4, target_noise: float = 0.05, margin: float = 1e-3
) -> IKProblem:
    """Seeds ``default_seed() + N(0, spread^2)`` per joint (the middle of each joint's range), clamped to
    ``margin`` inside the limits; target configurations ``seed + N(0, target_noise^2)``, not clamped (a target
    may need a joint a little beyond its limit). One generator seeded with ``seed``, seeds' noise first. The
    constrained-step tests' targets (spread 0.4) and the gradchecks' (spread 0.1, where no limit acts)."""
    gen = torch.Generator().manual_seed(seed)
    centre = layer.default_seed() + spread * _on(layer, _normal(n, layer.dof, gen))
    seeds = torch.clamp(centre, layer.lower + margin, layer.upper - margin)
    return _problem(layer, seeds + target_noise * _on(layer, _normal(n, layer.dof, gen)), seeds)


def targets_away_from_seeds_near_limits(
    layer: KinematicsLayer, n: int, seed: int, target_noise: float = 0.2
) -> IKProblem:
    """Seeds with about half the joints within 3 cm (rad) of a limit (each joint: with probability 1/2 uniform
    in ``[limit + 1 mm, limit + 31 mm]`` inside its lower or upper limit, else ``default_seed() + N(0, 0.3^2)``),
    clamped 1 mm inside the limits; target configurations ``seed + N(0, target_noise^2)``, not clamped. The
    constrained suite's and tests' "near limits" targets."""
    gen = torch.Generator().manual_seed(seed)
    lo, hi = layer.lower, layer.upper
    dof, f64 = layer.dof, torch.float64
    up = (torch.rand(n, dof, generator=gen) < 0.5).to(layer.device)
    near = torch.where(
        up,
        hi - 1e-3 - 0.03 * _on(layer, torch.rand(n, dof, generator=gen, dtype=f64)),
        lo + 1e-3 + 0.03 * _on(layer, torch.rand(n, dof, generator=gen, dtype=f64)),
    )
    mid = layer.default_seed() + 0.3 * _on(layer, _normal(n, dof, gen))
    pick_near = (torch.rand(n, dof, generator=gen) < 0.5).to(layer.device)
    seeds = torch.where(pick_near, near, mid).clamp(lo + 1e-3, hi - 1e-3)
    return _problem(layer, seeds + target_noise * _on(layer, _normal(n, dof, gen)), seeds)


def ik_problem(layer64: KinematicsLayer, batch: int, kind: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeds ``(batch, dof)`` and targets ``(batch, 4, 4)`` of one of ``TARGET_KINDS``, float64 on the CPU."""
    generators = {NEAR_SEED: targets_near_seeds_in_joint_box, DISTANT_SEED: targets_with_distant_seeds_in_joint_box}
    if kind not in generators:
        raise ValueError(f"target kind must be one of {TARGET_KINDS}, got {kind!r}")
    problem = generators[kind](layer64, batch, seed)
    return problem.seeds, problem.targets
