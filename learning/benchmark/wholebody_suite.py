"""The whole-body layer on the Unitree G1 standing and reaching with its right hand (two foot contacts, the CoM
in the support polygon, one hand frame task, posture, joint and step limits; 35 velocity variables), beside
its peers' per-configuration loops (pink, PlaCo, mink: ``learning.benchmark.wholebody_peers``) on the closest problem
each can state.

Measured per row: one cascade step (``WholeBodyIKLayer.step``: forward kinematics, the cascade, the integration;
forward compiled and as the torch composition, and forward+backward compiled and as the torch composition), a
solve of that one step through ``solve`` (the inputs checked and the result evaluated too), a full solve of
``iterations`` steps (forward; forward+backward unrolled; forward+backward implicit), and the peak resident memory of
the implicit and unrolled backward at 16 and 128 iterations. Each peer's row is one step per configuration of the
batch (at most 64 of them), what ``wholebody_peers.DIFFERENCES`` says it includes.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

import assets
from kinematics import KinematicTree
from kinematics.wholebody import ComInSupportPolygon, WholeBodyIKCfg, WholeBodyStepper, standing_problem, step_plan
from learning.benchmark import contention, control_loop, peers, wholebody_peers
from learning.benchmark.goals import goal, ratio
from learning.benchmark.memory import hwm_supported, rss_peak_delta_hwm
from learning.benchmark.report import _table, fmt_time, fmt_x
from learning.benchmark.timing import TimingPolicy, measure
from learning.common.provenance import provenance_line

ROBOT = assets.G1
HAND = "right_hand"
PEER_ROWS = 64  # configurations each peer loops over (one at a time)
PEERS = ("pink.loop", "placo.loop", "mink.loop")
METHODS = {
    "step": "WholeBodyIKLayer.step: one strict-cascade step (hand level, posture level; contacts, polygon, limits as "
    "constraints) of a flat batch: forward kinematics, the cascade's QPs, the integration; no graph",
    "stepper.step": "WholeBodyStepper.step after set_target of the hand's target: the same step for a batch whose "
    "targets are set in place (a control loop's; PlaCo's and mink's shape), checked and bound once",
    "stepper.step+vjp": "the stepper's step, then its vector-Jacobian product to the hand's target "
    "(WholeBodyStepper.vjp: the compiled backward of the step just taken, no autograd graph)",
    "step.torch": "the same step as the torch composition (the compiled step's reference: what runs under autograd, "
    "on other devices and for a layer the compiled plan does not encode)",
    "step+bwd": "the same step with autograd to the hand target (q without a graph: the compiled step and its compiled "
    "backward), then backward",
    "step+bwd.q": "the same step with autograd to q and the hand target (an unrolled solve's later steps, the implicit "
    "adjoint's step): the compiled step and backward, the kinematics' derivative w.r.t. q by autograd through the "
    "tree's torch functions",
    "step+bwd.anchors": "the step with autograd to both contacts' anchors (through the support polygon prepared "
    "from them), then backward: the compiled step and backward, the polygon's preparation compiled both ways",
    "step+bwd.torch": "the step with autograd to q and the hand target through the torch composition (what autograd "
    "recorded there before the compiled backward took q)",
    "solve.1": "WholeBodyIKLayer.solve with one iteration: the step above, the inputs checked and the result evaluated "
    "(forward kinematics again, every task's residual and success, every constraint's violation), no graph",
    "solve": "a full solve of `iterations` steps, no graph",
    "solve+bwd.unrolled": "the same with autograd through every step, then backward to the hand target",
    "solve+bwd.implicit": "forward without a graph, backward by the implicit adjoint (one step's graph: up to batch "
    "128 each row's step derivative formed by batched reverse passes, above it one vector-Jacobian product per "
    "adjoint iteration)",
    **wholebody_peers.DIFFERENCES,
}


def _log(msg: str) -> None:
    print(f"[wholebody] {msg}", file=sys.stderr, flush=True)


def _targets(problem, tree: KinematicTree, batch: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    T = tree.frame_pose(problem.q_stand, ROBOT.frames[HAND]).expand(batch, 4, 4).clone()
    offset = torch.rand(batch, 3, generator=g, dtype=torch.float64) * torch.tensor([0.2, 0.2, 0.2]) - 0.1
    T[:, :3, 3] += offset.to(T.device, T.dtype)
    return {**problem.fixed_targets, HAND: T}


def _ours(problem, targets: dict, iterations: int, batch: int, full_solve: bool) -> dict:
    layer, seed = problem.layer, problem.q_stand
    flat = layer._targets(targets, torch.Size([batch]))  # step() takes a flat batch: every target (batch, ...)
    q = seed.expand(batch, seed.shape[-1]).contiguous()

    def backward(model):
        def run():
            hand = targets[HAND].clone().requires_grad_(True)
            with torch.enable_grad():
                model.solve({**targets, HAND: hand}, seed, iterations=iterations).q.sum().backward()
            return hand.grad

        return run

    def step_backward():
        hand = flat[HAND].clone().requires_grad_(True)
        with torch.enable_grad():
            layer.step(q, {**flat, HAND: hand})[0].sum().backward()
        return hand.grad

    def configuration_step_backward():
        hand, q_leaf = flat[HAND].clone().requires_grad_(True), q.clone().requires_grad_(True)
        with torch.enable_grad():
            layer.step(q_leaf, {**flat, HAND: hand})[0].sum().backward()
        return hand.grad

    def anchors_step_backward():
        feet = {name: flat[name].clone().requires_grad_(True) for name in contacts}
        with torch.enable_grad():
            layer.step(q, {**flat, **feet})[0].sum().backward()
        return [foot.grad for foot in feet.values()]

    def stepper_step():
        stepper.set_target(HAND, flat[HAND])
        return stepper.step(q)

    def stepper_step_vjp():
        stepper.set_target(HAND, flat[HAND])
        stepper.step(q)
        return stepper.vjp(grad_q_next, targets=(HAND,)).targets[HAND]

    def torch_step_backward():
        hand, q_leaf = flat[HAND].clone().requires_grad_(True), q.clone().requires_grad_(True)
        with torch.enable_grad():
            inputs = step_plan.kernel_inputs(layer, {**flat, HAND: hand}, prepared)
            layer.reference_steps(q_leaf, inputs, 1)[0].sum().backward()
        return hand.grad

    prepared = layer.prepare(flat)
    inputs = step_plan.kernel_inputs(layer, flat, prepared)
    contacts = [c.name for c in layer.constraints if c.needs_target]
    stepper = WholeBodyStepper(layer, flat)
    grad_q_next = torch.ones_like(q)  # what sum() hands back, as step+bwd's
    fns = {
        "step": lambda: layer.step(q, flat),
        "stepper.step": stepper_step,
        "stepper.step+vjp": stepper_step_vjp,
        "step.torch": lambda: layer.reference_steps(q, inputs, 1),
        "step+bwd": step_backward,
        "step+bwd.q": configuration_step_backward,
        "step+bwd.anchors": anchors_step_backward,
        "step+bwd.torch": torch_step_backward,
        "solve.1": lambda: layer.solve(targets, seed, iterations=1),
    }
    if not full_solve:
        return fns
    implicit = standing_problem(layer.tree, ROBOT, cfg=WholeBodyIKCfg(iterations=iterations, gradient="implicit"))
    fns["solve"] = lambda: layer.solve(targets, seed, iterations=iterations)
    fns["solve+bwd.unrolled"] = backward(layer)
    fns["solve+bwd.implicit"] = backward(implicit.layer)
    return fns


def _memory(tree: KinematicTree, problem, targets: dict, counts=(16, 128)) -> list[dict]:
    if not hwm_supported():
        return []
    rows = []
    for gradient in ("implicit", "unrolled"):
        for iterations in counts:
            layer = standing_problem(tree, ROBOT, cfg=WholeBodyIKCfg(iterations=iterations, gradient=gradient)).layer

            def run(layer=layer):
                hand = targets[HAND].clone().requires_grad_(True)
                with torch.enable_grad():
                    layer.solve({**targets, HAND: hand}, problem.q_stand).q.sum().backward()

            run()  # once before: what the first call allocates for good (caches, pools) is not the backward's
            # the least of three calls' peaks: the allocator's state adds a few MiB to some calls, never takes any off
            peak = min(rss_peak_delta_hwm(run) for _ in range(3))
            rows.append({"gradient": gradient, "iterations": iterations, "peak_bytes": peak})
    return rows


def run(
    batches=(1, 64, 1024),
    dtype_name: str = "float32",
    iterations: int = 16,
    full_solve_max_batch: int = 64,
    memory_batch: int = 8,
    timing: TimingPolicy | None = None,
    seed: int = 0,
    control_loop_steps: int = 10_000,
    contention_batch: int = 1024,
    contention_repeats: int = 15,
) -> dict:
    timing = timing or TimingPolicy(min_repeats=15, budget_s=3.0, floor_repeats=3, repeat_s=0.02)
    dtype = getattr(torch, dtype_name)
    tree = KinematicTree.from_urdf(ROBOT.urdf_text(), floating_base=True, dtype=dtype)
    problem = standing_problem(tree, ROBOT, cfg=WholeBodyIKCfg(iterations=iterations))
    notes = [f"{peer} skipped: {msg}" for peer, msg in peers.availability().items() if msg]
    peer_rows = min(max(batches), PEER_ROWS)
    margin = next(c.margin for c in problem.layer.constraints if isinstance(c, ComInSupportPolygon))
    posture_cost = float(problem.layer.tasks["posture"].cost().max())
    hands = _targets(problem, tree, peer_rows, seed)[HAND]
    peer_loops, missing = wholebody_peers.loops(problem, ROBOT, HAND, hands, margin, posture_cost)
    notes += missing
    results = []
    for batch in batches:
        start = time.perf_counter()
        targets = _targets(problem, tree, batch, seed)
        fns = {
            (op, "ours"): fn
            for op, fn in _ours(problem, targets, iterations, batch, batch <= full_solve_max_batch).items()
        }
        for method, loop in peer_loops.items():  # the same configurations at every batch: one row each
            fns[("step", method)] = loop
        with torch.no_grad():
            timings = measure(fns, timing)
        for (op, method), t in timings.items():
            rows = peer_rows if method in peer_loops else batch
            results.append(
                {
                    "batch": batch,
                    "op": op,
                    "method": method,
                    **t.as_dict(),
                    "rows": rows,
                    "per_row_s": t.median_s / rows,
                }
            )
        _log(f"batch {batch}: {time.perf_counter() - start:.1f} s")
    memory = _memory(tree, problem, _targets(problem, tree, memory_batch, seed))
    start = time.perf_counter()
    loop = control_loop.run(problem, HAND, control_loop_steps)
    _log(f"control loop of {control_loop_steps} steps: {time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    shared = contention.run(contention_batch, contention_repeats)
    _log(f"contention at batch {contention_batch}: {time.perf_counter() - start:.1f} s")
    notes += [
        f"{dtype_name}, {iterations} iterations per solve; the full solve is timed up to batch {full_solve_max_batch}.",
        f"each peer loops over {peer_rows} configurations in float64 (the same at every batch); ratio = the peer's "
        "per row / ours per row.",
        f"each repeat calls an op for at least {1e3 * timing.repeat_s:.0f} ms: what the op before it in the round "
        "(the torch composition's, a peer's loop) left in the caches is a small part of it.",
        f"memory: peak resident growth of one forward+backward at batch {memory_batch} (the least of three calls).",
        "control loop: `learning.benchmark.control_loop` (one WholeBodyStepper step per tick at batch 1, the hand "
        "target set on a 5 cm circle, the polygon prepared once).",
        "contention: `learning.benchmark.contention` (a child process per OpenMP wait policy, one busy Python "
        "process beside the second half).",
    ]
    return {
        "suite": "wholebody",
        "goals": goals(results, memory, loop, shared),
        "robot": ROBOT.urdf_file,
        "dtype": dtype_name,
        "iterations": iterations,
        "methods": METHODS,
        "results": results,
        "memory": memory,
        "control_loop": loop,
        "contention": shared,
        "notes": notes,
    }


def combine(runs: list[dict]) -> dict:
    """Whole runs of the suite (``run``'s documents, one setting) as one document: the first run's tables, and per
    target every run's value (``runs``) and their median, which decides it. This machine's speed moves between
    minutes, and a target near its threshold (a ratio to PlaCo near 1, the control loop's tail) flips between single
    runs: the median of several says which side it is on."""
    first = runs[0]
    targets = []
    for index, target in enumerate(first["goals"]):
        values = [run["goals"][index]["value"] for run in runs]
        measured = [value for value in values if value is not None]
        value = statistics.median(measured) if measured else None
        targets.append({**goal(target["goal"], value, target["threshold"], target["higher_is_better"],
                               target["detail"]), "runs": values})  # fmt: skip
    return {**first, "goals": targets, "runs": len(runs)}


def _fixed_work_note(loop: dict | None) -> str:
    """The control loop's fixed work's p99 / p50 (the machine's spread at the step's median), for a goal's detail."""
    fixed = (loop or {}).get("fixed_work")
    return f"; fixed work of the same median: {fixed['p99_s'] / fixed['p50_s']:.2f}" if fixed else ""


def goals(results: list[dict], memory: list[dict], loop: dict | None = None, shared: list[dict] = ()) -> list[dict]:
    """The targets for the whole-body step, from one run's numbers (where measured)."""
    per_row = {(r["batch"], r["op"], r["method"]): r["per_row_s"] for r in results}
    step, pink = per_row.get((1024, "step", "ours")), per_row.get((1024, "step", "pink.loop"))
    single, single_pink = per_row.get((1, "step", "ours")), per_row.get((1, "step", "pink.loop"))
    single_placo, single_backward = per_row.get((1, "step", "placo.loop")), per_row.get((1, "step+bwd", "ours"))
    single_stepper = per_row.get((1, "stepper.step", "ours"))
    single_stepper_vjp = per_row.get((1, "stepper.step+vjp", "ours"))
    backward = per_row.get((1024, "step+bwd", "ours"))
    solve = per_row.get((1, "solve", "ours"))
    peaks = {m["iterations"]: m["peak_bytes"] for m in memory if m["gradient"] == "implicit"}
    low, high = peaks.get(16), peaks.get(128)
    passive = next((row for row in shared if row["omp_wait_policy"] == "PASSIVE"), None)
    unset = next((row for row in shared if row["omp_wait_policy"] == "unset"), None)
    return [
        goal("one cascade step at batch 1: at least as fast as PlaCo's step", ratio(single_placo, single), 1, True,
              "placo.loop per row / ours per row"),
        goal("a stepper's step at batch 1 (targets set in place): at least as fast as PlaCo's step",
             ratio(single_placo, single_stepper), 1, True, "placo.loop per row / stepper.step per row"),
        goal("one cascade step at batch 1: at least as fast as pink.solve_ik", ratio(single_pink, single), 1, True,
              "pink.loop per row / ours per row"),
        goal("one cascade step at batch 1: forward+backward <= 2x forward", ratio(single_backward, single), 2, False,
              "to the hand target, q without a graph"),
        goal("a stepper's step at batch 1 and its backward (vjp): <= 2x its step", ratio(single_stepper_vjp,
             single_stepper), 2, False, "stepper.step+vjp per row / stepper.step per row, to the hand target"),
        goal("control loop at batch 1: p99 of a step < 2x its p50", None if not loop else loop["p99_s"] / loop["p50_s"],
              2, False, "p99 / p50" + _fixed_work_note(loop)),
        goal("one cascade step at batch 1024: <= 5 us per row", None if step is None else step * 1e6, 5, False),
        goal("one cascade step at batch 1024: >= 20x faster per row than pink's loop", ratio(pink, step), 20, True,
              "pink.loop per row / ours per row"),
        goal("one cascade step at batch 1024: forward+backward <= 2x forward", ratio(backward, step), 2, False,
              "to the hand target, q without a graph"),
        goal("a full solve at batch 1 (inputs checked, result evaluated): <= 5 ms",
              None if solve is None else solve * 1e3, 5, False, "ms"),
        goal(f"a step at batch {passive['batch'] if passive else 1024} beside a busy process: <= 3x quiet "
             "(OMP_WAIT_POLICY=PASSIVE)",
              None if passive is None else passive["ratio"], 3, False, "busy / quiet"),
        goal(f"a step at batch {unset['batch'] if unset else 1024} beside a busy process: <= 3x quiet "
             "(OMP_WAIT_POLICY unset, as imported)",
              None if unset is None else unset["ratio"], 3, False, "busy / quiet"),
        goal("implicit backward memory flat (within 10%) from 16 to 128 iterations",
              None if not low or not high else abs(high - low) / max(low, high), 0.1, False,
              "the peaks differ by this fraction of the larger"),
    ]  # fmt: skip


def markdown(doc: dict) -> str:
    from learning.benchmark.report import _goals

    index = {(r["batch"], r["op"], r["method"]): r for r in doc["results"]}
    lines = [f"# Whole-body layer: {doc['robot'].split('/')[-1]} standing, right hand reaching ({doc['dtype']})", ""]
    if "meta" in doc:
        lines += [provenance_line(doc["meta"]["provenance"]), ""]
    rows = []
    for batch in sorted({r["batch"] for r in doc["results"]}):
        for op in (
            "step",
            "stepper.step",
            "stepper.step+vjp",
            "step.torch",
            "step+bwd",
            "step+bwd.q",
            "step+bwd.anchors",
            "step+bwd.torch",
            "solve.1",
            "solve",
            "solve+bwd.unrolled",
            "solve+bwd.implicit",
        ):
            r = index.get((batch, op, "ours"))
            if r is not None:
                rows.append([str(batch), op, fmt_time(r["median_s"]), fmt_time(r["per_row_s"])])
    lines.append(_table(["batch", "op", "ours total", "ours / row"], rows))
    peer_rows, has_stepper = [], any(r["op"] == "stepper.step" for r in doc["results"])
    for batch in sorted({r["batch"] for r in doc["results"]}):
        ours, stepper = index.get((batch, "step", "ours")), index.get((batch, "stepper.step", "ours"))
        for method in PEERS:
            peer = index.get((batch, "step", method))
            if peer is None or ours is None:
                continue
            row = [str(batch), method, fmt_time(peer["per_row_s"]), fmt_time(ours["per_row_s"]),
                   fmt_x(peer["per_row_s"] / ours["per_row_s"])]  # fmt: skip
            if has_stepper:
                row += ["", ""] if stepper is None else [fmt_time(stepper["per_row_s"]),
                                                         fmt_x(peer["per_row_s"] / stepper["per_row_s"])]  # fmt: skip
            peer_rows.append(row)
    if peer_rows:
        lines += ["", "One step per configuration, the peers' loops against ours (`step`, `stepper.step`) in the same "
                  "run:", ""]  # fmt: skip
        header = ["batch", "peer", "peer / row", "`step` / row", "peer / `step`"]
        if has_stepper:
            header += ["`stepper.step` / row", "peer / `stepper.step`"]
        lines.append(_table(header, peer_rows))
    if doc["memory"]:
        lines += ["", "Peak memory of forward+backward:", ""]
        lines.append(
            _table(
                ["gradient", "iterations", "peak MiB"],
                [[m["gradient"], str(m["iterations"]), f"{m['peak_bytes'] / 2**20:.1f}"] for m in doc["memory"]],
            )
        )
    if doc.get("control_loop"):
        loop = doc["control_loop"]
        lines += ["", f"A 1 kHz control loop at batch 1 ({loop['steps']} steps, one step per tick):", ""]
        lines.append(
            _table(
                ["p50", "p99", "p99 / p50", "max", "mean", "hand error at the end"],
                [[*(fmt_time(loop[k]) for k in ("p50_s", "p99_s")), fmt_x(loop["p99_s"] / loop["p50_s"]),
                  *(fmt_time(loop[k]) for k in ("max_s", "mean_s")), f"{loop['final_hand_error_m'] * 1e3:.2f} mm"]],
            )
        )  # fmt: skip
        if loop.get("fixed_work"):
            fixed = loop["fixed_work"]
            lines += ["", "The machine's spread at that tick length (a fixed piece of Python work calibrated to the "
                      "step's median, timed after each tick's step):", ""]  # fmt: skip
            lines.append(
                _table(["p50", "p99", "p99 / p50"],
                       [[fmt_time(fixed["p50_s"]), fmt_time(fixed["p99_s"]), fmt_x(fixed["p99_s"] / fixed["p50_s"])]])
            )  # fmt: skip
    if doc.get("contention"):
        lines += ["", "A step beside one competing busy process (2 cores shared):", ""]
        lines.append(
            _table(
                ["batch", "OMP_WAIT_POLICY", "quiet / row", "busy / row", "busy / quiet"],
                [
                    [str(r["batch"]), r["omp_wait_policy"], fmt_time(r["quiet_per_row_s"]),
                     fmt_time(r["busy_per_row_s"]), fmt_x(r["ratio"])]
                    for r in doc["contention"]
                ],
            )
        )  # fmt: skip
    if doc.get("goals"):
        lines += ["", "## Targets", ""]
        runs = doc.get("runs", 1)
        if runs > 1:
            lines += [f"The median of {runs} whole runs of the suite, one after another (the tables above and each "
                      "target's detail: the first run's); each run's value below:", ""]  # fmt: skip
        lines.append(_goals(doc["goals"]))
        if runs > 1:
            lines += ["", _table(["target", *(f"run {i + 1}" for i in range(runs)), "median"],
                                 [[g["goal"], *("—" if v is None else f"{v:.3g}" for v in g["runs"]),
                                   "—" if g["value"] is None else f"{g['value']:.3g}"] for g in doc["goals"]])]  # fmt: skip
    lines += ["", *[f"- {n}" for n in doc["notes"]], ""]
    lines += ["Methods:", "", *[f"- `{k}`: {v}" for k, v in doc["methods"].items()], ""]
    return "\n".join(lines)
