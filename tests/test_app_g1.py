"""The G1 scene (``python -m app --robot g1``): its math against the experiment's, its table, the viewer in-process
(no stale answer drawn, latency while training, failures shown) and one real-browser drag of the reach goal."""

from __future__ import annotations

import math
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch
from test_app_browser import find_x_arrow, method_row, page  # noqa: F401  (page: the Chromium fixture)
from viewer_support import free_port, wait_until

from app.config import ViewerConfig
from app.counterweight_answers import RESTED, BodyAnswer, BodySolver, convex_hull
from app.counterweight_panel import answers_table
from app.counterweight_trainer import LiveCounterweightTrainer
from app.g1_scene import CAMERA_FOV_DEG, CAMERA_LOOK_AT, CAMERA_POSITION, launch_g1
from learning.counterweight.config import PRESETS
from learning.counterweight.figures import skeleton_bones

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def one_thread():
    """The viewer's process runs torch on one thread (``python -m app --threads 1``): so do these tests."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def start_g1(one_thread):
    viewers = []

    def start(**kwargs):
        viewer = launch_g1(ViewerConfig(port=free_port(), robot="g1", preset="full", **kwargs))
        viewers.append(viewer)
        return viewer

    yield start
    for viewer in viewers:
        viewer.close()


def _answer(**kwargs) -> BodyAnswer:
    fields = dict(q=np.zeros(36), success=True, hand_error=0.004, balance_margin=0.012, balanced=True,
                  com_xy=np.zeros(2), phase=RESTED, iterations=16, latency_ms=250.0, frames=np.zeros((40, 3)))  # fmt: skip
    return BodyAnswer(**(fields | kwargs))


def test_convex_hull_drops_interior_points_and_runs_counter_clockwise() -> None:
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5], [0.2, 0.9]], dtype=float)
    hull = convex_hull(square)
    assert sorted(map(tuple, hull)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    area = 0.5 * sum(a[0] * b[1] - b[0] * a[1] for a, b in zip(hull, np.roll(hull, -1, 0), strict=True))
    assert area == pytest.approx(1.0)  # positive: counter-clockwise


def test_table_marks_pending_answers_and_a_violated_margin() -> None:
    drawn = {"reach_only": _answer(balanced=False, balance_margin=-0.003, success=False), "policy": _answer()}
    table = answers_table(drawn, pending={"policy"})
    reach = next(line for line in table.splitlines() if "reach only" in line)
    policy = next(line for line in table.splitlines() if "learned policy" in line)
    assert "✘" in reach and "-3.0 ⚠" in reach and "rested (16 it.)" in reach
    assert "*pending…*" in policy and "*4.0*" in policy
    assert "| – |" in next(line for line in table.splitlines() if "per-goal optimisation" in line)


def test_chunked_solve_is_the_experiments_solve(one_thread) -> None:
    solver = BodySolver(PRESETS["full"])
    problem = solver.problem
    goal = tuple(float(v) for v in problem.shoulder + torch.tensor([0.35, -0.05, -0.1]))
    actions = torch.tensor([[0.0] * 7, [-0.5, 0.1, 0.0, -0.2, 0.0, 0.1, 0.2]], dtype=solver.dtype)
    chunked = solver.solve(goal, actions, None, solver.full_iterations)
    with torch.no_grad():
        whole = problem.solve(solver.goal_tensor(goal, 2), actions, "body")
    torch.testing.assert_close(chunked.q, whole.q, atol=1e-5, rtol=0)
    answers = solver.answers(["reach_only", "policy"], actions, chunked, RESTED, solver.full_iterations, 0.0)
    outcome = problem.outcome(whole)
    assert [a.success for a in answers.values()] == outcome.success.tolist()
    assert answers["reach_only"].targets is None and set(answers["policy"].targets) == {"pelvis", "torso", "left_hand"}
    abandoned = solver.solve(goal, actions, None, solver.full_iterations, current=lambda: False)
    assert abandoned is None


def test_live_trainer_steps_validates_and_snapshots(one_thread) -> None:
    cfg = PRESETS["smoke"]
    solver = BodySolver(cfg)
    goals = solver.problem.shoulder + torch.tensor([0.3, -0.05, -0.1])
    trainer = LiveCounterweightTrainer(solver.problem, goals[None].double(), goals[None].double(), cfg.train, 0)
    loss = trainer.step()
    assert math.isfinite(loss) and trainer.step_count == 1 and trainer.history.loss == [loss]
    assert 0.0 <= trainer.validate() <= 1.0 and trainer.history.val_steps == [1]
    snapshot = trainer.snapshot()
    assert not any(p.requires_grad for p in snapshot.parameters())


def _rested(viewer) -> bool:
    drawn = viewer.drawn
    return (
        viewer.drawn_question is not None
        and viewer.drawn_question.p == viewer.board.current.p
        and all(isinstance(drawn[key], BodyAnswer) and drawn[key].phase == RESTED for key in ("reach_only", "policy"))
        and not {"reach_only", "policy"} & viewer.pending
    )


def test_moving_goal_draws_no_stale_answer_and_latency_while_training(start_g1) -> None:
    viewer = start_g1()
    wait_until(lambda: viewer.trainer.status.step >= 1 and _rested(viewer), 90, "the trainer and rested answers")
    viewer.latencies_ms.clear()
    start = np.array(viewer.board.current.p)
    for i in range(16):  # a hand dragging the goal: a position every 150 ms
        viewer.board.offer_target(
            start + [0.008 * i, 0.004 * i, -0.004 * i], busy=lambda: viewer.answers.signal.is_busy
        )
        time.sleep(0.15)
    wait_until(lambda: _rested(viewer), 30, "the rested answers for the final goal")
    final = tuple(float(v) for v in start + [0.008 * 15, 0.004 * 15, -0.004 * 15])
    assert viewer.drawn_question.p == pytest.approx(final)
    assert viewer.stale_draws == 0
    bones = np.array(skeleton_bones(viewer.solver.problem))
    for key in ("reach_only", "policy"):  # each ghost's stick figure is its drawn answer's pose
        figure = viewer.ghosts[key].figure.handle.points
        np.testing.assert_allclose(figure, viewer.drawn[key].frames[bones], atol=1e-6)
    latencies = list(viewer.latencies_ms)
    assert latencies and viewer.rested_latencies_ms
    print(
        f"\nG1 goal change -> reach-only and policy ghosts drawn: median {statistics.median(latencies):.0f} ms, max "
        f"{max(latencies):.0f} ms over {len(latencies)} (trainer running, step {viewer.trainer.status.step}); "
        f"rested answer {statistics.median(viewer.rested_latencies_ms):.0f} ms; abandoned full solves "
        f"{viewer.answers.abandoned}"
    )
    assert viewer.trainer.status.state == "running"
    assert "reach only" in viewer.reach.table.content


def test_worker_failures_are_shown_and_answers_go_on(start_g1, monkeypatch) -> None:
    def broken_step(self) -> float:
        raise RuntimeError("simulated trainer crash")

    def broken_optimise(self, p, should_stop):
        raise RuntimeError("simulated optimisation crash")

    monkeypatch.setattr(LiveCounterweightTrainer, "step", broken_step)
    monkeypatch.setattr(BodySolver, "optimise", broken_optimise)
    viewer = start_g1()
    wait_until(lambda: "trainer" in viewer.status.messages, 90, "the trainer failure in the status line")
    wait_until(lambda: "per-goal optimisation" in viewer.status.messages, 30, "the optimisation failure")
    assert "simulated trainer crash" in viewer.training.state.content
    assert "simulated optimisation crash" in viewer.status.handle.content
    viewer.set_target(np.array(viewer.board.current.p) + [0.02, 0.0, 0.0])
    wait_until(lambda: _rested(viewer), 30, "answers after the failures")


G1_CAMERA = (CAMERA_POSITION, CAMERA_LOOK_AT, CAMERA_FOV_DEG)


@pytest.mark.browser
def test_dragging_the_goal_with_the_mouse_moves_the_ghosts(page, tmp_path: Path) -> None:  # noqa: F811
    """``--light``: the solid G1 as a stick figure too (its meshes take seconds a frame in software WebGL)."""
    log_path = tmp_path / "app.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "--robot", "g1", "--light", "--port", str(free_port())],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=os.environ | {"PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        try:
            _drag_in_browser(page, proc, log_path)
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def _drag_in_browser(page, proc, log_path: Path) -> None:  # noqa: F811
    deadline = time.monotonic() + 45
    url = None
    while url is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"python -m app --robot g1 did not serve:\n{log_path.read_text()}")
        match = re.search(r"Viewer running at (http://\S+)", log_path.read_text())
        if match:
            with urllib.request.urlopen(match[1], timeout=5):
                url = match[1]
        time.sleep(0.2)
    page.goto(url)
    page.locator("canvas").first.wait_for(timeout=30_000)
    page.get_by_text("Counterweight policy (live)", exact=True).first.wait_for(timeout=30_000)

    def rows() -> dict[str, list[str]]:
        return {label: method_row(page, label) for label in ("reach only", "learned policy")}

    def answered(phase: str | None = None) -> bool:
        current = rows()
        return all(len(c) > 4 and c[1] in "✔✘" and (phase is None or phase in c[4]) for c in current.values())

    wait_until(lambda: answered("rested"), 60, "the first rested answers in the page", poll_s=0.2)
    before = rows()
    page.evaluate("document.querySelectorAll('.mantine-Notification-root').forEach(n => n.remove())")
    page.wait_for_timeout(1000)
    grab, direction = find_x_arrow(page, tuple(_initial_goal()), G1_CAMERA, radius_px=15)
    page.mouse.move(*grab)
    page.mouse.down()
    for step in range(1, 7):
        page.mouse.move(*(grab + 60.0 * step / 6 * direction))
    page.mouse.up()
    wait_until(lambda: answered() and rows() != before, 60, "rows answering the dragged goal", poll_s=0.2)
    print(f"\nafter the drag: {rows()}")


def _initial_goal() -> np.ndarray:
    from app.g1_scene import INITIAL_GOAL
    from learning.counterweight.experiment import build_problem
    from learning.counterweight.goals import goal_points

    shoulder = build_problem(PRESETS["full"]).shoulder.double()
    return goal_points(shoulder, *(torch.tensor([v], dtype=torch.float64) for v in INITIAL_GOAL))[0].numpy()
