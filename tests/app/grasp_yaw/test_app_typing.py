"""Numbers typed into the Franka scene's boxes, in-process: taken when committed (Enter or a pause), never rewritten
under the cursor (not even when the keys come slower than the pause), clamped with a message, and text that is not a
number refused with a message; the box shows the value in force after Enter or once the typing has settled."""

from __future__ import annotations

import time

import numpy as np
import pytest
from viewer_support import type_text, wait_until

import assets
from app.grasp_yaw.panel import TYPED_TARGET
from app.grasp_yaw.scene import BOUNDS, Viewer
from app.shell import typed_numbers
from app.shell.typed_numbers import COMMIT_PAUSE_S, format_value

KEY_INTERVAL_S = 0.1  # a user's typing pace (viser sends at most one update per 50 ms)
AXIS = {"x": 0, "y": 1, "z": 2}


def _box(viewer: Viewer, label: str):
    boxes = (*viewer.grasp.targets.boxes, *viewer.grasp.joints.boxes)
    return next(box for box in boxes if box.label == label)


@pytest.mark.slow
@pytest.mark.parametrize(("axis", "text"), [("y", "-0.25"), ("z", "0.05")])
def test_a_target_typed_key_by_key_is_taken_once_committed_and_never_rewritten(start_viewer, axis, text) -> None:
    viewer = start_viewer(train=False)
    before = viewer.board.current.p
    box = _box(viewer, f"target {axis} (m)")
    said = type_text(box, text, KEY_INTERVAL_S)
    assert said == [text[:end] for end in range(1, len(text) + 1)], "the box was rewritten while typed in"
    assert viewer.board.current.p == before, "a half-typed number was taken"
    wait_until(lambda: viewer.board.current.p != before, 5 * COMMIT_PAUSE_S, "the pause to commit the typed value")
    time.sleep(0.1)  # the commit's write-back, if any, after the question changed
    expected = list(before)
    expected[AXIS[axis]] = float(text)
    assert viewer.board.current.p == tuple(expected), "only the typed coordinate moves"
    assert box.value == text, "the value in force is the typed one: its text stays as typed"
    assert not viewer.grasp.target_notes.messages and viewer.grasp.target_notes.handle.content == ""


def test_keys_slower_than_the_pause_are_never_rewritten(start_viewer) -> None:
    """A loaded machine or a slow typist: every key comes after the pause has taken the text so far (``-`` is refused,
    ``-0`` and ``-0.2`` are taken), and the box still says each prefix typed and ends at the typed value."""
    viewer = start_viewer(train=False)
    box = _box(viewer, "target y (m)")
    said = type_text(box, "-0.25", 2 * COMMIT_PAUSE_S)
    assert said == ["-", "-0", "-0.", "-0.2", "-0.25"], "the box was rewritten while typed in"
    wait_until(lambda: viewer.board.current.p[1] == -0.25, 5 * COMMIT_PAUSE_S, "the typed y to be taken")
    assert box.value == "-0.25"


@pytest.mark.slow
def test_enter_commits_at_once(start_viewer) -> None:
    viewer = start_viewer(train=False)
    type_text(_box(viewer, "target x (m)"), "0.45")
    viewer.grasp.targets.form.submit()  # Enter in a box of the form
    assert viewer.board.current.p[0] == 0.45


@pytest.mark.slow
def test_a_joint_typed_outside_its_limits_is_clipped_with_a_message(start_viewer, monkeypatch) -> None:
    monkeypatch.setattr(typed_numbers, "SETTLE_S", 2.0)
    viewer = start_viewer(train=False)
    joint = assets.PANDA.joints[3]
    lower, upper = viewer.robot.limits[joint]
    assert upper < 0
    box = _box(viewer, joint)
    said = type_text(box, "0.5", KEY_INTERVAL_S)
    assert said == ["0", "0.", "0.5"], "the box was rewritten while typed in"
    wait_until(lambda: viewer.board.current.q0[3] == upper, 5 * COMMIT_PAUSE_S, "the pause to take the clipped value")
    assert f"{joint} 0.500 -> {upper:.3f}" in viewer.grasp.q0_notes.messages[BOUNDS], "the clip is said at once"
    assert box.value == "0.5", "the pause rewrote the box"
    wait_until(
        lambda: box.value == format_value(upper), 2 * typed_numbers.SETTLE_S, "the box to show the value in force"
    )


@pytest.mark.slow
@pytest.mark.parametrize("text", ["NaN", "abc", "", "inf"])
def test_text_that_is_not_a_number_is_refused_with_a_message(start_viewer, text) -> None:
    viewer = start_viewer(train=False)
    before = viewer.board.current.p
    box = _box(viewer, "target y (m)")
    type_text(box, text)
    viewer.grasp.targets.commit()
    assert viewer.board.current.p == before
    assert box.value == format_value(before[1]), "the box shows the value in force"
    message = viewer.grasp.target_notes.messages[TYPED_TARGET]
    said = "the box is empty" if text == "" else f"{text!r} is not a number"
    assert "target y (m)" in message and said in message and f"stays {format_value(before[1])}" in message
    type_text(box, "0.1")
    viewer.grasp.targets.commit()
    assert TYPED_TARGET not in viewer.grasp.target_notes.messages, "a commit that refuses nothing clears the message"


def test_text_that_is_not_a_number_is_refused_at_the_pause_and_the_box_restored_once_settled(
    start_viewer, monkeypatch
) -> None:
    monkeypatch.setattr(typed_numbers, "SETTLE_S", 2.0)
    viewer = start_viewer(train=False)
    before = viewer.board.current.p
    box = _box(viewer, "target y (m)")
    type_text(box, "abc")
    wait_until(lambda: TYPED_TARGET in viewer.grasp.target_notes.messages, 5 * COMMIT_PAUSE_S, "the refusal to be said")
    assert "'abc' is not a number" in viewer.grasp.target_notes.messages[TYPED_TARGET]
    assert box.value == "abc" and viewer.board.current.p == before
    wait_until(lambda: box.value == format_value(before[1]), 2 * typed_numbers.SETTLE_S, "the box to be restored")
    assert TYPED_TARGET in viewer.grasp.target_notes.messages, "the message why stays beside the restored box"


@pytest.mark.slow
def test_a_box_being_typed_in_is_left_alone_by_changes_from_elsewhere(start_viewer) -> None:
    viewer = start_viewer()
    wait_until(lambda: viewer.board.newest_policy is not None, 60, "a snapshot")
    y = _box(viewer, "target y (m)")
    type_text(y, "-0.21")  # not committed yet
    viewer._snapshot(99_999, viewer.board.newest_policy)  # a snapshot's question change
    viewer.set_target(np.array([0.47, 0.1, 0.2]))  # a button: the other boxes follow
    assert y.value == "-0.21", "the typed y was overwritten"
    assert _box(viewer, "target x (m)").value == "0.47" and _box(viewer, "target z (m)").value == "0.2"
    wait_until(lambda: viewer.board.current.p[1] == -0.21, 5 * COMMIT_PAUSE_S, "the typed y to be taken")
    assert viewer.board.current.p == (0.47, -0.21, 0.2)
