"""FK and FK+Jacobian timings: this project, pytorch_kinematics and Pinocchio on the same configurations."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np
import torch

import assets
from learning.benchmark import peers
from learning.benchmark.config import BenchConfig
from learning.benchmark.problem import random_configs
from learning.benchmark.timing import measure
from learning.common.panda import franka_kinematics

# Reference of every ratio: the public, input-validating layer API.
OURS = "ours.layer"
METHODS = {
    "ours.layer": "KinematicsLayer.forward / .fk_and_jacobian (validates inputs)",
    "ours.raw": "layer.model.fk_and_jacobian(q, layer.tcp[, with_jacobian=False]) (no validation)",
    "pk": "pytorch_kinematics chain.forward_kinematics(q).get_matrix() [+ chain.jacobian(q)]: two calls for FK+J",
    "pk.one_pass": "pytorch_kinematics chain.jacobian(q, ret_eef_pose=True): FK and J from one pass",
    "pin.loop": "Pinocchio framesForwardKinematics [+ computeFrameJacobian(LOCAL_WORLD_ALIGNED)], Python "
    "loop over the batch, float64",
    "pin.single_x_batch": "batch x Pinocchio per-configuration time from a tight Python loop of N calls on "
    "one configuration (derived, not measured at this batch)",
}
OPS = ("fk", "fk+jac")


def _log(msg: str) -> None:
    print(f"[fk] {msg}", file=sys.stderr, flush=True)


def _pin_fns(arm: peers.PinArm, q64: np.ndarray) -> dict[str, Callable[[], object]]:
    pin, model, data, fid = arm.pin, arm.model, arm.data, arm.frame_id
    lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    rows = [np.ascontiguousarray(row) for row in q64]

    def fk():
        for q in rows:
            pin.framesForwardKinematics(model, data, q)

    def fk_jac():
        for q in rows:
            pin.framesForwardKinematics(model, data, q)
            pin.computeFrameJacobian(model, data, q, fid, lwa)

    return {"fk": fk, "fk+jac": fk_jac}


def _torch_fns(layer, chain, q: torch.Tensor) -> dict[tuple[str, str], Callable[[], object]]:
    model, tcp = layer.model, layer.tcp
    fns = {
        ("fk", "ours.layer"): lambda: layer(q),
        ("fk", "ours.raw"): lambda: model.fk_and_jacobian(q, tcp, with_jacobian=False),
        ("fk+jac", "ours.layer"): lambda: layer.fk_and_jacobian(q),
        ("fk+jac", "ours.raw"): lambda: model.fk_and_jacobian(q, tcp),
    }
    if chain is not None:
        fns[("fk", "pk")] = lambda: chain.forward_kinematics(q).get_matrix()
        fns[("fk+jac", "pk")] = lambda: (chain.forward_kinematics(q).get_matrix(), chain.jacobian(q))
        fns[("fk+jac", "pk.one_pass")] = lambda: chain.jacobian(q, ret_eef_pose=True)
    return fns


def _pin_single_fns(arm: peers.PinArm, q64: np.ndarray, calls: int) -> dict[str, Callable[[], object]]:
    """A tight Python loop of ``calls`` calls on one configuration (Pinocchio's Python API exposes no C++
    timer, so its per-call time includes the boost::python call overhead)."""
    return _pin_fns(arm, np.repeat(np.ascontiguousarray(q64[:1]), calls, 0))


def _row(dtype: str, batch: int, op: str, method: str, timing, calls: int | None = None) -> dict:
    row = {"dtype": dtype, "batch": batch, "op": op, "method": method, **timing.as_dict()}
    if calls is None:
        return {**row, "per_config_s": timing.median_s / batch}
    # Per-configuration time of the single-configuration loop, scaled to the batch.
    scale = batch / calls
    for key in ("median_s", "q1_s", "q3_s", "min_s"):
        row[key] = timing.as_dict()[key] * scale
    return {
        **row,
        "method": "pin.single_x_batch",
        "per_config_s": timing.median_s / calls,
        "calls": calls,
        "derived": True,
    }


def agreement(configs: torch.Tensor, pk_available: bool, pin_available: bool) -> dict:
    """Max absolute differences (float64, CPU) of TCP pose and Jacobian between this project and each peer."""
    layer = franka_kinematics("cpu", torch.float64)
    pose, jac = layer.fk_and_jacobian(configs)
    out = {}
    if pk_available:
        chain = peers.pk_chain(
            assets.PANDA.urdf_text(),
            assets.PANDA.frames["tcp"],
            assets.PANDA.root_link,
            layer.joint_names,
            "cpu",
            torch.float64,
        )
        pk_jac, pk_pose = chain.jacobian(configs, ret_eef_pose=True)
        out["pk"] = {
            "pose_max_abs": float((pk_pose - pose).abs().max()),
            "pose_fk_call_max_abs": float((chain.forward_kinematics(configs).get_matrix() - pose).abs().max()),
            "jacobian_max_abs": float((pk_jac - jac).abs().max()),
        }
    if pin_available:
        arm = peers.pin_arm(assets.PANDA.urdf_text(), assets.PANDA.frames["tcp"], layer.joint_names)
        pin_pose, pin_jac = [], []
        for q in configs.numpy():
            placement, j = arm.fk_jacobian(q)
            pin_pose.append(placement.homogeneous)
            pin_jac.append(j)
        out["pin"] = {
            "pose_max_abs": float(np.abs(np.stack(pin_pose) - pose.numpy()).max()),
            "jacobian_max_abs": float(np.abs(np.stack(pin_jac) - jac.numpy()).max()),
        }
    return {"configs": int(configs.shape[0]), "dtype": "float64", **out}


def run(cfg: BenchConfig) -> dict:
    """Measure every method at every dtype and batch; returns the ``fk.json`` document (without ``meta``)."""
    avail = peers.availability()
    notes = [f"{peer} skipped: {msg}" for peer, msg in avail.items() if msg]
    for note in notes:
        _log(note)
    has_pk, has_pin = avail["pk"] is None, avail["pin"] is None
    device = torch.device(cfg.device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    results = []
    layer64 = franka_kinematics("cpu", torch.float64)
    configs = {batch: random_configs(layer64, batch, cfg.seed) for batch in cfg.fk_batches}
    arm = peers.pin_arm(assets.PANDA.urdf_text(), assets.PANDA.frames["tcp"], layer64.joint_names) if has_pin else None
    for dtype_name in cfg.fk_dtypes:
        dtype = getattr(torch, dtype_name)
        layer = franka_kinematics(device, dtype)
        chain = None
        if has_pk:
            chain = peers.pk_chain(
                assets.PANDA.urdf_text(),
                assets.PANDA.frames["tcp"],
                assets.PANDA.root_link,
                layer.joint_names,
                device,
                dtype,
            )
        for batch in cfg.fk_batches:
            start = time.perf_counter()
            q = configs[batch].to(device, dtype)
            fns = _torch_fns(layer, chain, q)
            if arm is not None:
                for op, fn in _pin_fns(arm, configs[batch].numpy()).items():
                    fns[(op, "pin.loop")] = fn
                for op, fn in _pin_single_fns(arm, configs[batch].numpy(), cfg.pin_single_calls).items():
                    fns[(op, "pin.single")] = fn
            with torch.no_grad():
                timings = measure(fns, cfg.fk_timing, sync)
            for (op, method), timing in timings.items():
                calls = cfg.pin_single_calls if method == "pin.single" else None
                results.append(_row(dtype_name, batch, op, method, timing, calls))
            _log(f"{dtype_name} batch {batch}: {time.perf_counter() - start:.1f} s")
    ratios = speedups(results)
    notes += [
        "Times are medians of repeats measured round-robin across methods at each (dtype, batch).",
        "speedup = peer time / ours.layer time (> 1: this project is faster).",
        "Pinocchio runs in float64 on the CPU whatever the dtype/device of the row; its Python API exposes "
        "no C++ timer, so pin.loop is a Python loop over the batch and pin.single_x_batch is batch x the "
        "per-call time of a tight Python loop on one configuration: both include boost::python call overhead "
        "(2 calls per configuration for FK+J).",
    ]
    first_batch = cfg.fk_batches[0]
    check = configs[first_batch][:64] if first_batch >= 8 else random_configs(layer64, 64, cfg.seed + 7)
    return {
        "suite": "fk",
        "methods": METHODS,
        "results": results,
        "speedups": ratios,
        "agreement": agreement(check, has_pk, has_pin),
        "notes": notes,
    }


def speedups(results: list[dict]) -> list[dict]:
    """``method time / ours.layer time`` for every (dtype, batch, op) and every other method."""
    index = {(r["dtype"], r["batch"], r["op"], r["method"]): r["median_s"] for r in results}
    out = []
    for (dtype, batch, op, method), median in index.items():
        ours = index.get((dtype, batch, op, OURS))
        if method != OURS and ours:
            out.append({"dtype": dtype, "batch": batch, "op": op, "method": method, "speedup": median / ours})
    return out
