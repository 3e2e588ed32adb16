"""Why near-seed solves fail: the IK suite's "joint box, near seed" targets in float64, failures sorted by cause,
and how success moves with more iterations, the QP step, and problems drawn near the ready pose instead
(``targets_near_seeds_near_ready_pose``, the test suite's distribution).
"""

from __future__ import annotations

import torch

from kinematics import DifferentiableIKCfg, DifferentiableIKLayer, KinematicsLayer
from learning.benchmark.problem import (
    NEAR_SEED_NOISE,
    OPT_IN_SETTINGS,
    targets_near_seeds_in_joint_box,
    targets_near_seeds_near_ready_pose,
)

# A failed row ends "near-singular" when the smallest singular value of its Jacobian is below this (the damping).
SINGULAR_BELOW = 0.05
READY_SPREADS = (0.3, 0.5)  # rad: standard deviations of the seeds drawn around assets.PANDA.reference_posture


def _success(layer64: KinematicsLayer, targets, seeds, **cfg) -> float:
    ik = DifferentiableIKLayer(layer64, DifferentiableIKCfg(**cfg))
    return float(ik.solve(targets, seeds).success.double().mean())


def near_seed_failures(layer64: KinematicsLayer, batch: int, seed: int, iterations: int) -> dict:
    """Counts and success rates for ``batch`` rows of ``targets_near_seeds_in_joint_box``, float64, no grad."""
    with torch.no_grad():
        targets, seeds, _ = targets_near_seeds_in_joint_box(layer64, batch, seed)
        result = DifferentiableIKLayer(layer64, DifferentiableIKCfg(iterations=iterations)).solve(targets, seeds)
        failed = ~result.success
        on_limit = ((result.q == layer64.lower) | (result.q == layer64.upper)).any(-1)
        _, jac = layer64.fk_and_jacobian(result.q)
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
                str(n): _success(layer64, targets, seeds, iterations=n) for n in (2 * iterations, 4 * iterations)
            },
            "success_qp_step": _success(layer64, targets, seeds, iterations=iterations, step="qp"),
            "success_opt_in": _success(layer64, targets, seeds, iterations=iterations, **OPT_IN_SETTINGS),
            "success_near_ready_pose": {},
        }
        for spread in READY_SPREADS:
            near_ready = targets_near_seeds_near_ready_pose(layer64, batch, seed, spread, NEAR_SEED_NOISE)
            doc["success_near_ready_pose"][str(spread)] = _success(
                layer64, near_ready.targets, near_ready.seeds, iterations=iterations
            )
    return doc


def markdown(doc: dict) -> list[str]:
    """The section of ``ik.md``."""
    n, its = doc["batch"], doc["iterations"]
    more = ", ".join(f"{k} iterations {100 * v:.1f}%" for k, v in doc["success_at_iterations"].items())
    ready = ", ".join(f"N(0, {k} rad) {100 * v:.1f}%" for k, v in doc["success_near_ready_pose"].items())
    median = doc["failed_median_position_error_m"]
    return [
        "## Failures with near seeds over the joint box (float64)",
        "",
        f"{n} rows of joint-box targets with seeds N(0, {NEAR_SEED_NOISE} rad) away, {its} iterations: success "
        f"{100 * doc['success']:.1f}%; {doc['failed']} failed, of which "
        f"{doc['failed_on_a_limit']} end with a joint on its limit, {doc['failed_near_singular']} at a near-singular "
        f"pose (smallest singular value of J < {SINGULAR_BELOW}) and {doc['failed_other']} otherwise"
        + (f"; median position error of the failed rows {1e3 * median:.2f} mm." if median is not None else ".")
        + f" Same rows with {more}; with step='qp' {100 * doc['success_qp_step']:.1f}%; with the opt-in settings "
        f"(`ours.opt_in`) {100 * doc['success_opt_in']:.1f}%. Drawn near the "
        f"ready pose instead (seeds ready + N(0, spread), targets N(0, {NEAR_SEED_NOISE} rad) from their seeds, "
        f"{its} iterations; the test suite's distribution at spread 0.3): {ready}.",
        "",
    ]
