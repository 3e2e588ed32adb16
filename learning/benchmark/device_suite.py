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
other device torch's ops (the kernels take CPU tensors only). On CUDA each row also records the peak memory the
caching allocator handed out during one call.

A run is meant to be spent once on a lent machine, so it keeps what it measured whatever stops it:

- each row is timed on its own and handed to ``on_row`` as it is measured (the command line writes the JSON and
  markdown then), so a run killed at its time limit keeps every row it finished;
- ``previous`` (``--resume``) is an earlier, unfinished run of the same code, settings and device (``identity``;
  ``refusal`` says why another is not): its rows are kept and not measured again;
- a row that runs out of device memory (its first call or its timing) says so, and its larger batches are skipped;
- a row whose call would last longer than ``call_budget_s`` is not timed: its time at the next batch is predicted
  from its timed batches (``_predicted_s``), and where the prediction, or the first call, is over the budget the
  row says so and its larger batches are skipped.

After the timings, one call of each of ``PROFILED`` at ``profile_batch`` runs under ``torch.profiler``: each op's self
time (on CUDA the device time of the kernels it launched, else CPU time), the ``TOP_OPS`` largest, so that the one
run also says where a device's time goes. Where the profiler itself fails, a note says so and the timings stand.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from kinematics import DifferentiableIKCfg, DifferentiableIKLayer, KinematicTree, native
from kinematics.wholebody import WholeBodyIKCfg, standing_problem
from learning.benchmark import memory
from learning.benchmark.problem import targets_with_distant_seeds_in_joint_box
from learning.benchmark.report import _table, fmt_time
from learning.benchmark.timing import TimingPolicy, measure
from learning.benchmark.wholebody_suite import HAND, ROBOT, _targets
from learning.common.panda import franka_kinematics
from learning.common.progress import GridProgress
from learning.common.provenance import provenance_line

BATCHES = (1, 16, 256, 4096, 65536)
ANCHOR_BATCH = 4096
# A row whose one call would last longer is not timed, nor are its larger batches: a run fits a lent machine's time
# (a timed row costs about five calls: the first, at least three timed, and on CUDA none more for its memory).
CALL_BUDGET_S = 20.0
# Profiled once each at the profile batch (the anchor's by default): where a call's time goes, op by op.
PROFILED = ("arm.solve", "wholebody.step")
TOP_OPS = 12
HOST_READ = "aten::_local_scalar_dense"  # a tensor's value read by the host (.item(), bool()): on a GPU, a sync
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


def device_name(where: torch.device) -> str:
    return str(where) + (f" ({torch.cuda.get_device_name(where)})" if where.type == "cuda" else "")


def identity(doc: dict) -> dict:
    """What a resumed run must share with the run it goes on with: the code (commit and source fingerprint), the
    settings that change what is measured, the machine's device, torch and its threads, and the suite's own
    settings."""
    meta = doc.get("meta", {})
    made = meta.get("provenance", {})
    return {
        "commit": made.get("commit"),
        "source fingerprint": made.get("source_fingerprint"),
        "settings": made.get("settings"),
        "device": doc.get("device"),
        "torch": meta.get("torch"),
        "torch threads": meta.get("torch_threads"),
        "seed": meta.get("seed"),
        "quick": meta.get("quick"),
        "dtype": doc.get("dtype"),
        "iterations": doc.get("iterations"),
        "batches": doc.get("batches"),
    }


def refusal(previous: dict, current: dict) -> str | None:
    """Why ``previous`` (an earlier, unfinished run's document) cannot be resumed by the run whose ``identity`` is
    ``current``, or ``None``."""
    commit = current["commit"]
    if commit in (None, "unknown") or "+" in commit:
        return f"this checkout's commit is {commit!r}: only a run of a committed state resumes another"
    found = identity(previous)
    differ = [f"{key} {found[key]!r} (this run: {current[key]!r})" for key in current if found[key] != current[key]]
    return "the earlier run differs: " + ", ".join(differ) if differ else None


def _predicted_s(timed: list[tuple[int, float]], batch: int) -> float:
    """One call's seconds at ``batch`` from a row's timed ``(batch, seconds per call)``, largest batch last: the last
    time grown with the batch as it grew between the last two (a power of the batch between 0, flat while a device
    is bound by launching its ops, and 1, linear once it is saturated); linear from a single timing."""
    b1, t1 = timed[-1]
    exponent = 1.0
    if len(timed) > 1:
        b0, t0 = timed[-2]
        exponent = min(1.0, max(0.0, math.log(t1 / t0) / math.log(b1 / b0)))
    return t1 * (batch / b1) ** exponent


def run(
    device: str = "cpu",
    batches=BATCHES,
    dtype_name: str = "float32",
    iterations: int = 16,
    timing: TimingPolicy | None = None,
    seed: int = 0,
    call_budget_s: float = CALL_BUDGET_S,
    previous: dict | None = None,
    on_row: Callable[[dict], None] | None = None,
    progress: bool = True,
    profile_batch: int | None = ANCHOR_BATCH,
) -> dict:
    # no warm-up call in the timing: each row's first call (below, where a lack of memory is found) is its warm-up
    timing = timing or TimingPolicy(min_repeats=10, budget_s=2.0, floor_repeats=3, repeat_s=0.02, warmup=0)
    batches = sorted(set(batches))
    where, dtype = torch.device(device), getattr(torch, dtype_name)
    cuda = where.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(where)) if cuda else (lambda: None)
    ik = DifferentiableIKLayer(franka_kinematics(where, dtype), DifferentiableIKCfg(iterations=iterations))
    tree = KinematicTree.from_urdf(ROBOT.urdf_text(), floating_base=True, dtype=dtype, device=where)
    problem = standing_problem(tree, ROBOT, cfg=WholeBodyIKCfg())
    order = list(METHODS)
    doc = {
        "suite": f"device-{where.type}",
        "device": device_name(where),
        "dtype": dtype_name,
        "iterations": iterations,
        "batches": batches,
        "call_budget_s": call_budget_s,
        "methods": METHODS,
        "anchor": ANCHOR,
        "results": list(previous["results"]) if previous else [],
        "notes": list(previous["notes"]) if previous else [],
        "profile": None,
        "complete": False,
    }
    if previous:
        doc["notes"].append(
            f"resumed: {len(previous['results'])} rows kept from an earlier run of the same commit on "
            f"{previous['device']} ({previous.get('meta', {}).get('timestamp', 'time unknown')})"
        )
    kept = {(r["batch"], r["method"]) for r in doc["results"]}
    timed, failed_at = {}, {}  # method -> its timed (batch, seconds per call), batch order; -> its failed batch
    for r in sorted(doc["results"], key=lambda r: r["batch"]):
        if "median_s" in r:
            timed.setdefault(r["method"], []).append((r["batch"], r["median_s"]))
        if "error" in r:
            failed_at[r["method"]] = r["batch"]

    def skipped_after(name: str, failed: int) -> int:
        return sum(1 for b in batches if b > failed and (b, name) not in kept)

    bar = GridProgress("device", len(batches) * len(order), len(kept), log=_log, enabled=progress)
    bar.drop(sum(skipped_after(name, failed) for name, failed in failed_at.items()))

    def record(row: dict, note: str | None = None, text: str = "") -> None:
        doc["results"].append(row)
        doc["results"].sort(key=lambda r: (r["batch"], order.index(r["method"])))
        if note:
            doc["notes"].append(note)
        if "error" in row:
            failed_at[row["method"]] = row["batch"]
            bar.drop(skipped_after(row["method"], row["batch"]))
        bar.update(text or f"batch {row['batch']:,} {row['method']}: {row['error']}")
        if on_row is not None:
            on_row(doc)

    def over_budget(name: str, batch: int, why: str) -> None:
        record({"batch": batch, "method": name, "error": "over the call budget"},
               f"{name}: {why}, over the {fmt_time(call_budget_s)} call budget: not timed, nor its larger "
               "batches")  # fmt: skip

    try:
        for batch in batches:
            todo = [name for name in order if (batch, name) not in kept and name not in failed_at]
            if not todo:
                continue
            fns = {**_arm(ik, batch, seed), **_wholebody(problem, batch, seed)}
            for name in todo:
                fn = fns[name]
                if name in timed and (predicted := _predicted_s(timed[name], batch)) > call_budget_s:
                    last_batch, last_s = timed[name][-1]
                    over_budget(name, batch, f"about {fmt_time(predicted)} per call predicted at batch {batch:,} "
                                f"(from {fmt_time(last_s)} at {last_batch:,})")  # fmt: skip
                    continue
                out_of_memory = False
                try:  # the first call (on CUDA with its peak memory), then the timing
                    start, peak = time.perf_counter(), None
                    if cuda:
                        peak = memory.cuda_peak_delta(fn, where)
                    else:
                        fn()
                    first_s = time.perf_counter() - start
                    t = None if first_s > call_budget_s else measure({name: fn}, timing, sync)[name]
                except Exception as error:
                    if not _out_of_memory(error):
                        raise
                    out_of_memory = True
                if out_of_memory:  # past the handler: the error, and the frames holding the call's tensors, are gone
                    if cuda:
                        torch.cuda.empty_cache()
                    record({"batch": batch, "method": name, "error": "out of memory"},
                           f"{name} ran out of device memory at batch {batch}: larger batches skipped")  # fmt: skip
                    continue
                if t is None:
                    over_budget(name, batch, f"its first call at batch {batch:,} took {fmt_time(first_s)}")
                    continue
                row = {"batch": batch, "method": name, **t.as_dict(), "per_row_s": t.median_s / batch,
                       "path": _path(where), **({"device_peak_bytes": peak} if cuda else {})}  # fmt: skip
                timed.setdefault(name, []).append((batch, t.median_s))
                record(row, text=f"batch {batch:,} {name}: {fmt_time(t.median_s)} per call")
    finally:
        bar.close()
    profiled = [name for name in PROFILED if any(b == profile_batch for b, _ in timed.get(name, ()))]
    if profile_batch in batches and profiled:
        fns = {**_arm(ik, profile_batch, seed), **_wholebody(problem, profile_batch, seed)}
        _log(f"profiling one call of {', '.join(profiled)} at batch {profile_batch:,}")
        try:
            rows = {name: _profile(fns[name], cuda, sync) for name in profiled}
            doc["profile"] = {"batch": profile_batch, "rows": rows}
        except RuntimeError as error:  # the profiler's own failure (a machine without CUPTI): the timings stand
            doc["notes"].append(f"the profile at batch {profile_batch:,} failed, so none is shown: {error}")
            _log(doc["notes"][-1])
    doc["complete"] = True
    return doc


def _profile(fn: Callable, cuda: bool, sync: Callable[[], None]) -> dict:
    """One call of ``fn`` under ``torch.profiler``: the total self time and count of its op calls, how many read a
    value back to the host, and the ``TOP_OPS`` largest ops (name, calls, self seconds). The clock: on CUDA the device
    time of the kernels each op launched (the CPU's where the profiler recorded none), else the op's CPU time."""
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    with profile(activities=activities) as prof:
        fn()
        sync()
    # the ops, not the kernels they launched (device events) nor the CUDA runtime's calls (host events named cuda*)
    ops = [e for e in prof.key_averages() if e.device_type == DeviceType.CPU and not e.key.startswith("cuda")]
    clock, key = ("device", "self_device_time_total") if cuda else ("CPU", "self_cpu_time_total")
    if cuda and not any(getattr(e, key) for e in ops):
        clock, key = "CPU (the profiler recorded no device time)", "self_cpu_time_total"
    ops.sort(key=lambda e: getattr(e, key), reverse=True)
    return {
        "clock": clock,
        "total_s": sum(getattr(e, key) for e in ops) * 1e-6,
        "calls": sum(e.count for e in ops),
        "host_reads": sum(e.count for e in ops if e.key == HOST_READ),
        "ops": [{"op": e.key, "calls": e.count, "self_s": getattr(e, key) * 1e-6} for e in ops[:TOP_OPS]],
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
    if not doc["complete"]:
        planned = len(doc["batches"]) * len(doc["methods"])
        lines += [f"**Unfinished**: {len(doc['results'])} of {planned} rows so far; the same command with `--resume` "
                  "goes on from here.", ""]  # fmt: skip
    lines += [
        f"Medians per call, each row timed on its own ({doc['iterations']} iterations for the arm's solve):",
        "",
        _table(header, rows),
        "",
        _anchor_line(doc),
        "",
        *[f"- `{name}`: {what}" for name, what in doc["methods"].items()],
        f"- a row whose one call would last over {fmt_time(doc['call_budget_s'])} is not timed, nor are its larger "
        "batches",
        *[f"- {note}" for note in doc["notes"]],
        "",
        *_profile_lines(doc),
    ]
    return "\n".join(lines)


def _profile_lines(doc: dict) -> list[str]:
    profile = doc.get("profile")
    if not profile:
        return []
    batch = profile["batch"]
    timed = {r["method"]: r["median_s"] for r in doc["results"] if r["batch"] == batch and "median_s" in r}
    lines = [f"Where one call's time goes at batch {batch:,} (`torch.profiler`: each op's self time, the largest "
             f"{TOP_OPS}):", ""]  # fmt: skip
    for name, row in profile["rows"].items():
        total, call, clock = row["total_s"], timed.get(name), row["clock"]
        rest = ("the call's time beyond its kernels' is the device waiting on the host" if clock == "device" else
                "the call's time beyond its ops' ran outside torch's ops: on the CPU the compiled kernels, and Python")  # fmt: skip
        rows = [[f"`{op['op']}`", f"{op['calls']:,}", fmt_time(op["self_s"]),
                 f"{100 * op['self_s'] / total:.1f} %" if total > 0 else "—"] for op in row["ops"]]  # fmt: skip
        lines += [f"`{name}`: its ops' self {clock} time {fmt_time(total)} in the profiled call"
                  f"{f' (a timed call: {fmt_time(call)})' if call else ''}; {rest}. {row['calls']:,} op calls (views "
                  f"included: not every call launches a kernel), of which {row['host_reads']:,} read a value back to "
                  f"the host (`{HOST_READ}`: on a GPU, each a synchronisation).", "",
                  _table(["op", "calls", "self time", "of the ops'"], rows), ""]  # fmt: skip
    return lines
