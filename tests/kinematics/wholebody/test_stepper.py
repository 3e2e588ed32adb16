"""``WholeBodyStepper``: ``layer.step``'s answers, bit for bit, for a batch stepped tick after tick with its targets set
in place (every kind of task and constraint, float32 and float64, batch 1 and 5); a moved foot anchor prepares the
support polygon again; the targets are the stepper's own copies; bad names, shapes and targets that require grad
refused with typed errors; a ``q`` that records a graph differentiates as ``layer.step`` does; new settings on the
layer followed; a layer without a compiled plan answered by ``layer.step``. ``vjp``: ``layer.step``'s autograd
gradients bit for bit (every target, ``q``, with a gradient on ``dq`` or not), central differences, the reference
path where the compiled call does not apply, the step taken differentiated after new settings, and what it cannot
differentiate refused."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from wholebody_support import every_kind_layer, every_kind_targets, tree_of

from kinematics.errors import ConfigError, ShapeError
from kinematics.wholebody import CascadeStep, PostureTask, WholeBodyIKCfg, WholeBodyIKLayer, WholeBodyStepper

FIELDS = [f.name for f in dataclasses.fields(CascadeStep)]


def assert_equal_steps(found, expected) -> None:
    assert torch.equal(found[0], expected[0])
    for name in FIELDS:
        assert torch.equal(getattr(found[1], name), getattr(expected[1], name)), name


def flat_targets(layer, targets, rows):
    return layer._targets(targets, torch.Size([rows]))


def float64_case(rows: int, seed: int):
    """The every-kind layer in float64, its targets for ``rows`` rows (flat), a ``q`` and a stepper of them."""
    layer = every_kind_layer(tree_of(torch.float64))
    targets, q = every_kind_targets(layer.tree, rows, seed=seed)
    flat = flat_targets(layer, targets, rows)
    return layer, flat, q, WholeBodyStepper(layer, flat)


def autograd_gradients(layer, q, flat, names, grad_q_next, grad_dq=None):
    """``layer.step``'s autograd gradients of ``<q_next, grad_q_next> (+ <dq, grad_dq>)`` w.r.t. the targets ``names``
    and ``q``."""
    leaves = {name: flat[name].clone().requires_grad_(True) for name in names}
    q_leaf = q.clone().requires_grad_(True)
    q_next, step = layer.step(q_leaf, {**flat, **leaves})
    loss = (q_next * grad_q_next).sum() + (0 if grad_dq is None else (step.dq * grad_dq).sum())
    *found, grad_q = torch.autograd.grad(loss, [*leaves.values(), q_leaf])
    return dict(zip(names, found, strict=True)), grad_q


def upstream(q, nv: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(q.shape, generator=generator, dtype=torch.float64).to(q.dtype),
            torch.randn(q.shape[0], nv, generator=generator, dtype=torch.float64).to(q.dtype))  # fmt: skip


@pytest.mark.parametrize(("dtype", "rows"), [(torch.float64, 1), (torch.float32, 5)])
def test_ticks_equal_layer_step(dtype, rows) -> None:
    tree = tree_of(dtype)
    layer = every_kind_layer(tree)
    targets, q = every_kind_targets(tree, rows, seed=3)
    flat = flat_targets(layer, targets, rows)
    stepper = WholeBodyStepper(layer, flat)
    assert stepper._bound is not None, "the compiled call should apply"
    q_layer = q.clone()
    hand = flat["right_hand"].clone()
    for _ in range(6):
        hand[:, 2, 3] += 0.01  # the goal moves
        stepper.set_target("right_hand", hand)
        expected = layer.step(q_layer, {**flat, "right_hand": hand})
        found = stepper.step(q)
        assert_equal_steps(found, expected)
        q, q_layer = found[0], expected[0]
    assert torch.equal(stepper.target("right_hand"), hand)


def test_a_moved_foot_prepares_the_polygon_again_and_the_targets_are_copies() -> None:
    tree = tree_of(torch.float64)
    layer = every_kind_layer(tree)
    targets, q = every_kind_targets(tree, 1, seed=4)
    flat = {name: t.clone() for name, t in flat_targets(layer, targets, 1).items()}
    stepper = WholeBodyStepper(layer, flat)
    flat["right_hand"][:, 0, 3] += 1.0  # the caller's tensor: not the stepper's
    assert not torch.equal(stepper.target("right_hand"), flat["right_hand"])
    flat["right_hand"][:, 0, 3] -= 1.0
    foot = flat["left_foot"].clone()
    foot[:, 1, 3] += 0.08  # the left foot set wider: the polygon grows
    stepper.set_target("left_foot", foot)
    moved = {**flat, "left_foot": foot}
    assert_equal_steps(stepper.step(q), layer.step(q, moved))
    (name, polygon), (_, before) = *stepper._prepared.items(), *layer.prepare(flat).items()
    assert all(torch.equal(a, b) for a, b in zip(polygon, layer.prepare(moved)[name], strict=True))
    assert not torch.equal(polygon.offset, before.offset)  # prepared again where the foot now is


def test_bad_input_is_refused_with_typed_errors() -> None:
    tree = tree_of(torch.float64)
    layer = every_kind_layer(tree)
    targets, q = every_kind_targets(tree, 2, seed=5)
    flat = flat_targets(layer, targets, 2)
    with pytest.raises(ShapeError, match="targets missing|must be"):
        WholeBodyStepper(layer, {name: t for name, t in flat.items() if name != "posture"})
    with pytest.raises(ShapeError, match="one row count"):
        WholeBodyStepper(layer, {**flat, "com": flat["com"][:1]})
    stepper = WholeBodyStepper(layer, flat)
    with pytest.raises(ConfigError, match="no target 'nose'"):
        stepper.set_target("nose", flat["com"])
    with pytest.raises(ShapeError, match=r"'com' is \(2, 3\); got \(3, 3\)"):
        stepper.set_target("com", torch.zeros(3, 3, dtype=torch.float64))
    with pytest.raises(ConfigError, match="record no graph"):
        stepper.set_target("com", flat["com"].clone().requires_grad_(True))
    stepper.set_target("com", flat["com"][0])  # one row, broadcast to both
    assert torch.equal(stepper.target("com"), flat["com"][0].expand(2, 3))
    with pytest.raises(ShapeError, match="q must be"):
        stepper.step(q[:, :10])


def test_a_q_that_records_a_graph_differentiates_as_layer_step() -> None:
    layer, flat, q, stepper = float64_case(2, seed=6)
    found_q, expected_q = q.clone().requires_grad_(True), q.clone().requires_grad_(True)
    stepper.step(found_q)[0].square().sum().backward()
    layer.step(expected_q, flat)[0].square().sum().backward()
    assert found_q.grad is not None and torch.equal(found_q.grad, expected_q.grad)


def test_new_settings_on_the_layer_are_followed() -> None:
    layer, flat, q, stepper = float64_case(1, seed=7)
    before = stepper.step(q)
    layer.cfg = dataclasses.replace(layer.cfg, damping=layer.cfg.damping * 100)
    after = stepper.step(q)
    assert_equal_steps(after, layer.step(q, flat))
    assert not torch.equal(after[0], before[0])
    layer.to(torch.float32)  # the tree's buffers replaced: the plan and the targets' copies follow
    q32 = q.float()
    assert_equal_steps(stepper.step(q32), layer.step(q32, {name: t.float() for name, t in flat.items()}))


def test_a_layer_without_a_compiled_plan_is_answered_by_layer_step() -> None:
    class OwnPosture(PostureTask):  # a user's task: no compiled form
        def compiled_form(self, plan) -> bool:
            return False

    tree = tree_of(torch.float64)
    layer = WholeBodyIKLayer(tree, [[OwnPosture(tree, name="posture")]], [], WholeBodyIKCfg())
    q = tree.neutral()[None].clone()
    q[:, 7:] += 0.1
    flat = {"posture": tree.neutral()[None, 7:].clone()}
    with pytest.warns(UserWarning):
        stepper = WholeBodyStepper(layer, flat)
    assert stepper._bound is None
    assert_equal_steps(stepper.step(q), layer.step(q, flat))
    grad_q_next = upstream(q, tree.nv, 3)[0]  # its vjp: layer.step's autograd, as it stepped through layer.step
    expected, expected_q = autograd_gradients(layer, q, flat, ("posture",), grad_q_next)
    found = stepper.vjp(grad_q_next, q=True)
    assert float(expected["posture"].abs().max()) > 0
    assert torch.equal(found.targets["posture"], expected["posture"]) and torch.equal(found.q, expected_q)


def compiled_only(stepper, monkeypatch) -> None:
    """Make ``stepper.vjp`` fail where it would take the step again through ``layer.step`` (whose compiled backward
    would give the same bits): what follows must come from the compiled backward of the recorded step."""

    def refuse(*args, **kwargs):
        raise AssertionError("vjp took the reference path")

    monkeypatch.setattr(stepper, "_reference_vjp", refuse)


@pytest.mark.parametrize(("dtype", "rows"), [(torch.float64, 1), (torch.float64, 4), (torch.float32, 3)])
def test_vjp_is_layer_steps_autograd_tick_after_tick(dtype, rows, monkeypatch) -> None:
    """Every target (the contacts' anchors through the polygon's preparation included) and q, with and without a
    gradient on dq, bit for bit, as the hand target moves; from the compiled backward of the step taken."""
    layer = every_kind_layer(tree_of(dtype))
    targets, q = every_kind_targets(layer.tree, rows, seed=8)
    flat = flat_targets(layer, targets, rows)
    stepper = WholeBodyStepper(layer, flat)
    compiled_only(stepper, monkeypatch)
    names = stepper.target_names
    assert {"left_foot", "right_foot", "right_hand", "posture"} <= set(names)
    hand = flat["right_hand"].clone()
    for tick in range(3):
        hand[:, 0, 3] += 0.02
        stepper.set_target("right_hand", hand)
        flat = {**flat, "right_hand": hand.clone()}
        grad_q_next, grad_dq = upstream(q, layer.tree.nv, tick)
        grad_dq = grad_dq if tick % 2 else None
        expected, expected_q = autograd_gradients(layer, q, flat, names, grad_q_next, grad_dq)
        q_next, _ = stepper.step(q)
        found = stepper.vjp(grad_q_next, grad_dq, q=True)
        assert list(found.targets) == list(names)
        for name in names:
            assert torch.equal(found.targets[name], expected[name]), name
        assert torch.equal(found.q, expected_q)
        only = stepper.vjp(grad_q_next, grad_dq, targets=["right_hand"])  # the same step asked again, one target
        assert list(only.targets) == ["right_hand"] and only.q is None
        assert torch.equal(only.targets["right_hand"], expected["right_hand"])
        q = q_next


def test_vjp_takes_what_a_caller_hands_it(monkeypatch) -> None:
    """A moved anchor (the polygon prepared again), a non-contiguous q and upstream gradient, a q that requires grad
    stepped without a graph (the compiled path all the same), targets named by a list or a generator."""
    layer, flat, q, stepper = float64_case(3, seed=14)
    compiled_only(stepper, monkeypatch)
    foot = flat["left_foot"].clone()
    foot[:, 1, 3] += 0.03
    stepper.set_target("left_foot", foot)
    flat = {**flat, "left_foot": foot}
    grad_q_next = upstream(q, layer.tree.nv, 4)[0]
    names = ("left_foot", "right_foot", "right_hand")
    expected, expected_q = autograd_gradients(layer, q, flat, names, grad_q_next)
    strided_q, strided_grad = q.t().contiguous().t(), grad_q_next.t().contiguous().t()
    assert not strided_q.is_contiguous() and not strided_grad.is_contiguous()
    stepper.step(strided_q)
    found = stepper.vjp(strided_grad, targets=list(names), q=True)
    assert all(torch.equal(found.targets[name], expected[name]) for name in names) and torch.equal(found.q, expected_q)
    with torch.no_grad():
        stepper.step(q.clone().requires_grad_(True))
    found = stepper.vjp(grad_q_next, targets=(name for name in ["right_hand"]))
    assert list(found.targets) == ["right_hand"] and torch.equal(found.targets["right_hand"], expected["right_hand"])


def test_a_step_under_inference_mode_is_stepped_and_not_differentiated() -> None:
    layer, flat, q, stepper = float64_case(1, seed=15)
    with torch.no_grad():
        expected = stepper.step(q)
    with torch.inference_mode():
        found = stepper.step(q)
    assert_equal_steps(found, expected)
    with pytest.raises(ConfigError, match="inference_mode"):
        stepper.vjp(torch.ones_like(q))
    stepper.step(q)
    assert stepper.vjp(torch.ones_like(q), targets=("com",)).targets["com"].shape == (1, 3)


def test_vjp_agrees_with_central_differences() -> None:
    """The hand target's position entries and the CoM's target."""
    layer, flat, q, stepper = float64_case(1, seed=9)
    grad_q_next = upstream(q, layer.tree.nv, 0)[0]
    stepper.step(q)
    found = stepper.vjp(grad_q_next, targets=("right_hand", "com")).targets
    eps = 1e-6
    for name, index in [("right_hand", (0, i, 3)) for i in range(3)] + [("com", (0, i)) for i in range(3)]:
        values = []
        for sign in (1, -1):
            target = flat[name].clone()
            target[index] += sign * eps
            values.append(float((layer.step(q, {**flat, name: target})[0] * grad_q_next).sum()))
        difference = (values[0] - values[1]) / (2 * eps)
        assert abs(float(found[name][index]) - difference) <= 1e-6 + 1e-5 * abs(difference), (name, index)
    assert float(found["right_hand"][0, :3, 3].abs().max()) > 0.1  # the hand's target moves the step


def test_vjp_where_the_compiled_call_does_not_apply_is_layer_steps_autograd() -> None:
    """Stepped and differentiated without the library: the torch composition's autograd, bit for bit; the library
    gone between the step and its vjp: the step taken again by the torch composition (equal to its rounding)."""
    from kinematics import native

    layer, flat, q, stepper = float64_case(2, seed=10)
    names = stepper.target_names
    grad_q_next = upstream(q, layer.tree.nv, 1)[0]
    compiled, compiled_q = autograd_gradients(layer, q, flat, names, grad_q_next)
    with native.disabled():
        expected, expected_q = autograd_gradients(layer, q, flat, names, grad_q_next)
        stepper.step(q)
        found = stepper.vjp(grad_q_next, q=True)
    assert all(torch.equal(found.targets[name], expected[name]) for name in names)
    assert torch.equal(found.q, expected_q)
    stepper.step(q)  # compiled
    with native.disabled():
        gone = stepper.vjp(grad_q_next, q=True)
    for name in names:
        scale = float(compiled[name].abs().max()) + 1e-12
        assert float((gone.targets[name] - compiled[name]).abs().max()) <= 1e-5 * scale, name
    assert float((gone.q - compiled_q).abs().max()) <= 1e-5 * float(compiled_q.abs().max())


def test_vjp_differentiates_the_step_taken_even_after_new_settings() -> None:
    """The compiled backward reads the plan the step was taken with; the reference, which would take the step
    again with the new settings, refuses."""
    from kinematics import native

    layer, flat, q, stepper = float64_case(1, seed=11)
    grad_q_next = upstream(q, layer.tree.nv, 2)[0]
    expected = autograd_gradients(layer, q, flat, ("right_hand",), grad_q_next)[0]["right_hand"]
    stepper.step(q)
    layer.cfg = dataclasses.replace(layer.cfg, damping=layer.cfg.damping * 100)
    assert torch.equal(stepper.vjp(grad_q_next, targets=("right_hand",)).targets["right_hand"], expected)
    with native.disabled(), pytest.raises(ConfigError, match="new settings"):
        stepper.vjp(grad_q_next, targets=("right_hand",))


def test_vjp_refuses_what_it_cannot_differentiate() -> None:
    layer, flat, q, stepper = float64_case(2, seed=12)
    grad_q_next = torch.ones_like(q)
    with pytest.raises(ConfigError, match="no step to differentiate"):
        stepper.vjp(grad_q_next)
    stepper.step(q)
    with pytest.raises(ConfigError, match="no target 'nose'"):
        stepper.vjp(grad_q_next, targets=("nose",))
    with pytest.raises(ConfigError, match="sequence of names"):
        stepper.vjp(grad_q_next, targets="com")
    with pytest.raises(ShapeError, match=r"grad_q_next must be \(2, 36\), got \(1, 36\)"):
        stepper.vjp(grad_q_next[:1])
    with pytest.raises(ShapeError, match=r"grad_dq must be \(2, 35\)"):
        stepper.vjp(grad_q_next, grad_q_next)
    stepper.set_target("com", flat["com"])
    with pytest.raises(ConfigError, match="a target was set since"):
        stepper.vjp(grad_q_next)
    own_q = q.clone()
    _, step = stepper.step(own_q)
    own_q[:, 8] += 0.1  # the step's q changed in place
    with pytest.raises(ConfigError, match="changed in place"):
        stepper.vjp(grad_q_next)
    _, step = stepper.step(q)
    step.dq.zero_()
    with pytest.raises(ConfigError, match="changed in place"):
        stepper.vjp(grad_q_next)
    with pytest.raises(ShapeError, match="q must be"):
        stepper.step(q[:, :10])
    with pytest.raises(ConfigError, match="no step to differentiate"):  # a failed step leaves no record
        stepper.vjp(grad_q_next)


def test_a_bound_step_refuses_a_q_of_another_dtype_than_its_plan() -> None:
    """The float32 kernel would misread a float64 plan's arrays: ``BoundStep`` answers None, as for any ``q`` it does
    not take, and a stepper then answers through ``layer.step`` (which refuses the mismatch with its own error)."""
    from kinematics import native
    from kinematics.wholebody import step_kernel, step_plan

    layer, flat, q, stepper = float64_case(1, seed=13)
    inputs = step_plan.kernel_inputs(layer, flat, layer.prepare(flat))
    bound = native.BoundStep(step_kernel.plan_of(layer), inputs, 1)
    assert bound(q) is not None and bound(q.float()) is None


def test_another_default_device_leaves_the_compiled_step_and_its_backward_on_the_cpu() -> None:
    """Every tensor the compiled step, the polygon's preparation and the backward hand to C is the CPU's, whatever
    the default device: the step's outputs and the plan were allocated on the default device, a segmentation fault
    under ``torch.set_default_device`` (``meta`` here, the stand-in for ``cuda`` that every machine has)."""
    layer, flat, q, stepper = float64_case(2, seed=4)
    grad_q_next, grad_dq = upstream(q, layer.tree.nv, 1)
    expected = layer.step(q, flat)
    stepper.step(q)
    expected_gradients = stepper.vjp(grad_q_next, grad_dq, q=True)
    fresh = every_kind_layer(tree_of(torch.float64))  # its plan is built under the meta device
    with torch.device("meta"):
        assert_equal_steps(fresh.step(q, flat), expected)
        meta_stepper = WholeBodyStepper(fresh, flat)
        assert meta_stepper._bound is not None  # the compiled call bound, not layer.step's path
        meta_stepper.set_target("right_hand", flat["right_hand"].tolist())  # a list: made a tensor on the CPU
        assert_equal_steps(meta_stepper.step(q), expected)
        found = meta_stepper.vjp(grad_q_next, grad_dq, q=True)
    assert torch.equal(found.q, expected_gradients.q)
    for name, gradient in expected_gradients.targets.items():
        assert torch.equal(found.targets[name], gradient), name
