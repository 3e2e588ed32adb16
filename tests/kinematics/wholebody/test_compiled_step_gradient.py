"""A step's compiled backward (``step_kernel.compiled_step_with_gradient``, ``native.wholebody_step_backward``):
where autograd records a graph to the tasks' targets and the configuration alone, ``layer.step`` runs the compiled
step and its compiled backward, whose gradient is the torch composition's (float64 to 1e-10, float32 to its rounding)
on every kind of task and constraint the plan encodes, unsolved levels included, and the derivative finite
differences give, and to the contacts' anchors and the prepared polygon too. An unrolled solve steps through it."""

from __future__ import annotations

import pytest
import torch
from threads_support import assert_one_thread_gives_two_threads_bits
from wholebody_support import G1, HAND, every_kind_layer, every_kind_targets, tree_of

from assets.franka import PANDA
from kinematics import KinematicTree, native
from kinematics.errors import UnsupportedTransformError
from kinematics.wholebody import (
    ComTask,
    ConfigurationLimit,
    FrameTask,
    PostureTask,
    StepLimit,
    WholeBodyIKCfg,
    WholeBodyIKLayer,
    standing_problem,
    step_plan,
)

TASK_TARGETS = ("right_hand", "left_hand", "head", "com", "posture")
LEAVES = (*TASK_TARGETS, "q")  # "q": the configuration the step starts from


@pytest.fixture(scope="module")
def g1():
    return tree_of(torch.float64)


def flat_targets(layer, targets, batch: int) -> dict[str, torch.Tensor]:
    return layer._targets(targets, torch.Size([batch]))


def gradients(layer, q, flat, names, weights, compiled: bool):
    """The gradients w.r.t. the targets ``names`` (``"q"``: the configuration) of ``<q_next, w_q> + <dq, w_dq>``
    (``w_dq`` None: the first term alone, so no gradient reaches ``dq``) after one step: through ``layer.step``
    (``compiled``: it must take the compiled backward) or the torch composition."""
    leaves = {name: (q if name == "q" else flat[name]).clone().requires_grad_(True) for name in names}
    q = leaves.pop("q", q)
    targets = {**flat, **leaves}
    leaves["q"] = q
    prepared = layer.prepare(targets)
    if compiled:
        q_next, step = layer.step(q, targets, prepared=prepared)
        assert type(q_next.grad_fn).__name__ == "_CompiledStepBackward"
        dq = step.dq
    else:
        q_next, dq, *_ = layer.reference_steps(q, step_plan.kernel_inputs(layer, targets, prepared), 1)
    loss = (q_next * weights[0]).sum() + (0 if weights[1] is None else (dq * weights[1]).sum())
    return torch.autograd.grad(loss, [leaves[name] for name in names])


def random_weights(q, nv: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=generator, dtype=torch.float64).to(q.dtype)
                 for shape in (q.shape, (q.shape[0], nv)))  # fmt: skip


@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_gradient_is_the_torch_compositions_in_float64(g1, seed) -> None:
    """Four levels, zero-cost rows, every task's target at once (the relative frame task's included); reaches up to 0.35 m leave some levels unsolved (the
    first level's clamped step, a lower level handing on the step above it) and no active-set steps for seed 0, 3."""
    layer = every_kind_layer(g1, WholeBodyIKCfg(qp_active_set_steps=seed % 3, qp_refinements=1 + seed % 2))
    targets, q = every_kind_targets(g1, 10, seed, reach=0.15 + 0.04 * seed)
    flat = flat_targets(layer, targets, 10)
    with torch.no_grad():
        status = layer.step(q, flat)[1].level_status
    assert (status != 0).any() or seed == 0
    weights = random_weights(q, g1.nv, seed)
    compiled = gradients(layer, q, flat, TASK_TARGETS, weights, True)
    reference = gradients(layer, q, flat, TASK_TARGETS, weights, False)
    for a, b in zip(compiled, reference, strict=True):  # to 1e-10 of the largest entry (up to 20 here)
        scale = float(b.abs().max())
        torch.testing.assert_close(a, b, atol=1e-10 * max(scale, 1.0), rtol=0)
        assert scale > 0
    # the configuration's, apart: with q in its graph the composition's Jacobians are no longer one matrix for the
    # batch (the posture's), which moves its targets' gradients by up to 3e-10 (its own rounding, not the kernel's)
    ((compiled,), (reference,)) = (gradients(layer, q, flat, ("q",), weights, c) for c in (True, False))
    scale = float(reference.abs().max())
    torch.testing.assert_close(compiled, reference, atol=1e-10 * scale, rtol=0)
    assert scale > 1


def test_a_loss_on_q_next_alone_gives_the_torch_compositions_gradient(g1) -> None:
    """No gradient reaches ``dq`` (the backward gets ``None`` for it and reads no upstream gradient there)."""
    layer = every_kind_layer(g1)
    targets, q = every_kind_targets(g1, 6, 4, reach=0.3)
    flat = flat_targets(layer, targets, 6)
    weights = (random_weights(q, g1.nv, 4)[0], None)
    compiled = gradients(layer, q, flat, LEAVES, weights, True)
    reference = gradients(layer, q, flat, LEAVES, weights, False)
    for a, b in zip(compiled, reference, strict=True):
        scale = float(b.abs().max())
        torch.testing.assert_close(a, b, atol=1e-9 * max(scale, 1.0), rtol=0)
    assert max(float(b.abs().max()) for b in reference) > 0


def test_float32_gives_the_torch_compositions_gradient_to_its_rounding() -> None:
    tree = tree_of(torch.float32)
    layer = every_kind_layer(tree)
    targets, q = every_kind_targets(tree, 8, 2, reach=0.3)
    flat = flat_targets(layer, targets, 8)
    weights = random_weights(q, tree.nv, 2)
    compiled = gradients(layer, q, flat, LEAVES, weights, True)
    reference = gradients(layer, q, flat, LEAVES, weights, False)
    scale = max(float(b.abs().max()) for b in reference)  # the posture's gradient here is about 1e-16 of the hand's
    for a, b in zip(compiled, reference, strict=True):
        assert a.dtype is torch.float32
        torch.testing.assert_close(a, b, atol=1e-6 * scale, rtol=0)


def test_the_gradient_is_the_derivative_finite_differences_give(g1) -> None:
    """The standing problem (hand level, posture level), hand targets 10-20 cm away: central differences of the
    compiled step in float64 on every entry of the hand's target and the posture's. The step is the QPs' solution to
    their tolerance (1e-9 relative), so the differences use a step of 1e-4 (their error: about 1e-7)."""
    problem = standing_problem(g1, G1, hand_orientation_cost=0.3)
    layer, batch = problem.layer, 3
    hand = g1.frame_pose(problem.q_stand, HAND).expand(batch, 4, 4).clone()
    hand[:, :3, 3] += torch.tensor([[0.1, 0.05, 0.1], [0.15, -0.1, 0.0], [0.0, 0.1, -0.1]], dtype=torch.float64)
    flat = flat_targets(layer, {**problem.fixed_targets, "right_hand": hand}, batch)
    q = problem.q_stand.expand(batch, -1)
    weights = random_weights(q, g1.nv, 7)
    analytic = gradients(layer, q, flat, ("right_hand", "posture"), weights, True)
    prepared = layer.prepare(flat)

    def loss(name, value):
        with torch.no_grad():
            q_next, step = layer.step(q, {**flat, name: value}, prepared=prepared)
        return float((q_next * weights[0]).sum() + (step.dq * weights[1]).sum())

    eps = 1e-4
    for name, gradient in zip(("right_hand", "posture"), analytic, strict=True):
        base = flat[name].contiguous()
        entries = range(12) if name == "right_hand" else range(base.shape[-1])  # a pose's last row is not read
        for row in range(batch):
            for k in entries:
                plus, minus = base.clone(), base.clone()
                plus[row].view(-1)[k] += eps
                minus[row].view(-1)[k] -= eps
                numeric = (loss(name, plus) - loss(name, minus)) / (2 * eps)
                assert abs(numeric - float(gradient[row].reshape(-1)[k])) < 1e-6 * (1 + abs(numeric)), (name, row, k)


def test_where_the_constraints_determine_a_level_the_gradient_is_the_exact_problems(g1) -> None:
    """Row 0 of the three-level layer's seed 1: on the posture level the 22 equality rows (the feet, the hands' and
    the CoM's kept rows) and 13 active bounds fix all 35 variables, so the exact step does not depend on the posture's
    target and its gradient is about 0. With one refinement the forward's step keeps a trace of its elastic solve,
    whose derivative central differences then see (about 6e-5 here, 16x the gradient); with two, the step is the
    exact problem's to the differences' error, and they agree with the gradient on every entry of the hand's target
    and the posture's."""
    layer = every_kind_layer(g1, WholeBodyIKCfg(qp_active_set_steps=2, qp_refinements=2), relative=False)
    targets, q = every_kind_targets(g1, 4, 1, reach=0.2)
    flat = flat_targets(layer, {name: targets[name] for name in layer.target_names}, 4)
    prepared = layer.prepare(flat)
    with torch.no_grad():
        step = layer.step(q, flat, prepared=prepared)[1]
    assert (step.level_status[0] == 0).all() and int((step.active_bounds[0] != 0).sum()) + 22 == g1.nv
    weights = random_weights(q, g1.nv, 0)
    hand_gradient, posture_gradient = gradients(layer, q, flat, ("right_hand", "posture"), weights, True)
    assert posture_gradient[0].abs().max() < 1e-5 * hand_gradient[0].abs().max()

    def loss(name, value):
        with torch.no_grad():
            q_next, step = layer.step(q, {**flat, name: value}, prepared=prepared)
        return float((q_next * weights[0]).sum() + (step.dq * weights[1]).sum())

    eps = 1e-5
    for name, gradient in (("right_hand", hand_gradient), ("posture", posture_gradient)):
        base = flat[name].contiguous()
        for k in range(12) if name == "right_hand" else range(base.shape[-1]):
            plus, minus = base.clone(), base.clone()
            plus[0].view(-1)[k] += eps
            minus[0].view(-1)[k] -= eps
            numeric = (loss(name, plus) - loss(name, minus)) / (2 * eps)
            assert abs(numeric - float(gradient[0].reshape(-1)[k])) < 2e-6 * (1 + abs(numeric)), (name, k, numeric)


def test_a_target_shared_by_the_batch_gets_the_sum_of_its_rows(g1) -> None:
    layer = every_kind_layer(g1)
    targets, q = every_kind_targets(g1, 6, 4)
    shared = targets["right_hand"][0].clone().requires_grad_(True)  # (4, 4), broadcast over the batch
    weights = random_weights(q, g1.nv, 4)
    q_next, step = layer.step(q, {**flat_targets(layer, {**targets, "right_hand": shared.detach()}, 6),
                                  "right_hand": shared.expand(6, 4, 4)})  # fmt: skip
    assert type(q_next.grad_fn).__name__ == "_CompiledStepBackward"
    (gradient,) = torch.autograd.grad((q_next * weights[0]).sum() + (step.dq * weights[1]).sum(), shared)
    flat = flat_targets(layer, {**targets, "right_hand": shared.detach()}, 6)
    (rows,) = gradients(layer, q, flat, ("right_hand",), weights, False)
    torch.testing.assert_close(gradient, rows.sum(0), atol=1e-10, rtol=0)


@pytest.mark.parametrize("seed", [0, 1, 4, 5])
def test_the_gradient_to_the_anchors_and_the_prepared_polygon_is_the_torch_compositions(g1, seed) -> None:
    """A graph to the contacts' anchors and to the prepared polygon's normals and offsets (with a task's target and
    q) takes the compiled step and backward, whose gradients are the torch composition's (float64, to 1e-10 of the
    largest entry); the torso leant forward and the CoM goal ahead, so the polygon's rows bind in some rows. (Seeds
    whose first level is solved in every row: where it is not, the compiled gradient to q, and so to the anchors,
    differs from the composition's by up to 1e-4, as it did before the anchors were compiled.)"""
    layer = every_kind_layer(g1, WholeBodyIKCfg(qp_active_set_steps=1 + seed % 2))
    targets, q = every_kind_targets(g1, 6, seed, reach=0.2)
    targets["com"] = targets["com"] + torch.tensor([0.3, 0.0, 0.0], dtype=torch.float64)  # pushes on the polygon
    q = q.clone()
    q[:, 7 + 12 + 2] = 0.5  # the waist's pitch: the torso leans forward, the CoM towards the toes
    flat = {name: t.clone() for name, t in flat_targets(layer, targets, 6).items()}
    feet = [name for name in layer.target_names if name not in layer.tasks]
    ((polygon_name, edges),) = layer.prepare(flat).items()
    weights = random_weights(q, g1.nv, seed)

    def run(compiled: bool):
        leaves = {name: flat[name].clone().requires_grad_(True) for name in (*feet, "right_hand")}
        normal, offset = (t.clone().requires_grad_(True) for t in edges[:2])
        q_leaf = q.clone().requires_grad_(True)
        targets_in = {**flat, **leaves}
        prepared = {polygon_name: type(edges)(normal, offset, edges.edge)}
        if compiled:
            q_next, step = layer.step(q_leaf, targets_in, prepared=prepared)
            assert type(q_next.grad_fn).__name__ == "_CompiledStepBackward"
            dq = step.dq
        else:
            inputs = step_plan.kernel_inputs(layer, targets_in, prepared)
            q_next, dq, *_ = layer.reference_steps(q_leaf, inputs, 1)
        loss = (q_next * weights[0]).sum() + (dq * weights[1]).sum()
        return torch.autograd.grad(loss, [*leaves.values(), normal, offset, q_leaf])

    with torch.no_grad():
        step = layer.step(q, flat)[1]
    assert step.active_inequalities.any(), "the polygon should bind somewhere"
    assert (step.level_status[:, 0] == 0).all()
    for a, b in zip(run(True), run(False), strict=True):
        scale = float(b.abs().max())
        torch.testing.assert_close(a, b, atol=1e-10 * max(scale, 1.0), rtol=0)
    # through the polygon's preparation (its torch ops, once per solve) to the anchors, as a solve differentiates
    leaves = {name: flat[name].clone().requires_grad_(True) for name in feet}
    q_next, _ = layer.step(q, {**flat, **leaves})
    assert type(q_next.grad_fn).__name__ == "_CompiledStepBackward"
    compiled = torch.autograd.grad((q_next * weights[0]).sum(), list(leaves.values()))
    leaves_ref = {name: flat[name].clone().requires_grad_(True) for name in feet}
    targets_ref = {**flat, **leaves_ref}
    inputs = step_plan.kernel_inputs(layer, targets_ref, layer.prepare(targets_ref))
    reference = torch.autograd.grad(
        (layer.reference_steps(q, inputs, 1)[0] * weights[0]).sum(), list(leaves_ref.values())
    )
    for a, b in zip(compiled, reference, strict=True):
        torch.testing.assert_close(a, b, atol=1e-10 * max(float(b.abs().max()), 1.0), rtol=0)


def test_two_threads_give_the_bits_of_one_and_a_disabled_library_the_references_gradient(g1) -> None:
    layer = every_kind_layer(g1)
    targets, q = every_kind_targets(g1, 70, 9)
    flat = flat_targets(layer, targets, 70)
    weights = random_weights(q, g1.nv, 9)
    assert_one_thread_gives_two_threads_bits(lambda: gradients(layer, q, flat, LEAVES, weights, True))
    leaf, q_leaf = flat["right_hand"].clone().requires_grad_(True), q.clone().requires_grad_(True)
    q_next, _ = layer.step(q_leaf, {**flat, "right_hand": leaf})
    with native.disabled():  # gone between the forward and the backward: the torch composition's gradient (its QPs
        found = torch.autograd.grad((q_next * weights[0]).sum(), (leaf, q_leaf))  # too: their torch solver's)
    expected = gradients(layer, q, flat, ("right_hand", "q"), (weights[0], torch.zeros_like(weights[1])), False)
    for a, b in zip(found, expected, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6 * max(1.0, float(b.abs().max())), rtol=0)


def test_a_gradient_asked_for_some_leaves_is_theirs_of_every_leaf_compiled_and_with_the_library_gone(g1) -> None:
    """The step's graph holds ``q`` and every task's target; a gradient asked for a few of them, in any order, is
    theirs of the gradient asked for all (the backward computes what is asked only), and the same with the library
    gone between the forward and the backward (the torch composition's, in the asked order)."""
    layer = every_kind_layer(g1)
    targets, q = every_kind_targets(g1, 9, 5)
    flat = flat_targets(layer, targets, 9)
    weights = random_weights(q, g1.nv, 5)
    leaves = {name: (q if name == "q" else flat[name]).clone().requires_grad_(True) for name in LEAVES}
    q_next, step = layer.step(leaves["q"], {**flat, **{n: t for n, t in leaves.items() if n != "q"}})
    assert type(q_next.grad_fn).__name__ == "_CompiledStepBackward"
    loss = (q_next * weights[0]).sum() + (step.dq * weights[1]).sum()
    every = dict(zip(LEAVES, torch.autograd.grad(loss, list(leaves.values()), retain_graph=True), strict=True))
    for names in (("q",), (LEAVES[0],), (LEAVES[-2], LEAVES[0])):
        found = torch.autograd.grad(loss, [leaves[name] for name in names], retain_graph=True)
        for name, gradient in zip(names, found, strict=True):
            torch.testing.assert_close(gradient, every[name], atol=1e-12 * max(1.0, float(every[name].abs().max())),
                                       rtol=0)  # fmt: skip
    with native.disabled():
        found = torch.autograd.grad(loss, [leaves[LEAVES[0]], leaves["q"]])
    for name, gradient in zip((LEAVES[0], "q"), found, strict=True):
        torch.testing.assert_close(gradient, every[name], atol=1e-6 * max(1.0, float(every[name].abs().max())), rtol=0)


def test_second_order_gradients_are_refused_with_a_typed_error(g1) -> None:
    problem = standing_problem(g1, G1)
    flat = flat_targets(problem.layer, {**problem.fixed_targets, "right_hand": g1.frame_pose(problem.q_stand, HAND)}, 1)
    hand = flat["right_hand"].clone().requires_grad_(True)
    q_next, _ = problem.layer.step(problem.q_stand[None], {**flat, "right_hand": hand})
    with pytest.raises(UnsupportedTransformError):
        torch.autograd.grad(q_next.sum(), hand, create_graph=True)


def test_the_configurations_gradient_is_the_derivative_finite_differences_give(g1) -> None:
    """The standing problem, hand targets 10-15 cm away, configurations off the standing one: central differences
    (step 1e-5) of the compiled step in float64 on every entry of ``q`` (the base's quaternion too)."""
    problem = standing_problem(g1, G1, hand_orientation_cost=0.3)
    layer, batch = problem.layer, 2
    hand = g1.frame_pose(problem.q_stand, HAND).expand(batch, 4, 4).clone()
    hand[:, :3, 3] += torch.tensor([[0.1, 0.05, 0.1], [0.15, -0.1, 0.0]], dtype=torch.float64)
    flat = flat_targets(layer, {**problem.fixed_targets, "right_hand": hand}, batch)
    q = problem.q_stand.expand(batch, -1).clone()
    q[:, 7:] += 0.05 * torch.randn(batch, g1.nq - 7, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    weights = random_weights(q, g1.nv, 11)
    (analytic,) = gradients(layer, q, flat, ("q",), weights, True)
    prepared = layer.prepare(flat)

    def loss(value):
        with torch.no_grad():
            q_next, step = layer.step(value, flat, prepared=prepared)
        return float((q_next * weights[0]).sum() + (step.dq * weights[1]).sum())

    eps = 1e-5
    for row in range(batch):
        for k in range(g1.nq):
            plus, minus = q.clone(), q.clone()
            plus[row, k] += eps
            minus[row, k] -= eps
            numeric = (loss(plus) - loss(minus)) / (2 * eps)
            assert abs(numeric - float(analytic[row, k])) < 1e-5 * (1 + abs(numeric)), (row, k, numeric)


@pytest.mark.parametrize("gradient", ["unrolled", "implicit"])
def test_a_solve_steps_through_the_compiled_backward_to_the_compositions_gradient(g1, gradient) -> None:
    """Eight steps of the three-level layer recording a graph to the hand's target: every step compiled both ways (the
    later ones with a graph to their q). Unrolled: the torch composition's own eight steps' gradient, to 1e-8 of its
    scale. Implicit (its step derivative now from the compiled backward): the gradient with the library disabled, all
    torch (its QPs too: their torch solver agrees to the QP tolerance), to 1e-6."""
    layer = every_kind_layer(g1, WholeBodyIKCfg(iterations=8, gradient=gradient, qp_active_set_steps=2))
    targets, q = every_kind_targets(g1, 4, 5, reach=0.15)
    flat = flat_targets(layer, targets, 4)
    leaf = flat["right_hand"].clone().requires_grad_(True)
    weights = random_weights(q, g1.nv, 5)[0]
    result = layer.solve({**flat, "right_hand": leaf}, q)
    (compiled,) = torch.autograd.grad((result.q * weights).sum(), leaf)
    if gradient == "unrolled":
        assert "_CompiledStepBackward" in _node_names(result.q.grad_fn)
        inputs = step_plan.kernel_inputs(layer, {**flat, "right_hand": leaf}, layer.prepare(flat))
        (expected,) = torch.autograd.grad((layer.reference_steps(q, inputs, 8)[0] * weights).sum(), leaf)
        tolerance = 1e-8
    else:
        with native.disabled():
            (expected,) = torch.autograd.grad((layer.solve({**flat, "right_hand": leaf}, q).q * weights).sum(), leaf)
        tolerance = 1e-6
    scale = float(expected.abs().max())
    torch.testing.assert_close(compiled, expected, atol=tolerance * scale, rtol=0)
    assert scale > 0


def _node_names(node) -> set[str]:
    """The type names of the autograd nodes ``node``'s graph holds."""
    seen, frontier = {node}, [node]
    while frontier:
        frontier = [f for n in frontier for f, _ in n.next_functions if f is not None and f not in seen]
        seen.update(frontier)
    return {type(n).__name__ for n in seen}


def test_a_configuration_limit_the_step_meets_passes_its_gradient_to_q(g1) -> None:
    """The left arm's first five joints 1 mrad below their upper limits, the posture pulling them 0.3 rad past: the
    step stops at the limits (bounds ``gain (upper - q)``, active), so the configuration's gradient has their share,
    the composition's (every level solved: the feet stay on their anchors)."""
    problem = standing_problem(g1, G1)
    layer, batch = problem.layer, 3
    flat = flat_targets(layer, {**problem.fixed_targets, "right_hand": g1.frame_pose(problem.q_stand, HAND)}, batch)
    q = problem.q_stand.expand(batch, -1).clone()
    joints = torch.tensor([15, 16, 17, 18, 19])  # the left shoulder's three, the elbow, the wrist's roll
    q[:, 7 + joints] = g1.joint_upper[joints] - 0.001
    posture = flat["posture"].clone()
    posture[:, joints] = g1.joint_upper[joints] + 0.3
    flat["posture"] = posture
    with torch.no_grad():
        step = layer.step(q, flat)[1]
    assert (step.level_status == 0).all() and (step.active_bounds[:, g1.base_nv + joints] == 1).sum() >= batch * 3
    weights = random_weights(q, g1.nv, 13)
    ((compiled,), (reference,)) = (gradients(layer, q, flat, ("q",), weights, c) for c in (True, False))
    torch.testing.assert_close(compiled, reference, atol=1e-10 * float(reference.abs().max()), rtol=0)


def test_prismatic_and_mimic_joints_on_a_fixed_base_give_the_compositions_configuration_gradient() -> None:
    """The Panda (a fixed base) with its finger joints (prismatic), the second a mimic of the first at multiplier 0.5
    and offset 0.01: each finger's pose task (its chain ends in a slide, the other's through the mimic), a CoM task and
    the posture, joint and step limits; the configuration's gradient (and the targets') is the composition's."""
    text = PANDA.urdf_text().replace(
        '<mimic joint="panda_finger_joint1"/>', '<mimic joint="panda_finger_joint1" multiplier="0.5" offset="0.01"/>'
    )
    tree = KinematicTree.from_urdf(text, dtype=torch.float64)
    assert tree.description.multiplier[-1] == 0.5
    levels = [
        [
            FrameTask("right", "panda_rightfinger", orientation_cost=0.3),
            FrameTask("left", "panda_leftfinger", kind="position"),
        ],
        [ComTask("com", cost=0.5), PostureTask(tree, cost=0.1)],
    ]
    layer = WholeBodyIKLayer(
        tree, levels, [ConfigurationLimit(gain=0.5), StepLimit(0.2)], WholeBodyIKCfg(qp_active_set_steps=2)
    )
    batch, generator = 6, torch.Generator().manual_seed(1)
    ready = torch.tensor([*PANDA.reference_posture, 0.02], dtype=torch.float64)
    scale = torch.tensor([0.2] * 7 + [0.01], dtype=torch.float64)
    q = ready + scale * torch.randn(batch, 8, generator=generator, dtype=torch.float64)
    flat = {"posture": ready.expand(batch, -1).clone()}
    for name, frame in (("right", "panda_rightfinger"), ("left", "panda_leftfinger")):
        flat[name] = tree.frame_pose(q, frame).clone()
        flat[name][:, :3, 3] += 0.1 * torch.randn(batch, 3, generator=generator, dtype=torch.float64)
    flat["com"] = tree.center_of_mass(q) + 0.05 * torch.randn(batch, 3, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        step = layer.step(q, flat)[1]
    assert (step.active_bounds != 0).any()
    weights = random_weights(q, tree.nv, 1)
    names = ("right", "left", "com", "q")
    compiled = gradients(layer, q, flat, names, weights, True)
    reference = gradients(layer, q, flat, names, weights, False)
    for a, b in zip(compiled, reference, strict=True):
        torch.testing.assert_close(a, b, atol=1e-10 * max(1.0, float(b.abs().max())), rtol=0)
