"""The viewer under pressure, in-process: a drag racing a flood of snapshots, injected failures in every background
part, out-of-range inputs, the gizmo never written under the user's hand, the trainer's status read while it
trains, bad command-line values, and the notice for a non-loopback host."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
import viser
from viewer_support import type_text, wait_until

import assets
from app.grasp_yaw.ghosts import Ghost
from app.grasp_yaw.inference import GraspSolver
from app.grasp_yaw.methods import SEARCH_KEYS
from app.grasp_yaw.scene import BOUNDS, Viewer
from app.shell.answers_table import PENDING_SWATCH
from app.shell.server import exposure_notice
from app.shell.supervision import Supervisor
from app.shell.trainer_worker import TrainerWorker
from learning.common.history import TrainingHistory

REPO = Path(__file__).resolve().parents[3]
DRAG_SECONDS = 4.0
DRAG_PERIOD_S = 0.02  # a browser sends a dragged gizmo's pose about once per frame


def _answered(viewer: Viewer) -> bool:
    drawn = viewer.drawn_question
    return drawn is not None and drawn == viewer.board.current and not viewer.pending - set(SEARCH_KEYS)


def _fire(handle: viser.TransformControlsHandle, phase: str) -> None:
    """Run the gizmo's callbacks as viser does when a browser sends a drag event."""
    event = viser.TransformControlsEvent(client=None, client_id=None, target=handle, phase=phase)
    for callback in list(handle._impl_aux.update_cb):
        callback(event)


@pytest.mark.slow
def test_drag_racing_a_snapshot_flood_draws_only_current_questions(start_viewer, monkeypatch) -> None:
    checks: list[bool] = []
    original = Viewer._draw

    def checked_draw(self: Viewer, result) -> None:
        checks.append(result.question == self.board.current)  # the question current while it is drawn
        original(self, result)

    monkeypatch.setattr(Viewer, "_draw", checked_draw)
    viewer = start_viewer()
    viewer.trainer.snapshot_every = 1  # the real trainer publishes after every step
    wait_until(
        lambda: viewer.board.current.policy is not None and _answered(viewer), 60, "the first snapshot's answers"
    )
    policy = viewer.board.newest_policy
    stop = threading.Event()
    snapshots = 0

    def flood() -> None:  # a snapshot every millisecond (a trainer step takes tens), beside the real trainer's
        nonlocal snapshots
        version = 10_000
        while not stop.is_set():
            version += 1
            viewer._snapshot(version, policy)
            snapshots += 1
            time.sleep(0.001)

    handle = viewer.gizmo.handle
    ws = viewer.cfg.workspace
    path: list[np.ndarray] = []
    pool = ThreadPoolExecutor(max_workers=4)  # viser runs these callbacks on a thread pool, possibly out of order
    placed_while_dragging: list[tuple[float, ...]] = []
    place = viewer.gizmo.place

    def recording_place(position) -> None:
        if viewer.gizmo.dragging:
            placed_while_dragging.append(tuple(position))
        place(position)

    monkeypatch.setattr(viewer.gizmo, "place", recording_place)
    flooder = threading.Thread(target=flood, daemon=True)
    flooder.start()
    _fire(handle, "start")
    started, i = time.monotonic(), 0
    while time.monotonic() - started < DRAG_SECONDS:
        t = 0.05 * i
        p = np.array(
            [
                np.mean(ws.x) + 0.15 * math.cos(t),
                np.mean(ws.y) + 0.3 * math.sin(0.5 * t),
                np.mean(ws.z) + 0.1 * math.sin(t),
            ]
        )
        path.append(p)
        handle._impl.position = p  # viser stores each message's pose in order, on its event loop ...
        pool.submit(_fire, handle, "update")  # ... and runs the callbacks on a pool
        i += 1
        time.sleep(DRAG_PERIOD_S)
    pool.shutdown(wait=True)
    _fire(handle, "end")
    stopped = time.monotonic()
    final = tuple(float(v) for v in path[-1])
    wait_until(lambda: viewer.drawn_question is not None and viewer.drawn_question.p == final, 1.0, "the last target")
    settle_ms = 1e3 * (time.monotonic() - stopped)
    stop.set()
    flooder.join()

    print(
        f"\n{len(path)} drag updates and {snapshots} extra snapshots in {DRAG_SECONDS:.0f} s: {len(checks)} draws, "
        f"{sum(not c for c in checks)} for a question that was not current, {viewer.stale_draws} stale; "
        f"last target drawn {settle_ms:.0f} ms after the drag ended"
    )
    assert len(checks) >= 10, "the drag should have drawn answers along the way"
    assert all(checks) and viewer.stale_draws == 0
    assert viewer.board.current.p == final
    assert np.allclose(viewer.grasp.target, final, atol=5e-5), "the inputs follow the gizmo"
    assert placed_while_dragging == [], "the gizmo was written while the user held it"
    assert viewer.supervisor.failures() == 0


@pytest.mark.slow
def test_a_failed_draw_is_shown_and_the_next_target_draws(start_viewer, monkeypatch) -> None:
    viewer = start_viewer()
    wait_until(lambda: _answered(viewer), 60, "the first answers")
    show = Ghost.show
    failures = {"left": 1}

    def failing_show(self: Ghost, qpos, T_root_tcp) -> None:
        if self.key == "radial" and failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("simulated drawing failure")
        show(self, qpos, T_root_tcp)

    monkeypatch.setattr(Ghost, "show", failing_show)
    viewer.set_target(np.array([0.45, -0.25, 0.15]))
    wait_until(lambda: "inference" in viewer.status.messages, 30, "the failure in the status line")
    message = viewer.status.messages["inference"]
    assert "simulated drawing failure" in message and "1 failure" in message
    assert "simulated drawing failure" in viewer.status.handle.content
    viewer.set_target(np.array([0.52, 0.21, 0.08]))
    wait_until(lambda: _answered(viewer) and viewer.drawn_question.p == (0.52, 0.21, 0.08), 30, "the next target")
    assert viewer.supervisor.failures("inference") == 1
    assert abs(viewer.drawn["radial"].yaw - math.atan2(0.21, 0.52)) < 1e-6


@pytest.mark.slow
def test_failures_after_an_answer_in_the_reference_and_in_evaluation_are_counted(start_viewer, monkeypatch) -> None:
    viewer = start_viewer()
    wait_until(lambda: _answered(viewer), 60, "the first answers")
    catch_up = viewer.board.catch_up
    calls = {"n": 0}

    def failing_catch_up() -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("simulated failure after an answer")
        catch_up()

    monkeypatch.setattr(viewer.board, "catch_up", failing_catch_up)
    viewer.inference._after = viewer.board.catch_up
    solve = GraspSolver.solve

    def failing_search(self, p, q0, choosers):
        if "reference" in choosers:
            raise RuntimeError("simulated search failure")
        return solve(self, p, q0, choosers)

    monkeypatch.setattr(GraspSolver, "solve", failing_search)
    viewer.set_target(np.array([0.41, 0.12, 0.2]))
    wait_until(lambda: {"inference", "search"} <= set(viewer.status.messages), 30, "both failures")
    viewer.set_target(np.array([0.43, 0.1, 0.2]))
    wait_until(lambda: _answered(viewer) and viewer.drawn_question.p == (0.43, 0.1, 0.2), 30, "answers after it")
    assert "simulated search failure" in viewer.status.messages["search"], "a later draw must not wipe it"
    assert "simulated failure after an answer" in viewer.status.messages["inference"]
    assert viewer.supervisor.failures("inference") == 1
    assert viewer.drawn["reference"] == "pending", "a failed search leaves its row pending, not a stale answer"

    monkeypatch.setattr(viewer.metrics, "_splits", None)  # evaluate-now then fails inside its thread
    assert viewer.metrics.start_evaluation()
    wait_until(lambda: "metrics" in viewer.status.messages, 30, "the evaluation failure")
    assert viewer.supervisor.failures("metrics") == 1
    wait_until(lambda: not viewer.metrics.evaluate.disabled, 10, "the button to come back")


@pytest.mark.slow
def test_answers_are_marked_pending_while_computed(start_viewer, monkeypatch) -> None:
    viewer = start_viewer()
    wait_until(
        lambda: viewer.board.current.policy is not None and _answered(viewer), 60, "the first snapshot's answers"
    )
    entered, release = threading.Event(), threading.Event()
    solve = GraspSolver.solve

    def held_solve(self, p, q0, choosers):
        if "radial" in choosers:
            entered.set()
            release.wait(10)
        return solve(self, p, q0, choosers)

    monkeypatch.setattr(GraspSolver, "solve", held_solve)
    viewer.set_target(np.array([0.46, -0.1, 0.1]))
    assert entered.wait(10)
    try:
        assert {"radial", "learned", "reference"} <= viewer.pending
        assert viewer.ghosts["radial"].pending and viewer.ghosts["learned"].pending
        table = viewer.grasp.table.content
        radial_row = next(line for line in table.splitlines() if "radial rule" in line)
        learned_row = next(line for line in table.splitlines() if "learned" in line)
        assert all(PENDING_SWATCH in row and "opacity" in row for row in (radial_row, learned_row))
    finally:
        release.set()
    wait_until(lambda: _answered(viewer), 30, "the answers")
    assert not viewer.ghosts["radial"].pending and "radial" not in viewer.pending


def test_out_of_range_inputs_are_moved_into_reach_with_a_message(start_viewer) -> None:
    viewer = start_viewer(train=False)
    question = viewer.set_target(np.array([5.0, 0.0, 0.1]))
    x, y, z = question.p
    wrist = np.array([x, y, z + assets.PANDA_TOP_DOWN_REACH.wrist_height]) - np.array(
        assets.PANDA_TOP_DOWN_REACH.shoulder
    )
    assert np.linalg.norm(wrist) <= assets.PANDA_TOP_DOWN_REACH.radius
    assert "outside the arm's top-down reach" in viewer.grasp.target_notes.messages[BOUNDS]
    assert viewer.grasp.target[0] == pytest.approx(x, abs=1e-4), "the input shows the moved value"
    assert np.allclose(viewer.gizmo.handle.position, question.p)
    type_text(viewer.grasp.targets.boxes[0], "1e9")  # as a browser typing it, then Enter
    viewer.grasp.targets.commit()
    assert viewer.board.current.p[0] < 0.8
    assert viewer.grasp.target[0] == pytest.approx(viewer.board.current.p[0], abs=1e-4), "the box shows it"
    viewer.set_target(np.array([0.5, 0.1, 0.1]))
    assert BOUNDS not in viewer.grasp.target_notes.messages, "a target inside clears the message"

    lower, upper = viewer.robot.limits[assets.PANDA.joints[3]]
    q0 = np.array(assets.PANDA.reference_posture)
    q0[3] = upper + 1.0
    assert viewer.set_q0(q0).q0[3] == pytest.approx(upper)
    assert assets.PANDA.joints[3] in viewer.grasp.q0_notes.messages[BOUNDS]
    wait_until(lambda: viewer.drawn_question == viewer.board.current, 30, "answers for the moved inputs")
    assert viewer.drawn["radial"].yaw == pytest.approx(math.atan2(viewer.board.current.p[1], 0.5), abs=1e-6)


@pytest.mark.slow
def test_launch_leaves_the_process_thread_count_alone(start_viewer) -> None:
    before = torch.get_num_threads()
    start_viewer(train=False)
    assert torch.get_num_threads() == before


@pytest.mark.slow
def test_reset_starts_from_new_random_weights(start_viewer) -> None:
    viewer = start_viewer(train=False)
    wait_until(lambda: viewer.board.newest_policy is not None, 60, "the first trainer's snapshot")
    first_policy = viewer.board.newest_policy
    first = {k: v.clone() for k, v in first_policy.predictor.state_dict().items()}
    assert viewer.trainer.status.seed == 0
    viewer.trainer.reset()
    wait_until(lambda: viewer.board.newest_policy is not first_policy, 60, "the rebuilt trainer's snapshot")
    assert viewer.trainer.status.seed == 1
    wait_until(lambda: "seed 1" in viewer.training.state.content, 10, "the panel to show the seed")
    second = viewer.board.newest_policy.predictor.state_dict()
    assert any(not torch.equal(first[k], second[k]) for k in first)


class _RacyTrainer:
    """A stand-in trainer whose step appends a step and, a moment later, its loss (as ``Trainer.step`` does)."""

    def __init__(self, seed: int) -> None:
        self.history, self.step_count, self.seed = TrainingHistory(), 0, seed

    def step(self) -> float:
        self.step_count += 1
        self.history.steps.append(self.step_count)
        time.sleep(0)  # let another thread run between the two appends
        self.history.loss.append(1.0 / self.step_count)
        return self.history.loss[-1]

    def validate(self) -> None:
        self.history.val_steps.append(self.step_count)
        self.history.val_success.append(0.5)

    def snapshot(self) -> object:
        return object()


def test_trainer_status_reads_steps_and_losses_together() -> None:
    supervisor = Supervisor(lambda key, message: None)
    worker = TrainerWorker(_RacyTrainer, lambda v, p: None, lambda s: None, supervisor, keep=50)
    worker.start_thread()
    mismatched, reads = 0, 0
    deadline = time.monotonic() + 1.0
    try:
        while time.monotonic() < deadline:
            status = worker.status
            reads += 1
            mismatched += len(status.steps) != len(status.loss)
            assert len(status.steps) <= 50 + 1 + status.points_per_loss  # keep, one to pair, the newest steps
    finally:
        worker.close()
    assert reads > 100 and worker.status.step > 100
    assert mismatched == 0
    status = worker.status  # the whole run, its older points averaged in pairs (2^k steps each)
    assert status.steps[0] == pytest.approx((1 + status.points_per_loss) / 2) and status.points_per_loss > 1
    assert status.step - status.points_per_loss < status.steps[-1] <= status.step and np.all(np.diff(status.steps) > 0)
    assert status.loss[0] == pytest.approx(np.mean([1.0 / s for s in range(1, status.points_per_loss + 1)]))


def test_callback_failures_of_the_trainer_are_shown_and_training_goes_on() -> None:
    messages: dict[str, str | None] = {}
    supervisor = Supervisor(lambda key, message: messages.__setitem__(key, message))

    def failing_snapshot(version: int, policy: object) -> None:
        raise RuntimeError("simulated snapshot failure")

    worker = TrainerWorker(_RacyTrainer, failing_snapshot, lambda s: None, supervisor, snapshot_every=5)
    worker.start_thread()
    try:
        wait_until(lambda: worker.status.step > 20, 10, "the trainer to go on")
    finally:
        worker.close()
    assert worker.status.state == "running"
    assert "simulated snapshot failure" in messages[TrainerWorker.CALLBACKS]
    assert supervisor.failures(TrainerWorker.CALLBACKS) >= 4


def test_a_trainer_closed_while_waiting_for_its_turn_never_steps_after_close() -> None:
    """``close`` while ``wait_turn`` blocks: the wait sees ``closing`` and returns, no step runs after ``close``
    returned, and the thread has ended (a step running at interpreter exit aborted the process)."""
    supervisor = Supervisor(lambda key, message: None)
    waiting, stepped_after_close = threading.Event(), []
    worker: TrainerWorker | None = None

    class _Trainer(_RacyTrainer):
        def step(self) -> float:
            if worker.closing:
                stepped_after_close.append(self.step_count)
            return super().step()

    def wait_turn() -> None:
        waiting.set()
        while not worker.closing:  # interactive work that never ends, as a drag that never pauses
            time.sleep(0.001)

    worker = TrainerWorker(_Trainer, lambda v, p: None, lambda s: None, supervisor, wait_turn=wait_turn)
    worker.start_thread()
    assert waiting.wait(10)
    started = time.monotonic()
    worker.close()
    assert time.monotonic() - started < 1.0
    assert not worker._thread.is_alive()
    assert stepped_after_close == []


@pytest.mark.parametrize(
    ("argument", "says"),
    [
        (["--port", "99999"], "not a TCP port"),
        (["--port", "http"], "not a port number"),
        (["--host", "no-such-host.invalid"], "not an address"),
        (["--threads", "0"], "at least 1"),
        (["--host", "192.0.2.1"], "cannot serve on 192.0.2.1"),
    ],
)
@pytest.mark.slow
def test_bad_command_line_values_get_one_line_and_exit_2(argument: list[str], says: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app", *argument], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.slow
def test_a_non_loopback_host_is_announced(start_viewer) -> None:
    assert exposure_notice("127.0.0.1") is None and exposure_notice("localhost") is None
    assert exposure_notice("::1") is None
    assert "anyone who can reach this port" in exposure_notice("0.0.0.0")
    viewer = start_viewer(host="0.0.0.0", train=False)
    assert "anyone who can reach this port" in viewer.status.messages["exposure"]
