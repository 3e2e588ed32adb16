"""The compiled cascade steps (``step_kernel.CASCADE_STEPS`` on the CPU) against their torch reference, the composition
of ``cascade_step`` and ``tree.integrate``: float64 to 1e-10 and float32 to the QP tests' tolerances, every kind of
task and constraint the plan encodes, several levels, targets shared by the batch or not contiguous, one thread or
two, many steps in one call; a layer the plan does not encode, autograd and a disabled library take the reference;
a batch-1 solve runs a bounded number of torch ops."""

from __future__ import annotations

import ast
import inspect
import warnings

import pytest
import torch
from threads_support import assert_one_thread_gives_two_threads_bits
from wholebody_support import G1, HAND, LEFT_HAND, every_kind_layer, every_kind_targets, tree_of

from kinematics import native
from kinematics.wholebody import (
    Constraint,
    FrameTask,
    RelativeFrameTask,
    StepLimit,
    Task,
    WholeBodyIKCfg,
    WholeBodyIKLayer,
    standing_problem,
    step_kernel,
    step_plan,
)


@pytest.fixture(scope="module")
def g1():
    return tree_of(torch.float64)


def both_paths(layer, targets, q, steps):
    """The compiled kernel's outputs and the reference's, for ``steps`` steps and the evaluation after them."""
    flat = layer._targets(targets, torch.Size([q.shape[0]]))
    inputs = step_plan.kernel_inputs(layer, flat, layer.prepare(flat))
    with torch.no_grad():
        compiled = step_kernel._cpu(step_kernel.key(layer), q, inputs, steps, True)
        reference = layer.reference_steps(q, inputs, steps, True)
    assert compiled is not None, "the plan should encode this layer"
    return compiled, reference


def assert_same(compiled, reference, atol: float) -> None:
    q, dq, status, active_in, active_bounds, residuals, violations = compiled
    torch.testing.assert_close(q, reference[0], atol=atol, rtol=0)
    torch.testing.assert_close(dq, reference[1], atol=atol, rtol=0)
    torch.testing.assert_close(residuals, reference[5], atol=atol, rtol=0)
    torch.testing.assert_close(violations, reference[6], atol=atol, rtol=0)
    assert torch.equal(status, reference[2])
    assert torch.equal(active_in, reference[3])
    assert torch.equal(active_bounds, reference[4])


@pytest.mark.parametrize("steps", [1, 16])
def test_the_standing_problem_equals_its_reference_in_float64(g1, steps) -> None:
    problem = standing_problem(g1, G1)
    generator = torch.Generator().manual_seed(3)
    T = g1.frame_pose(problem.q_stand, HAND).expand(12, 4, 4).clone()
    T[:, :3, 3] += 0.3 * (2 * torch.rand(12, 3, generator=generator, dtype=torch.float64) - 1)
    targets = {**problem.fixed_targets, "right_hand": T}
    compiled, reference = both_paths(problem.layer, targets, problem.q_stand.expand(12, -1), steps)
    assert_same(compiled, reference, atol=1e-10)


@pytest.mark.parametrize("seed", range(6))
def test_every_kind_of_task_and_constraint_equals_its_reference(g1, seed) -> None:
    """Four levels, zero-cost rows, per-axis costs and limits, reaches up to 0.35 m (some out of range: unsolved
    levels, the interior point's retry; no active-set steps at all for seed 0 and 3): float64 to 1e-10, statuses and
    active sets equal."""
    layer = every_kind_layer(g1, WholeBodyIKCfg(qp_active_set_steps=seed % 3, qp_refinements=1 + seed % 2))
    targets, q = every_kind_targets(g1, 10, seed, reach=0.15 + 0.04 * seed)
    for steps in (1, 5):
        compiled, reference = both_paths(layer, targets, q, steps)
        assert_same(compiled, reference, atol=1e-10)


def test_far_out_of_range_the_active_sets_agree_and_the_steps_to_the_rounding_they_amplify(g1) -> None:
    """Hands 0.55 m away at random: three levels stacked on many active bounds make some lower levels' KKT systems
    nearly singular, where the elastic regularisation (1e-9) turns a rounding difference of 1e-16 into about 1e-7
    (the reference against itself with another summation order does the same). The active sets and statuses are
    still the reference's, and the configuration within 1e-6."""
    layer = every_kind_layer(g1, WholeBodyIKCfg(qp_active_set_steps=1, qp_refinements=1))
    targets, q = every_kind_targets(g1, 10, 4, reach=0.55)
    compiled, reference = both_paths(layer, targets, q, 5)
    assert_same(compiled, reference, atol=1e-6)


def test_float32_follows_its_reference_to_the_qp_tolerances() -> None:
    tree = tree_of(torch.float32)
    layer = every_kind_layer(tree)
    targets, q = every_kind_targets(tree, 8, 11)
    compiled, reference = both_paths(layer, targets, q, 8)
    torch.testing.assert_close(compiled[0], reference[0], atol=1e-4, rtol=0)
    assert torch.equal(compiled[2], reference[2])


def test_shared_and_non_contiguous_targets_read_as_copies(g1) -> None:
    layer = every_kind_layer(g1)
    targets, q = every_kind_targets(g1, 6, 5)
    copies = {name: t.contiguous() for name, t in targets.items()}
    strided = {**targets, "right_hand": targets["right_hand"].mT.contiguous().mT}  # rows not one apart
    assert targets["posture"].stride(0) == 0  # shared by the batch
    expected, _ = both_paths(layer, copies, q, 3)
    for variant in (targets, strided):
        compiled, _ = both_paths(layer, variant, q, 3)
        for a, b in zip(compiled, expected, strict=True):
            assert torch.equal(a, b)


def test_a_negative_view_target_is_not_read_as_its_memory(g1) -> None:
    """A negative view's memory holds the negated values: the kernel declines it (the reference answers), as it
    declines a negative-view q, and the step is the one its values give."""
    layer = every_kind_layer(g1)
    targets, q = every_kind_targets(g1, 4, 6)
    negative = {**targets, "left_foot": torch._neg_view(-targets["left_foot"])}
    assert negative["left_foot"].is_neg() and torch.equal(negative["left_foot"], targets["left_foot"])
    flat = layer._targets(negative, torch.Size([4]))
    assert (
        step_kernel._cpu(step_kernel.key(layer), q, step_plan.kernel_inputs(layer, flat, layer.prepare(flat)), 1, False)
        is None
    )
    with torch.no_grad():
        expected, found = layer.step(q, targets)[0], layer.step(q, negative)[0]
    torch.testing.assert_close(found, expected, atol=1e-10, rtol=0)


def test_two_threads_give_the_bits_of_one(g1) -> None:
    layer = every_kind_layer(g1)
    targets, q = every_kind_targets(g1, 40, 8)
    assert_one_thread_gives_two_threads_bits(lambda: both_paths(layer, targets, q, 2)[0])


def test_the_layer_solves_through_the_kernel_and_autograd_through_the_reference(g1) -> None:
    problem = standing_problem(g1, G1, cfg=WholeBodyIKCfg(iterations=6))
    layer, q = problem.layer, problem.q_stand.expand(3, -1)
    hand = g1.frame_pose(problem.q_stand, HAND).expand(3, 4, 4).clone()
    hand[:, :3, 3] += torch.tensor([[0.1, 0.0, 0.05], [0.05, -0.1, 0.0], [0.2, 0.1, 0.1]], dtype=torch.float64)
    targets = {**problem.fixed_targets, "right_hand": hand}
    assert step_kernel.plan_of(layer) is not None
    compiled = layer.solve(targets, q)
    hand = targets["right_hand"].clone().requires_grad_(True)
    graph = layer.solve({**targets, "right_hand": hand}, q)  # the reference, recording a graph
    torch.testing.assert_close(graph.q, compiled.q, atol=1e-10, rtol=0)
    (gradient,) = torch.autograd.grad(graph.q[:, :3].sum(), hand)
    assert gradient.abs().sum() > 0
    with native.disabled():  # every kernel's torch reference, the QP's included (another factorisation)
        torch_only = layer.solve(targets, q)
    torch.testing.assert_close(torch_only.q, compiled.q, atol=1e-6, rtol=0)


def test_a_layer_the_plan_does_not_encode_runs_its_reference(g1, monkeypatch) -> None:
    class HandHeight(Task):  # a user's own task, without a compiled form
        size, target_shape, frames = 1, (1,), (HAND,)

        def error(self, tree, state, q, target):
            return target - tree.frame_pose(state, HAND)[..., 2:3, 3]

        def jacobian(self, tree, state, q):
            return tree.frame_jacobian(state, HAND)[..., 2:3, :]

    problem = standing_problem(g1, G1)
    layer = WholeBodyIKLayer(g1, [[HandHeight("height", 1.0)], [problem.layer.tasks["posture"]]],
                             problem.layer.constraints)  # fmt: skip
    monkeypatch.setattr(step_plan, "_WARNED", set())
    with pytest.warns(step_plan.NoCompiledFormWarning, match="HandHeight 'height' has no compiled form"):
        assert step_plan.build(layer) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per class
        assert step_plan.build(layer) is None
    height = g1.frame_pose(problem.q_stand, HAND)[2:3, 3] + 0.02
    result = layer.solve({**problem.fixed_targets, "height": height}, problem.q_stand)
    assert result.residuals["height"].abs().max() < 1e-3
    limits = [
        *problem.layer.constraints,
        *(StepLimit(0.3, name=f"limit{k}") for k in range(step_plan.MAX_BOUND_BLOCKS)),
    ]
    assert step_plan.build(WholeBodyIKLayer(g1, problem.layer.levels, limits)) is None  # more limits than it reads


def test_every_shipped_task_and_constraint_declares_a_compiled_form() -> None:
    from kinematics.wholebody import constraints, tasks

    shipped = [getattr(module, name) for module in (tasks, constraints) for name in module.__all__]
    bases = (Task, Constraint)
    without = [c.__name__ for c in shipped if c not in bases and c.compiled_form in (b.compiled_form for b in bases)]
    assert len(shipped) == 10 and without == []
    layer = every_kind_layer(tree_of(torch.float64))
    kinds = {type(part) for part in [*layer.tasks.values(), *layer.constraints]}
    assert kinds == set(shipped) - {Task, Constraint}  # the layer the comparisons below run holds every one


def test_a_relative_frame_task_alone_runs_compiled_to_its_reference(g1) -> None:
    """The left hand held in the right hand's frame, moved 2-12 cm, with the feet and balance held: the plan encodes
    it and the compiled solve ends where the torch composition does."""
    problem = standing_problem(g1, G1)
    relative = RelativeFrameTask("hands", LEFT_HAND, HAND, orientation_cost=0.3)
    layer = WholeBodyIKLayer(g1, [[relative], [problem.layer.tasks["posture"]]], problem.layer.constraints)
    assert step_plan.build(layer) is not None
    T = RelativeFrameTask.relative_pose(g1, g1.forward_kinematics(problem.q_stand), LEFT_HAND, HAND).expand(4, 4, 4)
    T = T.clone()
    T[:, :3, 3] += torch.tensor([[0.02, 0, 0], [0, 0.05, 0], [0, 0, 0.08], [0.05, -0.08, 0.06]], dtype=T.dtype)
    compiled, reference = both_paths(layer, {**problem.fixed_targets, "hands": T}, problem.q_stand.expand(4, -1), 12)
    assert_same(compiled, reference, atol=1e-10)
    assert compiled[5][:, :3].norm(dim=-1).max() < 0.01  # the evaluation's residuals: the first rows are the hands'


def test_the_plan_follows_the_layers_dtype_and_settings() -> None:
    layer = every_kind_layer(tree_of(torch.float64))
    first = step_kernel.plan_of(layer)
    assert step_kernel.plan_of(layer) is first
    layer.cfg = WholeBodyIKCfg(qp_iterations=5)
    assert step_kernel.plan_of(layer) is not first
    layer.to(torch.float32)
    assert step_kernel.plan_of(layer).held[0].dtype is torch.float32


def test_a_batch1_solve_runs_a_bounded_number_of_torch_ops(g1) -> None:
    """The compiled path's Python side at batch 1: input checks, the polygon prepared once, one call for every step
    and the evaluation after them, the result's views: 73 ops today (the torch composition: about 2,400 per step)."""
    problem = standing_problem(g1, G1, cfg=WholeBodyIKCfg(iterations=16))
    targets = {**problem.fixed_targets, "right_hand": g1.frame_pose(problem.q_stand, HAND)}
    problem.layer.solve(targets, problem.q_stand)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        problem.layer.solve(targets, problem.q_stand)
    ops = [e for e in profile.events() if e.name.startswith("aten::") and e.cpu_parent is None]
    assert len(ops) <= 80, sorted(e.name for e in ops)


def test_the_plan_asks_each_part_for_its_compiled_form(g1, monkeypatch) -> None:
    """A user's task declares its compiled form through one method of its own; a subclass that does not is named
    in a one-time warning and runs the torch composition; the plan reads no class list and no private attribute."""
    problem = standing_problem(g1, G1)
    hand = problem.layer.tasks["right_hand"]

    class ShiftedHand(FrameTask):  # computes other rows than FrameTask's: no compiled form of its own
        def error(self, tree, state, q, target):
            return super().error(tree, state, q, target) + 0.01

    class SameAsFrameTask(FrameTask):  # the same rows, and it says so
        def compiled_form(self, plan) -> bool:
            plan.frame_task(self.name, self.frame, self.gain, self.cost().tolist(), 0)
            return True

    monkeypatch.setattr(step_plan, "_WARNED", set())
    posture, constraints = problem.layer.tasks["posture"], problem.layer.constraints
    shifted = ShiftedHand("right_hand", hand.frame, kind="position", gain=hand.gain)
    with pytest.warns(step_plan.NoCompiledFormWarning, match="ShiftedHand 'right_hand'"):
        assert step_plan.build(WholeBodyIKLayer(g1, [[shifted], [posture]], constraints)) is None
    same = SameAsFrameTask("right_hand", hand.frame, kind="position", gain=hand.gain)
    built = step_plan.build(WholeBodyIKLayer(g1, [[same], [posture]], constraints))
    reference = step_plan.build(problem.layer)
    assert torch.equal(built.plan, reference.plan) and torch.equal(built.settings, reference.settings)
    source = ast.parse(inspect.getsource(step_plan))
    imported = {node.module for node in ast.walk(source) if isinstance(node, ast.ImportFrom)}
    assert not any(m.startswith(("kinematics.wholebody.tasks", "kinematics.wholebody.constraints")) for m in imported)
    private = [
        f"{ast.unparse(node.value)}.{node.attr}"
        for node in ast.walk(source)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and ast.unparse(node.value) != "self"
    ]
    assert not private, private
