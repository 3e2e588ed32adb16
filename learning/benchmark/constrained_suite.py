"""The paper's extensions, measured: QP step and posture cascade against the clamp, implicit against unrolled
gradients (backward peak memory over iteration counts, time, agreement), on the Panda in float32/float64."""

from __future__ import annotations

import statistics
import time

import torch

from kinematics import DifferentiableIKCfg, DifferentiableIKLayer
from kinematics.lie import se3_exp_left
from learning.benchmark import memory
from learning.benchmark.problem import (
    NEAR_SEED,
    targets_away_from_seeds_near_limits,
    targets_near_seeds_in_joint_box,
)
from learning.benchmark.report import _table, fmt_mib, fmt_time
from learning.common.panda import franka_kinematics
from learning.common.provenance import provenance_line

NEAR_LIMITS = "near limits"
STEP_MODES = {
    "clamp": {},
    "qp": {"step": "qp"},
    "qp+posture": {"step": "qp", "posture_gain": 0.02},
}


def _median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def step_rows(batch: int, repeats: int, seed: int) -> list[dict]:
    """Success, residuals, limits, speed and frozen-joint gradients of each step mode on two target sets."""
    layer = franka_kinematics("cpu", torch.float64)
    rows = []
    problems = {
        NEAR_SEED: targets_near_seeds_in_joint_box(layer, batch, seed),
        NEAR_LIMITS: targets_away_from_seeds_near_limits(layer, batch, seed),
    }
    for kind, (targets, seeds, _) in problems.items():
        gradient_norms = {}
        for mode, extra in STEP_MODES.items():
            ik = DifferentiableIKLayer(layer, DifferentiableIKCfg(**extra))
            with torch.no_grad():
                result = ik.solve(targets, seeds)
            seconds = _median_time(lambda ik=ik, t=targets, s=seeds: ik.solve(t, s), repeats)
            xi = torch.zeros(batch, 6, dtype=torch.float64, requires_grad=True)
            qpos = ik.solve(se3_exp_left(xi, targets), seeds).q
            gradient_norms[mode] = torch.stack(
                [
                    torch.autograd.grad(qpos[:, j].sum(), xi, retain_graph=True)[0].norm(dim=-1)
                    for j in range(layer.dof)
                ],
                -1,
            )
            rows.append(
                {
                    "targets": kind,
                    "mode": mode,
                    "batch": batch,
                    "success_rate": float(result.success.double().mean()),
                    "position_error_mm_mean": 1e3 * float(result.position_error_norm.mean()),
                    "outside_limits_rows": int((~result.within_limits).sum()),
                    "distance_to_mid_rad2": float((result.q - layer.default_seed()).square().sum(-1).mean()),
                    "forward_s": seconds,
                }
            )
        frozen = gradient_norms["clamp"] == 0
        for row in rows[-len(STEP_MODES) :]:
            row["clamp_frozen_joint_rows"] = int(frozen.sum())
            row["of_which_nonzero_target_gradient"] = int((frozen & (gradient_norms[row["mode"]] > 0)).sum())
    return rows


def gradient_rows(batch: int, iteration_counts: tuple[int, ...], repeats: int, seed: int) -> list[dict]:
    """Backward peak memory and time of unrolled against implicit gradients, and their agreement."""
    layer = franka_kinematics("cpu", torch.float32)
    problem = targets_near_seeds_in_joint_box(franka_kinematics("cpu", torch.float64), batch, seed)
    seeds, targets = problem.seeds.float(), problem.targets.float()
    rows = []
    for iterations in iteration_counts:
        grads = {}
        for mode in ("unrolled", "implicit"):
            ik = DifferentiableIKLayer(layer, DifferentiableIKCfg(iterations=iterations, gradient=mode))

            def forward_backward(ik=ik):
                xi = torch.zeros(batch, 6, requires_grad=True)
                seed = seeds.clone().requires_grad_(True)
                result = ik.solve(se3_exp_left(xi, targets), seed)
                weights = torch.linspace(-1.0, 1.0, layer.dof).expand(batch, -1)
                (result.q * weights).sum().backward()
                tight = (result.position_error_norm < 1e-5) & (result.rotation_error_norm < 1e-5)
                return xi.grad, seed.grad, result.success, tight

            peak = memory.rss_peak_delta_hwm(forward_backward) if memory.hwm_supported() else None
            seconds = _median_time(forward_backward, repeats)
            grads[mode] = forward_backward()
            rows.append(
                {
                    "iterations": iterations,
                    "mode": mode,
                    "batch": batch,
                    "forward_backward_s": seconds,
                    "peak_rss_bytes": peak,
                }
            )
        # "solved": within the success tolerances; "converged": residuals under 1e-5, i.e. at the fixed point
        # the implicit function theorem describes.
        for label, ok in (("", grads["unrolled"][2]), ("converged_", grads["unrolled"][3])):
            for index, name in ((0, "target"), (1, "seed")):
                a, b = grads["unrolled"][index][ok], grads["implicit"][index][ok]
                cosine = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(1e-30)
                rows[-1][f"{label}{name}_cosine_mean"] = float(cosine.mean()) if ok.any() else None
                rows[-1][f"{label}{name}_cosine_median"] = float(cosine.median()) if ok.any() else None
            rows[-1][f"{label or 'solved_'}rows"] = int(ok.sum())
    return rows


def run(
    batch: int = 1024, iteration_counts: tuple[int, ...] = (16, 32, 64, 128), repeats: int = 5, seed: int = 0
) -> dict:
    return {
        "suite": "constrained",
        "torch_threads": torch.get_num_threads(),
        "steps": step_rows(min(batch, 512), repeats, seed),
        "gradients": gradient_rows(batch, iteration_counts, repeats, seed),
    }


def _cos(row: dict, key: str) -> str:
    mean, median = row.get(f"{key}_mean"), row.get(f"{key}_median")
    return "" if mean is None else f"{mean:.4f} / {median:.5f}"


def markdown(doc: dict) -> str:
    steps = [
        [
            r["targets"],
            r["mode"],
            str(r["batch"]),
            f"{100 * r['success_rate']:.1f}%",
            f"{r['position_error_mm_mean']:.2f}",
            str(r["outside_limits_rows"]),
            f"{r['distance_to_mid_rad2']:.2f}",
            f"{r['clamp_frozen_joint_rows']} / {r['of_which_nonzero_target_gradient']}",
            fmt_time(r["forward_s"]),
        ]
        for r in doc["steps"]
    ]
    grads = [
        [
            str(r["iterations"]),
            r["mode"],
            fmt_time(r["forward_backward_s"]),
            fmt_mib(r["peak_rss_bytes"]),
            _cos(r, "target_cosine"),
            _cos(r, "seed_cosine"),
            _cos(r, "converged_target_cosine"),
            _cos(r, "converged_seed_cosine"),
            f"{r['solved_rows']} / {r['converged_rows']}" if "converged_rows" in r else "",
        ]
        for r in doc["gradients"]
    ]
    return "\n".join(
        [
            "# QP step, posture cascade and implicit gradients",
            "",
            *([provenance_line(doc["meta"]["provenance"]), ""] if "provenance" in doc.get("meta", {}) else []),
            f"float64 for the step modes (forward time, 16 iterations), float32 for the gradients; {doc['torch_threads']} "
            "torch threads. Frozen joint-rows: joints whose target gradient the clamp makes exactly zero / how many of "
            "those the mode gives a nonzero gradient.",
            "",
            _table(
                [
                    "targets",
                    "mode",
                    "batch",
                    "success",
                    "pos err mm (mean)",
                    "rows outside limits",
                    "squared distance to mid-range rad²",
                    "clamp-frozen / nonzero here",
                    "forward",
                ],
                steps,
            ),
            "",
            f"Forward+backward (gradient to target and seed, {NEAR_SEED} targets) with unrolled and implicit "
            "gradients; peak = resident-set "
            "growth over the call (MiB); cosine = agreement of the implicit with the unrolled gradient per row (mean / "
            "median), on rows the unrolled solve solved (within tolerance) and on rows it converged (residuals < 1e-5).",
            "",
            _table(
                [
                    "iterations",
                    "gradient",
                    "forward+backward",
                    "peak MiB",
                    "target cos (solved)",
                    "seed cos (solved)",
                    "target cos (converged)",
                    "seed cos (converged)",
                    "solved / converged rows",
                ],
                grads,
            ),
            "",
        ]
    )
