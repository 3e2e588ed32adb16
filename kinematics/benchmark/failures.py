"""Why local solves fail: the benchmark's local targets in float64, failures sorted by cause, and how success moves
with more iterations, the QP step, and configurations drawn around the ready pose instead of the whole joint box.
"""

from __future__ import annotations

import torch

import assets
from kinematics import DifferentiableIKCfg, DifferentiableIKLayer, KinematicsLayer
from kinematics.benchmark.problem import LOCAL_PERTURBATION, ik_problem

# A failed row ends "near-singular" when the smallest singular value of its Jacobian is below this (the damping).
SINGULAR_BELOW = 0.05
READY_SPREADS = (0.3, 0.5)  # rad: standard deviations of configurations drawn around assets.READY_POSE


def _success(layer64: KinematicsLayer, targets, seeds, **cfg) -> float:
    ik = DifferentiableIKLayer(layer64, DifferentiableIKCfg(**cfg))
    return float(ik.solve(targets, seeds).success.double().mean())


def local_failures(layer64: KinematicsLayer, batch: int, seed: int, iterations: int) -> dict:
    """Counts and success rates for ``batch`` local rows (``ik_problem``), float64, no grad."""
    with torch.no_grad():
        seeds, targets = ik_problem(layer64, batch, "local", seed)
        result = DifferentiableIKLayer(layer64, DifferentiableIKCfg(max_iterations=iterations)).solve(targets, seeds)
        failed = ~result.success
        on_limit = ((result.qpos == layer64.lower) | (result.qpos == layer64.upper)).any(-1)
        _, jac = layer64.fk_and_jacobian(result.qpos)
        singular = torch.linalg.svdvals(jac)[..., -1] < SINGULAR_BELOW
        doc = {
            "batch": batch,
            "iterations": iterations,
            "success": float(result.success.double().mean()),
            "failed": int(failed.sum()),
            "failed_on_a_limit": int((failed & on_limit).sum()),
            "failed_near_singular": int((failed & ~on_limit & singular).sum()),
            "failed_other": int((failed & ~on_limit & ~singular).sum()),
            "failed_median_position_error_m": float(result.position_error_norm[failed].median())
            if failed.any()
            else None,
            "success_at_iterations": {
                str(n): _success(layer64, targets, seeds, max_iterations=n) for n in (2 * iterations, 4 * iterations)
            },
            "success_qp_step": _success(layer64, targets, seeds, max_iterations=iterations, step="qp"),
            "success_around_ready_pose": {},
        }
        ready = torch.tensor(assets.READY_POSE, dtype=torch.float64)
        gen = torch.Generator().manual_seed(seed)
        for spread in READY_SPREADS:
            goal = layer64.clamp(ready + spread * torch.randn(batch, layer64.dof, generator=gen, dtype=torch.float64))
            start = layer64.clamp(goal + LOCAL_PERTURBATION * torch.randn(goal.shape, generator=gen, dtype=goal.dtype))
            doc["success_around_ready_pose"][str(spread)] = _success(
                layer64, layer64(goal), start, max_iterations=iterations
            )
    return doc


def markdown(doc: dict) -> list[str]:
    """The section of ``ik.md``."""
    n, its = doc["batch"], doc["iterations"]
    more = ", ".join(f"{k} iterations {100 * v:.1f}%" for k, v in doc["success_at_iterations"].items())
    ready = ", ".join(f"N(0, {k} rad) {100 * v:.1f}%" for k, v in doc["success_around_ready_pose"].items())
    median = doc["failed_median_position_error_m"]
    return [
        "## Local failures (float64)",
        "",
        f"{n} local rows at {its} iterations: success {100 * doc['success']:.1f}%; {doc['failed']} failed, of which "
        f"{doc['failed_on_a_limit']} end with a joint on its limit, {doc['failed_near_singular']} at a near-singular "
        f"pose (smallest singular value of J < {SINGULAR_BELOW}) and {doc['failed_other']} otherwise"
        + (f"; median position error of the failed rows {1e3 * median:.2f} mm." if median is not None else ".")
        + f" Same rows with {more}; with step='qp' {100 * doc['success_qp_step']:.1f}%. Configurations drawn "
        f"around the ready pose instead of the whole joint box (seeds 0.05 rad away, {its} iterations): {ready}.",
        "",
    ]
