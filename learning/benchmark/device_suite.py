"""The arm's solve and the whole-body step on one torch device, batch 1 to 65,536, forward and forward+backward:
the run a GPU gets (``--device cuda``), and the same on the CPU to read it beside.

Rows, each at every batch:

- ``arm.solve``: ``DifferentiableIKLayer.solve`` on the Panda (``iterations`` DLS steps), the IK suite's "joint box,
  distant seed" targets, no graph;
- ``arm.solve+bwd``: the same solve with autograd to its targets and seeds, then the backward of its squared pose
  errors (the IK suite's ``ours.fwd+bwd``);
- ``wholebody.step``: ``WholeBodyIKLayer.step`` on the whole-body suite's problem (the G1 standing, its right hand
  reaching), no graph;
- ``wholebody.step+bwd``: the same step with autograd to the hand target, then ``sum().backward()``.

Each row names the path its calls take: on the CPU the compiled kernels where the native library loaded, on any
other device torch's ops (the kernels take CPU tensors only). A call that runs out of device memory is recorded as
such, and that row's larger batches are skipped. On CUDA each row also records the peak memory the caching
allocator handed out during one call.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import torch

from kinematics import DifferentiableIKCfg, DifferentiableIKLayer, KinematicTree, native
from kinematics.wholebody import WholeBodyIKCfg, standing_problem
from learning.benchmark import memory
from learning.benchmark.problem import targets_with_distant_seeds_in_joint_box
from learning.benchmark.report import _table, fmt_time
from learning.benchmark.timing import TimingPolicy, measure
from learning.benchmark.wholebody_suite import HAND, ROBOT, _targets
from learning.common.panda import franka_kinematics
from learning.common.provenance import provenance_line

BATCHES = (1, 16, 256, 4096, 65536)
ANCHOR_BATCH = 4096
# The published GPU anchor: mink-warp's time per IK solve at 4,096 worlds (its own problem, solver and GPU).
ANCHOR = {"name": "mink-warp", "per_solve_s": 2.68e-6, "batch": ANCHOR_BATCH}
METHODS = {
    "arm.solve": "DifferentiableIKLayer.solve on the Panda, the IK suite's distant-seed targets, no graph",
    "arm.solve+bwd": "the same solve with autograd to its targets and seeds, then backward of the squared pose errors",
    "wholebody.step": "WholeBodyIKLayer.step on the G1 standing, right hand reaching (the wholebody suite's), no graph",
    "wholebody.step+bwd": "the same step with autograd to the hand target, then sum().backward()",
}


def _log(msg: str) -> None:
    print(f"[device] {msg}", file=sys.stderr, flush=True)


def _arm(ik: DifferentiableIKLayer, batch: int, seed: int) -> dict[str, Callable]:
    problem = targets_with_distant_seeds_in_joint_box(ik.kinematics, batch, seed)
    targets, seeds = problem.targets, problem.seeds

    def solve():
        with torch.no_grad():
            return ik.solve(targets, seeds).q

    def solve_backward():
        target, start = targets.clone().requires_grad_(True), seeds.clone().requires_grad_(True)
        with torch.enable_grad():
            result = ik.solve(target, start)
            (result.position_error.square().sum() + result.rotation_error.square().sum()).backward()
        return target.grad

    return {"arm.solve": solve, "arm.solve+bwd": solve_backward}


def _wholebody(problem, batch: int, seed: int) -> dict[str, Callable]:
    layer = problem.layer
    flat = layer._targets(_targets(problem, layer.tree, batch, seed), torch.Size([batch]))  # step() takes a flat batch
    q = problem.q_stand.expand(batch, -1).contiguous()

    def step():
        with torch.no_grad():
            return layer.step(q, flat)[0]

    def step_backward():
        hand = flat[HAND].clone().requires_grad_(True)
        with torch.enable_grad():
            layer.step(q, {**flat, HAND: hand})[0].sum().backward()
        return hand.grad

    return {"wholebody.step": step, "wholebody.step+bwd": step_backward}


def _path(device: torch.device) -> str:
    return "compiled (C)" if device.type == "cpu" and native.library() is not None else "torch ops"


def _out_of_memory(error: BaseException) -> bool:
    return isinstance(error, torch.cuda.OutOfMemoryError) or (
        isinstance(error, RuntimeError) and "out of memory" in str(error).lower()
    )


def run(
    device: str = "cpu",
    batches=BATCHES,
    dtype_name: str = "float32",
    iterations: int = 16,
    timing: TimingPolicy | None = None,
    seed: int = 0,
) -> dict:
    timing = timing or TimingPolicy(min_repeats=10, budget_s=2.0, floor_repeats=3, repeat_s=0.02)
    where, dtype = torch.device(device), getattr(torch, dtype_name)
    cuda = where.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(where)) if cuda else (lambda: None)
    ik = DifferentiableIKLayer(franka_kinematics(where, dtype), DifferentiableIKCfg(iterations=iterations))
    tree = KinematicTree.from_urdf(ROBOT.urdf_text(), floating_base=True, dtype=dtype, device=where)
    problem = standing_problem(tree, ROBOT, cfg=WholeBodyIKCfg())
    results, notes, exhausted = [], [], set()
    for batch in batches:
        start = time.perf_counter()
        fns = {**_arm(ik, batch, seed), **_wholebody(problem, batch, seed)}
        fns = {name: fn for name, fn in fns.items() if name not in exhausted}
        for name, fn in list(fns.items()):  # a call that does not fit is found before the timing
            try:
                fn()
                sync()
            except Exception as error:
                if not _out_of_memory(error):
                    raise
                exhausted.add(name)
                del fns[name]
                notes.append(f"{name} ran out of device memory at batch {batch}: larger batches skipped")
                results.append({"batch": batch, "method": name, "error": "out of memory"})
                if cuda:
                    torch.cuda.empty_cache()
        timings = measure(fns, timing, sync)
        for name, t in timings.items():
            row = {"batch": batch, "method": name, **t.as_dict(), "per_row_s": t.median_s / batch, "path": _path(where)}
            if cuda:
                row["device_peak_bytes"] = memory.cuda_peak_delta(fns[name], where)
            results.append(row)
        _log(f"batch {batch}: {len(fns)} rows in {time.perf_counter() - start:.1f} s")
    order = list(METHODS)
    results.sort(key=lambda r: (r["batch"], order.index(r["method"])))
    return {
        "suite": f"device-{where.type}",
        "device": str(where) + (f" ({torch.cuda.get_device_name(where)})" if cuda else ""),
        "dtype": dtype_name,
        "iterations": iterations,
        "batches": list(batches),
        "methods": METHODS,
        "anchor": ANCHOR,
        "results": results,
        "notes": notes,
    }


def _anchor_line(doc: dict) -> str:
    anchor = doc["anchor"]
    at = {r["method"]: r for r in doc["results"] if r["batch"] == anchor["batch"] and "per_row_s" in r}
    if not at:
        return f"No row was measured at batch {anchor['batch']}, the anchor's."
    parts = [f"`{name}` {fmt_time(row['per_row_s'])} per row" for name, row in at.items()]
    return (
        f"At batch {anchor['batch']:,}: " + ", ".join(parts) + f". The published anchor: {anchor['name']}'s "
        f"{fmt_time(anchor['per_solve_s'])} per solve at {anchor['batch']:,} worlds (its own problem, solver and GPU; "
        "in mink's API a solve is one differential-IK QP, as `wholebody.step` is one cascade step here)."
    )


def markdown(doc: dict) -> str:
    lines = [f"# The arm's solve and the whole-body step on {doc['device']} ({doc['dtype']})", ""]
    if "meta" in doc:
        lines += [provenance_line(doc["meta"]["provenance"]), ""]
    cuda = any("device_peak_bytes" in r for r in doc["results"])
    header = ["batch", "row", "per call", "per row", "rows/s", "path", *(["device memory"] if cuda else [])]
    rows = []
    for r in doc["results"]:
        if "error" in r:
            rows.append([f"{r['batch']:,}", f"`{r['method']}`", r["error"], "—", "—", "—", *(["—"] if cuda else [])])
            continue
        memory_cell = [f"{r['device_peak_bytes'] / 2**20:.1f} MiB"] if cuda else []
        rows.append([f"{r['batch']:,}", f"`{r['method']}`", fmt_time(r["median_s"]), fmt_time(r["per_row_s"]),
                     f"{1 / r['per_row_s']:,.0f}", r["path"], *memory_cell])  # fmt: skip
    lines += [
        f"Medians per call, measured round-robin at each batch ({doc['iterations']} iterations for the arm's solve):",
        "",
        _table(header, rows),
        "",
        _anchor_line(doc),
        "",
        *[f"- `{name}`: {what}" for name, what in doc["methods"].items()],
        *[f"- {note}" for note in doc["notes"]],
        "",
    ]
    return "\n".join(lines)
