"""What a new user of the G1 scene meets first, in-process: an untouched goal answered once per method and policy
snapshot (no moving/rested flicker while the trainer runs), a drag beyond the task's region bounded with a
message, the meshes translucent with the payload drawn, the connected browsers counted, the loss written where it
moves, the picker saying which ghosts need a run."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import viser
from viewer_support import drag, rested, wait_until, websocket_tab

from app.counterweight.answers import POLICY, REACH_ONLY, RESTED, BodyAnswer
from app.counterweight.methods import BODY_BY_KEY, FAST_BODY_KEYS, RUN_KEYS
from app.counterweight.view import payload_radius_m
from learning.counterweight.experiment import checkpoint_path
from learning.counterweight.problem import HAND

UNTOUCHED_WINDOW_S = 30.0  # a snapshot lands every second or two: about twenty of them


def _row(viewer, key: str) -> str:
    label = BODY_BY_KEY[key].label
    return next(line for line in viewer.reach.table.content.splitlines() if f"</span> {label} |" in line)


@pytest.mark.slow
def test_an_untouched_goal_is_answered_once_per_method_and_snapshot(start_g1, smoke_run: Path) -> None:  # noqa: F811
    viewer = start_g1(checkpoint=checkpoint_path(smoke_run, 0, "gradient"))
    wait_until(lambda: rested(viewer, FAST_BODY_KEYS), 60, "every method's rested answer")
    viewer.trainer.start()
    wait_until(lambda: viewer.trainer.status.version >= 2, 60, "the live trainer's snapshots")
    wait_until(
        lambda: (
            rested(viewer, FAST_BODY_KEYS)
            and viewer.drawn[POLICY].snapshot == dict(viewer.board.current.versions)[POLICY]
        ),
        30,
        "the answer to the current snapshot",
    )
    drawn = {key: viewer.drawn[key] for key in FAST_BODY_KEYS}
    answers = {key: [] for key in FAST_BODY_KEYS}  # every answer drawn in the window, by method
    rows = {key: {_row(viewer, key)} for key in FAST_BODY_KEYS if key != POLICY}
    pending_seen: set[str] = set()
    first_version = dict(viewer.board.current.versions)[POLICY]
    deadline = time.monotonic() + UNTOUCHED_WINDOW_S
    while time.monotonic() < deadline:
        for key in FAST_BODY_KEYS:
            answer = viewer.drawn[key]
            if answer is not drawn[key]:
                answers[key].append(answer)
                drawn[key] = answer
            if key != POLICY:
                rows[key].add(_row(viewer, key))
        pending_seen |= viewer.pending & set(FAST_BODY_KEYS)
        time.sleep(0.01)
    adopted = dict(viewer.board.current.versions)[POLICY] - first_version
    policy = answers.pop(POLICY)
    print(
        f"\nuntouched goal, {UNTOUCHED_WINDOW_S:.0f} s, trainer running: {adopted} snapshots adopted, "
        f"{len(policy)} policy answers ({', '.join(f'{a.phase} {a.iterations} it. v{a.snapshot}' for a in policy)}), "
        f"other methods' answers {sum(map(len, answers.values()))}, status changes "
        f"{sum(len(r) - 1 for r in rows.values())}, pending marks {len(pending_seen)}"
    )
    assert adopted >= 2, "the trainer published too few snapshots to test anything"
    assert all(not found for found in answers.values()), "reach only or a run's policy was answered again"
    assert all(len(seen) == 1 for seen in rows.values()), rows  # their rows never changed
    assert not pending_seen  # nothing flickers to pending
    assert 1 <= len(policy) <= adopted
    assert all(a.phase == RESTED and a.iterations == viewer.solver.full_iterations for a in policy)
    assert len({a.snapshot for a in policy}) == len(policy)  # one answer per snapshot
    assert re.search(r"\| rested \(\d+ it\., v\d+\) \|", _row(viewer, POLICY))  # which snapshot it answers
    assert re.search(r"loss \d\.\d\de[-+]\d\d", viewer.training.state.content)  # the loss, where it moves
    assert viewer.training.loss_plot.title.startswith("log10 training loss")  # decades on a linear axis


def test_a_drag_beyond_the_region_is_bounded_with_a_message(start_g1, smoke_run: Path) -> None:  # noqa: F811
    viewer = start_g1(checkpoint=checkpoint_path(smoke_run, 0, "gradient"))
    region = viewer.region
    problem = viewer.solver.problem
    with torch.no_grad():
        hand = problem.tree.frame_pose(problem.q_stand, problem.robot.frames[HAND])[:3, 3].double().numpy()
    beyond = hand + [0.5, 0.0, 0.0]  # half a metre beyond the hand
    overhead = region.shoulder + [0.0, 0.0, 0.6]  # above the head
    for target in (beyond, overhead):
        start = region.point(0.38, -0.1, -0.2)
        drag(viewer, [start + (target - start) * t for t in np.linspace(0.1, 1.0, 8)])
        wait_until(lambda: not viewer.answers.signal.is_busy, 10, "the answer in flight")
        viewer.board.catch_up()  # the drag's last position, if offered while an answer was computed
        goal = np.array(viewer.board.current.p)
        trained = viewer.race.goals[0].numpy()
        assert np.min(np.linalg.norm(trained - goal, axis=1)) < 1e-12, f"dragged to {goal}: not a trained goal"
        assert "held out" not in viewer.reach.where.content  # not the region's far corner
        assert "the nearest goal the policies train on" in viewer.reach.bounds.content
        np.testing.assert_allclose(viewer.gizmo.handle.position, goal, atol=1e-9)  # put back


def test_meshes_are_translucent_and_every_hand_holds_the_payload(start_g1, smoke_run: Path) -> None:  # noqa: F811
    viewer = start_g1(checkpoint=checkpoint_path(smoke_run, 0, "gradient"))  # meshes: no --light
    meshes = [
        handle
        for name, handle in viewer.server.scene._handle_from_node_name.items()
        if name.startswith("/robot/links") and isinstance(handle, (viser.MeshHandle, viser.GlbHandle))
    ]
    assert meshes and all(isinstance(mesh, viser.MeshHandle) for mesh in meshes), "opaque, in the URDF's colours"
    assert all(mesh.opacity is not None and mesh.opacity < 0.5 for mesh in meshes)
    problem = viewer.solver.problem
    with torch.no_grad():
        hand = problem.tree.frame_pose(problem.q_stand, problem.robot.frames[HAND])[:3, 3].double().numpy()
    radius = payload_radius_m(problem.cfg.payload_kg)
    assert 0.05 < radius < 0.08  # 8 kg of steel
    assert viewer.payload.radius == pytest.approx(radius) and viewer.payload.visible
    np.testing.assert_allclose(viewer.payload.position, hand, atol=1e-6)  # the payload point is the hand's origin
    wait_until(lambda: rested(viewer, (REACH_ONLY, POLICY)), 60, "the rested answers")
    hand_index = problem.tree.frame_index(problem.robot.frames[HAND])
    for key in (REACH_ONLY, POLICY):
        ghost, answer = viewer.ghosts[key], viewer.drawn[key]
        assert isinstance(answer, BodyAnswer) and ghost.payload.visible
        np.testing.assert_allclose(ghost.payload.position, answer.payload, atol=1e-6)
        np.testing.assert_allclose(answer.payload, answer.frames[hand_index], atol=1e-6)  # in the ghost's hand


@pytest.mark.slow
def test_without_a_run_the_picker_says_why_and_two_browsers_are_noted(start_g1) -> None:  # noqa: F811
    viewer = start_g1(light=True)
    for key in RUN_KEYS:
        box = viewer.picker.boxes[key]
        assert box.disabled and not box.value and "needs --run" in box.label, key
        assert not viewer.ghosts[key].enabled
    assert not viewer.picker.boxes[POLICY].disabled
    url = f"ws://127.0.0.1:{viewer.server.get_port()}"
    with websocket_tab(url):
        wait_until(lambda: viewer.clients.clients == 1, 10, "the tab counted")
        viewer.reach.typed.boxes[0].value = "abc"
        viewer.reach.typed.commit()  # refused, with a note
        viewer.set_target(viewer.region.shoulder + [0.0, 0.0, 0.6])  # above the head: moved, with a note
        assert viewer.reach.bounds.content and viewer.reach.refused.content
        with websocket_tab(url):
            wait_until(lambda: viewer.status.messages.get("clients") == "2 browsers connected", 10, "the note")
            # the panel is every tab's: the new tab does not open on notes about the first tab's input
            assert not viewer.reach.bounds.content and not viewer.reach.refused.content
            assert "sector" in viewer.reach.where.content  # where the goal is stays said
        wait_until(lambda: "clients" not in viewer.status.messages, 10, "the note to go with the second browser")
