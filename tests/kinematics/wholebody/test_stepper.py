"""``WholeBodyStepper``: ``layer.step``'s answers, bit for bit, for a batch stepped tick after tick with its targets set
in place (every kind of task and constraint, float32 and float64, batch 1 and 5); a moved foot anchor prepares the
support polygon again; the targets are the stepper's own copies; bad names, shapes and targets that require grad
refused with typed errors; a ``q`` that records a graph differentiates as ``layer.step`` does; new settings on the
layer followed; a layer without a compiled plan answered by ``layer.step``."""

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
    with pytest.raises(ConfigError, match="carry none"):
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
