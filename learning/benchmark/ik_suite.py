"""IK timings and accuracy: this project's DLS layer (forward, forward+backward and its components) against
pytorch_kinematics' PseudoInverseIK and a Pinocchio DLS loop, on the same seeds and targets."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

import assets
from kinematics import DifferentiableIKCfg, DifferentiableIKLayer
from kinematics.batch_last import to_batch_last
from kinematics.ik import dls_step
from kinematics.ik.dls_step import DAMPED_GRAM, TRANSPOSED_PRODUCT
from kinematics.lie import pose_error_batch_last
from learning.benchmark import memory, peers
from learning.benchmark.config import BenchConfig
from learning.benchmark.failures import near_seed_failures
from learning.benchmark.problem import (
    DISTANT_SEED,
    NEAR_SEED,
    NEAR_SEED_NOISE,
    OPT_IN_SETTINGS,
    TARGET_KINDS,
    ik_problem,
)
from learning.benchmark.timing import measure
from learning.common.panda import franka_kinematics

PK_DEFAULT_RETRIES = 10
FAILURE_BATCH, FAILURE_BATCH_QUICK = 8192, 64
METHODS = {
    "ours.forward": "DifferentiableIKLayer.solve under torch.no_grad (fixed iterations, damping 0.05, "
    "step 0.5, joint-limit projection every step)",
    "ours.opt_in": "DifferentiableIKLayer.solve under torch.no_grad with the opt-in settings (damping 0.02, "
    "residual_damping 1, step 1, hold_joint_box: a joint whose step would leave its limits is held for that "
    "step)",
    "ours.forward_backward": "the same solve with autograd, then backward of sum(|position error|^2 + "
    "|rotation error|^2) to the seed and the target",
    "pk.matched": "pytorch_kinematics PseudoInverseIK seeded with our seeds (one retry), same iterations, "
    "lr = step size, regularlization = damping^2, lm_damping=0, clamp_to_limits=True, no early stopping, no "
    "final limit refinement, tolerances = ours",
    "pk.defaults": f"pytorch_kinematics PseudoInverseIK with its defaults (max_iterations=50, lr=1, "
    "lm_damping=0.1, tolerances 1e-3 m / 1e-2 rad, early stop on no improvement, final wrap-and-clamp "
    f"refinement) plus {PK_DEFAULT_RETRIES} uniform random retries and early_stopping_any_converged=True; "
    "best retry per target",
    "pin.dls": "Pinocchio (float64, CPU) DLS loop per target in Python: computeJointJacobians + "
    "updateFramePlacement + getFrameJacobian(LOCAL_WORLD_ALIGNED), the same error (position, log3(R_t R^T)), "
    "damping, step and clamp",
}
COMPONENTS = {
    "fk_and_jacobian": "layer.model.fk_and_jacobian(q, tcp, batch_last=True): TCP pose and J^T, batch-last layout "
    "(the compiled kernel on the CPU)",
    "pose_error": "pose_error_batch_last: position and so3_log rotation error (6-vector), torch ops",
    "jjt_damped": "J J^T + damping^2 I as (B, 6, 6) matrices (compiled kernel on the CPU, else torch ops)",
    "solve_ex": "torch.linalg.solve_ex(A, e, check_errors=False) on the (B, 6, 6) column-major view",
    "jt_x": "J^T x (compiled kernel on the CPU, else torch ops)",
    "dls_update": "clamp(ik.dls_step(...)): clamp(q + step * J^T solve(J J^T + damping^2 I, e)) from J and e",
    "iteration": "one whole loop body: FK+J, error, DLS update",
}

Solve = Callable[[], tuple[torch.Tensor, dict]]


def _log(msg: str) -> None:
    print(f"[ik] {msg}", file=sys.stderr, flush=True)


class Solvers:
    """What one dtype needs: our IK layer, the float64 CPU layer that makes the inputs, and the peers."""

    def __init__(self, dtype: str, device: str, iterations: int, use_pk: bool, use_pin: bool) -> None:
        self.dtype, self.device = getattr(torch, dtype), torch.device(device)
        self.layer = franka_kinematics(self.device, self.dtype)
        self.ik = DifferentiableIKLayer(self.layer, DifferentiableIKCfg(iterations=iterations))
        self.layer64 = franka_kinematics("cpu", torch.float64)
        names = self.layer.joint_names
        self.pk_chain = (
            peers.pk_chain(
                assets.PANDA.urdf_text(),
                assets.PANDA.frames["tcp"],
                assets.PANDA.root_link,
                names,
                self.device,
                self.dtype,
            )
            if use_pk
            else None
        )
        self.pin_arm = peers.pin_arm(assets.PANDA.urdf_text(), assets.PANDA.frames["tcp"], names) if use_pin else None

    def cast(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.device, self.dtype)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def method(self, name: str, seeds64: torch.Tensor, targets64: torch.Tensor, seed: int) -> Solve:
        """A callable that solves every target once and returns ``(qpos (B, dof), extras)``."""
        return getattr(self, "_" + name.replace(".", "_"))(seeds64, targets64, seed)

    def _ours_forward(self, seeds64, targets64, seed) -> Solve:
        seeds, targets, ik = self.cast(seeds64), self.cast(targets64), self.ik

        def run():
            with torch.no_grad():
                return ik.solve(targets, seeds).q, {}

        return run

    def _ours_opt_in(self, seeds64, targets64, seed) -> Solve:
        seeds, targets = self.cast(seeds64), self.cast(targets64)
        ik = DifferentiableIKLayer(self.layer, DifferentiableIKCfg(iterations=self.ik.cfg.iterations,
                                                                   **OPT_IN_SETTINGS))  # fmt: skip

        def run():
            with torch.no_grad():
                return ik.solve(targets, seeds).q, {}

        return run

    def _ours_forward_backward(self, seeds64, targets64, seed) -> Solve:
        seeds, targets, ik = self.cast(seeds64), self.cast(targets64), self.ik

        def run():
            target = targets.clone().requires_grad_(True)
            start = seeds.clone().requires_grad_(True)
            result = ik.solve(target, start)
            loss = result.position_error.square().sum() + result.rotation_error.square().sum()
            loss.backward()
            return result.q.detach(), {"gradients": (target.grad, start.grad)}

        return run

    def _pk_matched(self, seeds64, targets64, seed) -> Solve:
        pk, cfg = peers.load("pk"), self.ik.cfg
        seeds, targets = self.cast(seeds64), self.cast(targets64)
        solver = pk.PseudoInverseIK(
            self.pk_chain,
            retry_configs=seeds,
            joint_limits=torch.stack((self.layer.lower, self.layer.upper), -1),
            max_iterations=cfg.iterations,
            lr=cfg.step_size,
            regularlization=cfg.damping**2,
            lm_damping=0.0,
            pos_tolerance=cfg.position_tolerance,
            rot_tolerance=cfg.rotation_tolerance,
            early_stopping_any_converged=False,
            early_stopping_no_improvement=None,
            clamp_to_limits=True,
            enforce_joint_limits=False,
        )
        # retry_configs (B, dof) would otherwise be B retries shared by every target; one retry per target
        # makes its (B * 1, dof) initial configs one seed per target, in order.
        solver.num_retries = 1

        def run():
            sol = solver.solve(pk.Transform3d(matrix=targets))
            return sol.solutions[:, 0], {"converged_own_tolerance": sol.converged_any}

        return run

    def _pk_defaults(self, seeds64, targets64, seed) -> Solve:
        pk, targets = peers.load("pk"), self.cast(targets64)
        torch.manual_seed(seed)  # Its retry configurations come from the global generator.
        solver = pk.PseudoInverseIK(
            self.pk_chain,
            num_retries=PK_DEFAULT_RETRIES,
            joint_limits=torch.stack((self.layer.lower, self.layer.upper), -1),
            early_stopping_any_converged=True,
        )

        def run():
            sol = solver.solve(pk.Transform3d(matrix=targets))
            score = torch.where(sol.converged, -1.0, sol.err_pos + sol.err_rot)
            best = score.argmin(-1)
            qpos = sol.solutions[torch.arange(best.shape[0], device=best.device), best]
            return qpos, {"converged_own_tolerance": sol.converged_any}

        return run

    def _pin_dls(self, seeds64, targets64, seed) -> Solve:
        arm, cfg = self.pin_arm, self.ik.cfg
        log3 = arm.pin.log3
        lower, upper = self.layer64.lower.numpy(), self.layer64.upper.numpy()
        if not cfg.enforce_joint_limits:
            lower, upper = np.full_like(lower, -np.inf), np.full_like(upper, np.inf)
        seeds, targets = seeds64.numpy(), targets64.numpy()
        damping_sq = cfg.damping**2 * np.eye(6)

        def run():
            out = np.empty_like(seeds)
            for i in range(seeds.shape[0]):
                q = np.clip(seeds[i], lower, upper)
                rot_t, pos_t = targets[i, :3, :3], targets[i, :3, 3]
                for _ in range(cfg.iterations):
                    placement, jac = arm.fk_jacobian(q)
                    err = np.concatenate((pos_t - placement.translation, log3(rot_t @ placement.rotation.T)))
                    step = jac.T @ np.linalg.solve(jac @ jac.T + damping_sq, err)
                    q = np.clip(q + cfg.step_size * step, lower, upper)
                out[i] = q
            return self.cast(torch.from_numpy(out)), {}

        return run

    def components(self, seeds64: torch.Tensor, targets64: torch.Tensor) -> dict[str, Callable[[], object]]:
        """Callables for the parts of one DLS iteration at these inputs, with the functions
        ``DifferentiableIKLayer.solve`` runs, in its batch-last layout."""
        kin, cfg = self.layer, self.ik.cfg
        model, tcp = kin.model, kin.tcp
        lower, upper = kin.lower[:, None], kin.upper[:, None]
        q = torch.clamp(to_batch_last(self.cast(seeds64), 1), lower, upper)
        target = self.cast(targets64)
        target_rot, target_pos = to_batch_last(target[..., :3, :3], 2), to_batch_last(target[..., :3, 3], 1)
        damping_sq = cfg.damping**2 * torch.eye(6, dtype=q.dtype, device=q.device)[..., None]
        rot, pos, jac_t = model.fk_and_jacobian(q, tcp, batch_last=True)
        err = torch.cat(pose_error_batch_last(target_rot, target_pos, rot, pos))
        damped = DAMPED_GRAM(jac_t, damping_sq).mT
        x = torch.linalg.solve_ex(damped, err.T[..., None], check_errors=False)[0][..., 0]

        def update(jac_t, err):
            return torch.clamp(dls_step(q, jac_t, err, damping_sq, cfg.step_size), lower, upper)

        def iteration():
            rot, pos, jac_t = model.fk_and_jacobian(q, tcp, batch_last=True)
            return update(jac_t, torch.cat(pose_error_batch_last(target_rot, target_pos, rot, pos)))

        return {
            "fk_and_jacobian": lambda: model.fk_and_jacobian(q, tcp, batch_last=True),
            "pose_error": lambda: torch.cat(pose_error_batch_last(target_rot, target_pos, rot, pos)),
            "jjt_damped": lambda: DAMPED_GRAM(jac_t, damping_sq),
            "solve_ex": lambda: torch.linalg.solve_ex(damped, err.T[..., None], check_errors=False),
            "jt_x": lambda: TRANSPOSED_PRODUCT(jac_t, x),
            "dls_update": lambda: update(jac_t, err),
            "iteration": iteration,
        }


def _stats(x: torch.Tensor) -> dict:
    x = x.detach().to("cpu", torch.float64)
    return {"mean": float(x.mean()), "median": float(x.median()), "max": float(x.max())}


def accuracy(solvers: Solvers, targets64: torch.Tensor, qpos: torch.Tensor, extras: dict, ours=None) -> dict:
    """Success and residuals of ``qpos`` by this project's criteria, every row (failed ones included)."""
    result = solvers.ik.evaluate(solvers.cast(targets64), solvers.cast(qpos.detach()))
    out = {
        "success_rate": float(result.success.float().mean()),
        "within_limits_rate": float(result.within_limits.float().mean()),
        "position_error_m": _stats(result.position_error_norm),
        "rotation_error_rad": _stats(result.rotation_error_norm),
    }
    if "converged_own_tolerance" in extras:
        out["converged_own_tolerance_rate"] = float(extras["converged_own_tolerance"].float().mean())
    if "gradients" in extras:
        out["gradients_finite"] = bool(all(torch.isfinite(g).all() for g in extras["gradients"]))
    if ours is not None:
        out["max_abs_qpos_diff_vs_ours"] = float((solvers.cast(qpos.detach()) - ours).abs().max())
    return out


def _memory(mode: str, solvers: Solvers, fn: Solve, spec: dict) -> dict:
    out = {"cpu_mode": mode, "cpu_peak_rss_delta_bytes": None, "cuda_peak_bytes": None}
    if mode == "hwm":
        out["cpu_peak_rss_delta_bytes"] = memory.rss_peak_delta_hwm(fn)
    elif mode == "subprocess":
        out["cpu_peak_rss_delta_bytes"] = memory.rss_peak_delta_subprocess(spec)
    if solvers.device.type == "cuda":
        out["cuda_peak_bytes"] = memory.cuda_peak_delta(fn, solvers.device)
    return out


def probe_case(spec: dict) -> tuple[Callable[[], object], Callable[[], object]]:
    """For the memory probe: a batch-1 warm-up and the case itself, rebuilt from ``spec``'s fields."""
    method = spec["method"]
    solvers = Solvers(
        spec["dtype"], spec["device"], spec["iterations"], method.startswith("pk"), method.startswith("pin")
    )
    warm = solvers.method(method, *ik_problem(solvers.layer64, 1, spec["targets"], spec["seed"]), spec["seed"])
    run = solvers.method(
        method, *ik_problem(solvers.layer64, spec["batch"], spec["targets"], spec["seed"]), spec["seed"]
    )
    return warm, run


def _case(cfg: BenchConfig, solvers: Solvers, mem_mode: str, batch: int, kind: str) -> list[dict]:
    """Every method on one (dtype, batch, target kind): accuracy of a first call, memory, then timings."""
    seeds64, targets64 = ik_problem(solvers.layer64, batch, kind, cfg.seed)
    names = ["ours.forward", "ours.opt_in", "ours.forward_backward"]
    names += ["pk.matched", "pk.defaults"] if solvers.pk_chain is not None else []
    names += ["pin.dls"] if solvers.pin_arm is not None and batch <= cfg.pin_ik_max_batch else []
    fns = {name: solvers.method(name, seeds64, targets64, cfg.seed) for name in names}
    rows, ours_q = {}, None
    # The first call warms up and gives the answer whose accuracy is reported.
    for name, fn in fns.items():
        qpos, extras = fn()
        rows[name] = accuracy(solvers, targets64, qpos, extras, ours_q)
        ours_q = solvers.cast(qpos.detach()) if name == "ours.forward" else ours_q
    dtype = str(solvers.dtype).removeprefix("torch.")
    for name, fn in fns.items():
        spec = {
            "method": name,
            "batch": batch,
            "dtype": dtype,
            "targets": kind,
            "seed": cfg.seed,
            "iterations": cfg.iterations,
            "device": cfg.device,
        }
        rows[name]["memory"] = _memory(mem_mode if kind == NEAR_SEED else "off", solvers, fn, spec)
    timings = measure(fns, replace(cfg.ik_timing, warmup=0), solvers.sync)
    ours = timings["ours.forward"].median_s
    return [
        {
            "dtype": dtype,
            "batch": batch,
            "targets": kind,
            "method": name,
            **timing.as_dict(),
            "solves_per_s": batch / timing.median_s,
            "time_over_ours_forward": timing.median_s / ours,
            **rows[name],
        }
        for name, timing in timings.items()
    ]


def run(cfg: BenchConfig) -> dict:
    """Solve, time and measure every method at every dtype, batch and target kind; ``ik.json``'s body."""
    avail = peers.availability()
    notes = [f"{peer} skipped: {msg}" for peer, msg in avail.items() if msg]
    for note in notes:
        _log(note)
    mem_mode = memory.resolve_mode(cfg.memory)
    solves, components = [], []
    for dtype in cfg.ik_dtypes:
        solvers = Solvers(dtype, cfg.device, cfg.iterations, avail["pk"] is None, avail["pin"] is None)
        for batch in cfg.ik_batches:
            for kind in TARGET_KINDS:
                start = time.perf_counter()
                solves += _case(cfg, solvers, mem_mode, batch, kind)
                _log(f"{dtype} batch {batch} {kind}: {time.perf_counter() - start:.1f} s")
            seeds64, targets64 = ik_problem(solvers.layer64, batch, NEAR_SEED, cfg.seed)
            with torch.no_grad():
                parts = measure(solvers.components(seeds64, targets64), cfg.fk_timing, solvers.sync)
            for name, timing in parts.items():
                components.append({"dtype": dtype, "batch": batch, "component": name, **timing.as_dict()})
    notes += [
        f"{cfg.iterations} iterations for this project, pk.matched and pin.dls; targets = FK(configuration "
        f"uniform in the joint limits), the same for both kinds; {NEAR_SEED!r}: seeds = that configuration + "
        f"N(0, {NEAR_SEED_NOISE} rad) per joint, clamped; {DISTANT_SEED!r}: seeds = independent uniform "
        "configurations. Every method sees the same seeds and targets.",
        "Accuracy by this project's criteria for every method: success = position error <= 5e-4 m, rotation "
        "error <= 5e-4 rad and inside the joint limits; mean/median/max over all rows, failed rows included.",
        "Times are medians over repeats measured round-robin across the methods of a case, after one warm-up "
        "call whose answer gives the accuracy columns.",
        f"Pinocchio IK runs only at batch <= {cfg.pin_ik_max_batch} (a Python loop over targets and "
        "iterations; larger batches scale linearly).",
        _memory_note(mem_mode),
    ]
    start = time.perf_counter()
    layer64 = franka_kinematics("cpu", torch.float64)
    failures = near_seed_failures(
        layer64, FAILURE_BATCH_QUICK if cfg.quick else FAILURE_BATCH, cfg.seed, cfg.iterations
    )
    _log(f"failure analysis: {time.perf_counter() - start:.1f} s")
    return {
        "suite": "ik",
        "near_seed_failures": failures,
        "methods": METHODS,
        "component_descriptions": COMPONENTS,
        "solves": solves,
        "components": components,
        "speedups": [
            {k: r[k] for k in ("dtype", "batch", "targets", "method", "time_over_ours_forward")}
            for r in solves
            if r["method"] != "ours.forward"
        ],
        "notes": notes,
    }


def _memory_note(mode: str) -> str:
    what = {
        "hwm": "CPU memory: resident-set growth at the peak of one call over the level just before it (Linux "
        "VmHWM after resetting it through /proc/self/clear_refs, free heap pages trimmed first), in this "
        "process",
        "subprocess": "CPU memory: growth of getrusage ru_maxrss over one call in a fresh interpreter per "
        "case, "
        "after a batch-1 warm-up (understates when set-up peaked higher)",
        "off": "CPU memory not measured",
    }[mode]
    return what + f"; measured on {NEAR_SEED!r} targets only. On CUDA: torch.cuda.max_memory_allocated over one call."
