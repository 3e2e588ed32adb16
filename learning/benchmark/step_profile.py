"""Where a batch-1 whole-body step's time goes: the suite's problem (``wholebody_suite``), one step of
``WholeBodyIKLayer.step`` taken apart into what it calls, each part timed on its own in one round-robin run.

The parts, outermost first: the step (and a ``WholeBodyStepper``'s, which does the checks, the preparation and the
binding once); the support polygon's preparation (``layer.prepare``: the sole corners
posed and the hull's edges); the input checks; the kernel's inputs list; the kernel through its dispatch
(``CASCADE_STEPS``); the binding (``native.wholebody_step``: the targets' checks and addresses, the outputs'
allocation, the C call); the targets' checks and addresses alone; and the C call alone, bound and allocated once
(one step, and one step of a 16-step call). Then the C call's own parts, by ablation (the same call on a layer
without that part; the difference is the part's cost): the second cascade level (hand and posture in one weighted
level instead), the support polygon's rows, the step limit. The backward: the step and its backward to the hand
target as one call (as the whole-body suite times it), the same step recording the graph without its backward, the
backward alone through a retained graph, the compiled backward's call, and the floor of any design whose backward is
torch's own nodes (the step, then its output joined to the target by built-in ops with the Jacobian free). PlaCo's
step, where it is installed, in the same run.
"""

from __future__ import annotations

import statistics

import torch

from kinematics import KinematicTree, native
from kinematics.wholebody import (
    ComInSupportPolygon,
    StepLimit,
    WholeBodyIKCfg,
    WholeBodyIKLayer,
    WholeBodyStepper,
    standing_problem,
    step_kernel,
    step_plan,
)
from learning.benchmark import wholebody_peers
from learning.benchmark.report import _table, fmt_time
from learning.benchmark.timing import TimingPolicy, measure
from learning.benchmark.wholebody_suite import HAND, ROBOT, _targets
from learning.common.provenance import provenance_line

PARTS = {
    "step": "layer.step(q, targets): everything below",
    "step.prepared": "layer.step(q, targets, prepared=...): the polygon prepared once (a control loop's step)",
    "stepper.step": "WholeBodyStepper.step after set_target of the hand: the targets checked, copied and bound once",
    "stepper.step+vjp": "the same, then WholeBodyStepper.vjp to the hand target: the step's compiled backward, called "
    "without an autograd graph",
    "prepare": "layer.prepare(targets): the soles' poses stacked, then one kernel (the corners posed, the hull's edges)",
    "checks": "layer._check_step: the inputs' shapes",
    "kernel_inputs": "step_plan.kernel_inputs: the targets and the prepared polygon as the kernel's list",
    "dispatch": "CASCADE_STEPS(...): the kernel through its dispatch (the plan looked up, the binding, the call)",
    "binding": "native.wholebody_step: the targets' checks and addresses, the outputs' allocation, the C call",
    "addresses": "the targets' checks and addresses alone (native.bind_targets)",
    "c.step": "the C call alone, bound and allocated once: one step",
    "c.step_of_16": "the C call alone: one step of a 16-step call",
    "c.one_level": "the C call on the layer with hand and posture in one weighted level (no second cascade level)",
    "c.no_polygon": "the C call on the layer without the support polygon's rows",
    "c.no_step_limit": "the C call on the layer without the step limit's bounds",
    "step+bwd": "layer.step(q, targets) recording a graph to the hand target, then sum().backward(): as one call (the "
    "compiled step and backward)",
    "step.graph": "the same step recording the graph, without the backward (the graph dropped)",
    "step+bwd.floor": "the floor of any step whose backward is torch's own nodes: layer.step(q, targets) with no graph, "
    "its q_next joined to the hand target by built-in ops (q_next + J (t - t.detach()), J zero: the step's Jacobian "
    "free), then sum().backward()",
    "bwd.retained": "the backward alone: torch.autograd.grad of the same sum to the hand target, through a graph "
    "recorded once and retained",
    "c.backward": "native.wholebody_step_backward alone (to the hand target), from a saved step, through the step's "
    "binding of the targets (as the step's autograd node calls it)",
    "placo.step": "PlaCo's KinematicsSolver.solve(True) and update_kinematics() (where installed)",
}


def _raw_call(layer: WholeBodyIKLayer, q: torch.Tensor, flat: dict, steps: int):
    """The C step of ``layer`` bound and allocated once (``native.BoundStep.into``): a callable of no arguments that
    makes only the C call (a batch-1 call runs on one thread)."""
    inputs = step_plan.kernel_inputs(layer, flat, layer.prepare(flat))
    plan = step_kernel.plan_of(layer)
    bound = native.BoundStep(plan, inputs, q.shape[0])
    outputs = native.step_outputs(plan, q.shape[0], q.dtype)
    bound.into(q, outputs, steps)  # fails loudly here if the call does not apply

    def call(alive=(layer, plan, inputs)):  # what the bound addresses point into, alive with the callable
        bound.into(q, outputs, steps)

    return call


def floor_step_backward(layer: WholeBodyIKLayer, q: torch.Tensor, flat: dict) -> torch.Tensor:
    """``step+bwd.floor``: the step without a graph, its ``q_next`` joined to the hand target by one batched product
    with a zero Jacobian (what a design that computes the step's Jacobian in the forward would record, that
    Jacobian for free), then ``sum().backward()``; returns the hand target's gradient (zero)."""
    hand = flat[HAND].clone().requires_grad_(True)
    with torch.enable_grad():
        q_next = layer.step(q, flat)[0]
        jacobian = q_next.new_zeros(q_next.shape[0], q_next.shape[1], hand[0].numel())
        torch.baddbmm(
            q_next.unsqueeze(-1), jacobian, (hand - hand.detach()).reshape(hand.shape[0], -1, 1)
        ).sum().backward()
    return hand.grad


def _variant(tree: KinematicTree, problem, without: str) -> WholeBodyIKLayer:
    """The suite's layer without one part: ``level`` (the two levels merged), ``polygon`` or ``step_limit``."""
    layer = problem.layer
    levels, constraints = layer.levels, layer.constraints
    if without == "level":
        levels = ((*levels[0], *levels[1]),)
    elif without == "polygon":
        constraints = tuple(c for c in constraints if not isinstance(c, ComInSupportPolygon))
    else:
        constraints = tuple(c for c in constraints if not isinstance(c, StepLimit))
    return WholeBodyIKLayer(tree, levels, constraints, layer.cfg)


def run(dtype_name: str = "float32", timing: TimingPolicy | None = None, seed: int = 0) -> dict:
    timing = timing or TimingPolicy(min_repeats=30, budget_s=2.0, floor_repeats=5)
    tree = KinematicTree.from_urdf(ROBOT.urdf_text(), floating_base=True, dtype=getattr(torch, dtype_name))
    problem = standing_problem(tree, ROBOT, cfg=WholeBodyIKCfg(iterations=16))
    layer = problem.layer
    targets = _targets(problem, tree, 1, seed)
    flat = layer._targets(targets, torch.Size([1]))
    q = problem.q_stand.expand(1, -1).contiguous()
    prepared = layer.prepare(flat)
    inputs = step_plan.kernel_inputs(layer, flat, prepared)
    plan = step_kernel.plan_of(layer)
    key = step_kernel.key(layer)
    sixteen = _raw_call(layer, q, flat, 16)

    def step_backward():
        hand = flat[HAND].clone().requires_grad_(True)
        with torch.enable_grad():
            layer.step(q, {**flat, HAND: hand})[0].sum().backward()

    def step_graph():
        hand = flat[HAND].clone().requires_grad_(True)
        with torch.enable_grad():
            layer.step(q, {**flat, HAND: hand})[0].sum()

    retained_hand = flat[HAND].clone().requires_grad_(True)
    with torch.enable_grad():
        retained = layer.step(q, {**flat, HAND: retained_hand})[0].sum()

    saved = native.wholebody_step(plan, q, inputs, 1, False, save=True)
    wanted = [name == HAND for name in layer.target_names] + [False] * (len(inputs) - len(layer.target_names))
    grad_q_next, binding = torch.ones_like(q), native.bind_targets(plan, q, inputs, recording=False)
    stepper = WholeBodyStepper(layer, flat)

    def stepper_step():
        stepper.set_target(HAND, flat[HAND])
        stepper.step(q)

    def stepper_step_vjp():
        stepper_step()
        stepper.vjp(grad_q_next, targets=(HAND,))

    fns = {
        "step": lambda: layer.step(q, flat),
        "step.prepared": lambda: layer.step(q, flat, prepared=prepared),
        "stepper.step": stepper_step,
        "stepper.step+vjp": stepper_step_vjp,
        "prepare": lambda: layer.prepare(flat),
        "checks": lambda: layer._check_step(q, flat),
        "kernel_inputs": lambda: step_plan.kernel_inputs(layer, flat, prepared),
        "dispatch": lambda: step_kernel.CASCADE_STEPS(key, q, inputs, 1, False),
        "binding": lambda: native.wholebody_step(plan, q, inputs, 1, False),
        "addresses": lambda: native.bind_targets(plan, q, inputs, recording=False),
        "c.step": _raw_call(layer, q, flat, 1),
        "c.step_of_16": sixteen,
        "c.one_level": _raw_call(_variant(tree, problem, "level"), q, flat, 1),
        "c.no_polygon": _raw_call(_variant(tree, problem, "polygon"), q, flat, 1),
        "c.no_step_limit": _raw_call(_variant(tree, problem, "step_limit"), q, flat, 1),
        "step+bwd": step_backward,
        "step.graph": step_graph,
        "step+bwd.floor": lambda: floor_step_backward(layer, q, flat),
        "bwd.retained": lambda: torch.autograd.grad(retained, retained_hand, retain_graph=True),
        "c.backward": lambda: native.wholebody_step_backward(
            plan, q, inputs, (saved[1], saved[2], saved[-1]), grad_q_next, None, wanted, binding=binding
        ),
    }
    notes = []
    try:
        margin = next(c.margin for c in layer.constraints if isinstance(c, ComInSupportPolygon))
        cost = float(layer.tasks["posture"].cost().max())
        fns["placo.step"] = wholebody_peers.placo_loop(problem, ROBOT, HAND, flat[HAND].double().numpy(), margin, cost)
    except wholebody_peers.peers.PeerUnavailableError as exc:
        notes.append(f"placo.step skipped: {exc}")
    with torch.no_grad():
        timings = measure(fns, timing)
    rows = [{"part": name, **t.as_dict()} for name, t in timings.items()]
    for row in rows:
        if row["part"] == "c.step_of_16":
            row["median_s"] /= 16  # one step of the call
    notes.append(f"{dtype_name}, batch 1, torch threads {torch.get_num_threads()}; the C calls on one thread.")
    return {"suite": "wholebody-profile", "robot": ROBOT.urdf_file, "dtype": dtype_name, "parts": PARTS,
            "results": rows, "notes": notes}  # fmt: skip


def combine(runs: list[dict]) -> dict:
    """Whole runs of the profile (``run``'s documents) as one document: per part the median of the runs' medians
    (``median_s``) and every run's (``runs_s``). On a machine whose speed moves between seconds a single run's parts
    move by more than an ablation's difference; the median of several runs is what the derived table reads."""
    if len(runs) == 1:
        return runs[0]
    by_part = [{row["part"]: row["median_s"] for row in run["results"]} for run in runs]
    rows = []
    for row in runs[0]["results"]:
        values = [parts[row["part"]] for parts in by_part]
        rows.append({"part": row["part"], "median_s": statistics.median(values), "runs_s": values})
    return {**runs[0], "results": rows, "runs": len(runs)}


def markdown(doc: dict) -> str:
    median = {r["part"]: r["median_s"] for r in doc["results"]}
    step = median["step"]
    lines = [f"# Where a batch-1 whole-body step's time goes ({doc['robot'].split('/')[-1]}, {doc['dtype']})", ""]
    if "meta" in doc:
        lines += [provenance_line(doc["meta"]["provenance"]), ""]
    if doc.get("runs", 1) > 1:
        lines += [f"Each part: the median of its medians in {doc['runs']} whole runs of the profile, one after "
                  "another (every run's: `runs_s` in the JSON).", ""]  # fmt: skip
    rows = [[f"`{name}`", fmt_time(median[name]), f"{100 * median[name] / step:.0f} %", doc["parts"][name]]
            for name in doc["parts"] if name in median]  # fmt: skip
    lines.append(_table(["part", "median", "of `step`", "what it is"], rows))
    c_step = median["c.step"]
    derived = [
        ["outside the C call (Python, torch dispatch, allocation)", fmt_time(step - c_step)],
        ["the support polygon's preparation", fmt_time(median["prepare"])],
        ["the second cascade level (C)", fmt_time(c_step - median["c.one_level"])],
        ["the support polygon's rows (C)", fmt_time(c_step - median["c.no_polygon"])],
        ["the step limit's bounds (C)", fmt_time(c_step - median["c.no_step_limit"])],
        ["the backward, timed with its step as one call (step+bwd - step)", fmt_time(median["step+bwd"] - step)],
        ["the graph's cost in the forward (step.graph - step)", fmt_time(median["step.graph"] - step)],
        ["the backward timed alone (bwd.retained)", fmt_time(median["bwd.retained"])],
        ["what timing the two halves as one call adds (step+bwd - step.graph - bwd.retained)",
         fmt_time(median["step+bwd"] - median["step.graph"] - median["bwd.retained"])],
        ["the floor of a backward of torch's own nodes, as a ratio to the step (step+bwd.floor / step)",
         f"{median['step+bwd.floor'] / step:.2f}x"],
        ["the stepper's backward (stepper.step+vjp - stepper.step)",
         fmt_time(median["stepper.step+vjp"] - median["stepper.step"])],
        ["a stepper's step and its backward, as a ratio to its step (stepper.step+vjp / stepper.step)",
         f"{median['stepper.step+vjp'] / median['stepper.step']:.2f}x"],
    ]  # fmt: skip
    lines += [
        "",
        "Derived from the medians above (differences, and ratios):",
        "",
        _table(["what", "value"], derived),
    ]
    lines += ["", *[f"- {n}" for n in doc["notes"]], ""]
    return "\n".join(lines)
