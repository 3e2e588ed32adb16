"""Whole-body kinematics timings on the Unitree G1: ``KinematicTree`` beside Pinocchio and pytorch_kinematics.

Ops (per batch of configurations): every frame's pose; one frame Jacobian (the left foot); the CoM and its
Jacobian; and the combined quantity of the whole-body target (all poses + CoM + CoM Jacobian + two frame Jacobians,
left foot and right hand, from one forward pass), in the public batch-first layout (``combined``) and in the
batch-last layout a batch-last solver reads (``combined.bl``); ``solver.bl`` is what such a solver consumes per step
(the state, CoM, CoM Jacobian and the two frame Jacobians, batch-last, no frame poses). ``ours`` is the free-flyer tree; ``ours.fixed`` the fixed-base tree,
the one pytorch_kinematics (no floating base) is compared with. Pinocchio runs a Python loop over the batch
(float64, at most ``pin_max_batch`` configurations, reported per configuration).
"""

from __future__ import annotations

import contextlib
import io
import sys
import time

import numpy as np
import torch

import assets
from kinematics import KinematicTree
from learning.benchmark import peers
from learning.benchmark.report import _table, fmt_time, fmt_x
from learning.benchmark.timing import TimingPolicy, measure
from learning.common.provenance import provenance_line

FOOT, HAND = assets.G1.frames["left_foot"], assets.G1.frames["right_hand"]
OPS = ("poses", "jacobian", "com+jcom", "combined", "combined.bl", "solver.bl")
METHODS = {
    "ours": "KinematicTree(floating_base=True): frame_poses / frame_jacobian / center_of_mass + com_jacobian; "
    "combined = forward_kinematics once, then all of them from the state, batch-first (..., n, 4, 4) / (..., 6, nv); "
    "combined.bl = the same quantities batch-last (frame_poses(..., batch_last=True) (n_frames, 3, 4, B), "
    "center_of_mass (3, B), com_jacobian (3, nv, B), frame_jacobian (6, nv, B)); "
    "solver.bl = combined.bl without the frame poses. No-grad inputs on the CPU run the compiled kernels "
    "(kinematics.native); with autograd the torch pass runs",
    "ours.fixed": "the same on the fixed-base tree (what pytorch_kinematics can describe)",
    "pin.loop": "Pinocchio (free flyer, float64), Python loop over the configurations: framesForwardKinematics / "
    "computeFrameJacobian(LOCAL_WORLD_ALIGNED) / jacobianCenterOfMass; combined and combined.bl = "
    "computeJointJacobians + framesForwardKinematics + jacobianCenterOfMass + two getFrameJacobian; solver.bl = the "
    "same without framesForwardKinematics",
    "pk": "pytorch_kinematics on the fixed-base tree: build_chain_from_urdf(...).forward_kinematics(q) (all frames); "
    "jacobian: build_serial_chain_from_urdf(pelvis -> left foot).jacobian(q)",
}


def _log(msg: str) -> None:
    print(f"[tree] {msg}", file=sys.stderr, flush=True)


def _urdf() -> tuple[str, str]:
    path = assets.G1.urdf_path()
    return str(path), path.read_text()


def random_configs(tree: KinematicTree, batch: int, seed: int) -> torch.Tensor:
    """Float64 configurations: base within 2 m of the origin, any orientation, joints uniform in their limits."""
    g = torch.Generator().manual_seed(seed)
    lower, upper = tree.joint_lower.double(), tree.joint_upper.double()
    joints = lower + (upper - lower) * torch.rand(batch, len(lower), generator=g, dtype=torch.float64)
    quat = torch.randn(batch, 4, generator=g, dtype=torch.float64)
    position = 2.0 * torch.rand(batch, 3, generator=g, dtype=torch.float64) - 1.0
    return torch.cat((position, quat / quat.norm(dim=-1, keepdim=True), joints), -1)


def _ours(tree: KinematicTree, q: torch.Tensor) -> dict:
    def com():
        state = tree.forward_kinematics(q)
        return tree.center_of_mass(state), tree.com_jacobian(state)

    def combined():
        state = tree.forward_kinematics(q)
        return (
            tree.frame_poses(state),
            tree.center_of_mass(state),
            tree.com_jacobian(state),
            tree.frame_jacobian(state, FOOT),
            tree.frame_jacobian(state, HAND),
        )

    def solver(state):
        return (
            tree.center_of_mass(state, batch_last=True),
            tree.com_jacobian(state, batch_last=True),
            tree.frame_jacobian(state, FOOT, batch_last=True),
            tree.frame_jacobian(state, HAND, batch_last=True),
        )

    def combined_batch_last():
        state = tree.forward_kinematics(q)
        return tree.frame_poses(state, batch_last=True), *solver(state)

    return {
        "poses": lambda: tree.frame_poses(q),
        "jacobian": lambda: tree.frame_jacobian(q, FOOT),
        "com+jcom": com,
        "combined": combined,
        "combined.bl": combined_batch_last,
        "solver.bl": lambda: solver(tree.forward_kinematics(q)),
    }


def _pin(path: str, tree: KinematicTree, q: np.ndarray) -> dict:
    pin = peers.load("pin")
    model = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
    data = model.createData()
    index = [model.joints[model.getJointId(n)].idx_q for n in tree.joint_names]
    rows = []
    for qi in q:
        qp = pin.neutral(model)
        qp[:7], qp[index] = qi[:7], qi[7:]
        rows.append(qp)
    foot, hand = model.getFrameId(FOOT), model.getFrameId(HAND)
    lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED

    def poses():
        for qp in rows:
            pin.framesForwardKinematics(model, data, qp)

    def jacobian():
        for qp in rows:
            pin.computeFrameJacobian(model, data, qp, foot, lwa)

    def com():
        for qp in rows:
            pin.jacobianCenterOfMass(model, data, qp)

    def combined():
        for qp in rows:
            pin.computeJointJacobians(model, data, qp)
            pin.framesForwardKinematics(model, data, qp)
            pin.jacobianCenterOfMass(model, data, qp)
            pin.getFrameJacobian(model, data, foot, lwa)
            pin.getFrameJacobian(model, data, hand, lwa)

    def solver():
        for qp in rows:
            pin.computeJointJacobians(model, data, qp)
            pin.jacobianCenterOfMass(model, data, qp)
            pin.getFrameJacobian(model, data, foot, lwa)
            pin.getFrameJacobian(model, data, hand, lwa)

    return {
        "poses": poses,
        "jacobian": jacobian,
        "com+jcom": com,
        "combined": combined,
        "combined.bl": combined,
        "solver.bl": solver,
    }


def _pk(text: str, tree: KinematicTree, dtype: torch.dtype, q_joints: torch.Tensor) -> dict:
    pk = peers.load("pk")
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        chain = pk.build_chain_from_urdf(text).to(dtype=dtype)
        serial = pk.build_serial_chain_from_urdf(text, FOOT, tree.root_link_name).to(dtype=dtype)
    names = chain.get_joint_parameter_names()
    order = [tree.joint_names.index(n) for n in names]
    q_chain = q_joints[:, order].contiguous()
    serial_order = [tree.joint_names.index(n) for n in serial.get_joint_parameter_names()]
    q_serial = q_joints[:, serial_order].contiguous()
    return {
        "poses": lambda: chain.forward_kinematics(q_chain),
        "jacobian": lambda: serial.jacobian(q_serial),
    }


def run(
    batches=(1, 64, 1024, 8192),
    dtypes=("float32", "float64"),
    timing: TimingPolicy | None = None,
    pin_max_batch: int = 1024,
    seed: int = 0,
) -> dict:
    """Measure every op and method; returns the ``tree.json`` document (without ``meta``)."""
    timing = timing or TimingPolicy(budget_s=1.0)
    avail = peers.availability()
    notes = [f"{peer} skipped: {msg}" for peer, msg in avail.items() if msg]
    path, text = _urdf()
    results = []
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        tree = KinematicTree.from_urdf(text, floating_base=True, dtype=dtype)
        fixed = KinematicTree.from_urdf(text, floating_base=False, dtype=dtype)
        for batch in batches:
            start = time.perf_counter()
            q64 = random_configs(tree, batch, seed)
            q = q64.to(dtype)
            fns = {(op, "ours"): fn for op, fn in _ours(tree, q).items()}
            fns |= {(op, "ours.fixed"): fn for op, fn in _ours(fixed, q[:, 7:].contiguous()).items()}
            pin_batch = min(batch, pin_max_batch)
            if avail["pin"] is None:
                fns |= {(op, "pin.loop"): fn for op, fn in _pin(path, tree, q64[:pin_batch].numpy()).items()}
            if avail["pk"] is None:
                fns |= {(op, "pk"): fn for op, fn in _pk(text, fixed, dtype, q[:, 7:]).items()}
            with torch.no_grad():
                timings = measure(fns, timing)
            for (op, method), t in timings.items():
                configs = pin_batch if method == "pin.loop" else batch
                results.append(
                    {
                        "dtype": dtype_name,
                        "batch": batch,
                        "op": op,
                        "method": method,
                        **t.as_dict(),
                        "configs": configs,
                        "per_config_s": t.median_s / configs,
                    }
                )
            _log(f"{dtype_name} batch {batch}: {time.perf_counter() - start:.1f} s")
    notes += [
        "Times are medians of repeats measured round-robin across methods at each (dtype, batch).",
        "ratio = peer time per configuration / ours time per configuration (> 1: this project is faster); pk is "
        "compared with ours.fixed.",
        f"pin.loop runs at most {pin_max_batch} configurations of the batch (float64 whatever the row's dtype); its "
        "time per configuration includes the boost::python call overhead.",
    ]
    return {
        "suite": "tree",
        "robot": assets.G1.urdf_file,
        "methods": METHODS,
        "results": results,
        "ratios": ratios(results),
        "notes": notes,
    }


def ratios(results: list[dict]) -> list[dict]:
    """Per-configuration time of each peer over ours (pk over ours.fixed)."""
    index = {(r["dtype"], r["batch"], r["op"], r["method"]): r["per_config_s"] for r in results}
    out = []
    for (dtype, batch, op, method), per_config in index.items():
        ours = index.get((dtype, batch, op, "ours.fixed" if method == "pk" else "ours"))
        if method in ("pin.loop", "pk") and ours:
            out.append({"dtype": dtype, "batch": batch, "op": op, "method": method, "ratio": per_config / ours})
    return out


def markdown(doc: dict) -> str:
    """Per-configuration times and ratios, one table per dtype."""
    index = {(r["dtype"], r["batch"], r["op"], r["method"]): r for r in doc["results"]}
    ratio = {(r["dtype"], r["batch"], r["op"], r["method"]): r["ratio"] for r in doc["ratios"]}
    lines = [
        f"# Whole-body kinematics: {doc['robot'].split('/')[-1]} (KinematicTree vs Pinocchio, pytorch_kinematics)",
        "",
    ]
    if "meta" in doc:
        lines += [provenance_line(doc["meta"]["provenance"]), ""]
    headers = [
        "batch",
        "op",
        "ours total",
        "ours / config",
        "ours.fixed / config",
        "pin.loop / config",
        "pin ratio",
        "pk / config",
        "pk ratio",
    ]
    for dtype in sorted({r["dtype"] for r in doc["results"]}):
        rows = []
        for batch in sorted({r["batch"] for r in doc["results"]}):
            for op in OPS:
                get = lambda m: index.get((dtype, batch, op, m))  # noqa: E731, B023
                ours = get("ours")
                if ours is None:
                    continue
                per = lambda m: fmt_time(get(m)["per_config_s"]) if get(m) else "—"  # noqa: E731, B023
                rows.append(
                    [
                        str(batch),
                        op,
                        fmt_time(ours["median_s"]),
                        per("ours"),
                        per("ours.fixed"),
                        per("pin.loop"),
                        fmt_x(ratio.get((dtype, batch, op, "pin.loop"))),
                        per("pk"),
                        fmt_x(ratio.get((dtype, batch, op, "pk"))),
                    ]
                )
        lines += [f"## {dtype}", "", _table(headers, rows), ""]
    lines += ["## Methods", ""] + [f"- `{k}`: {v}" for k, v in doc["methods"].items()]
    lines += ["", "## Notes", ""] + [f"- {n}" for n in doc["notes"]]
    return "\n".join(lines) + "\n"
