"""The G1 scene (``python -m app --robot g1``): its math against the experiment's, its table, the goal region's
clamp, the viewer in-process (no stale answer drawn, latency while training, a loaded run's policies as ghosts and
rows, failures shown) and one real-browser drag of the reach goal from the front sector into the one behind."""

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
from browser_support import find_x_arrow, input_xpath, method_row, project
from viewer_support import free_port, rested, type_text, wait_until

from app.counterweight.answers import POLICY, REACH_ONLY, RESTED, BodyAnswer, BodySolver, convex_hull
from app.counterweight.methods import BODY_BY_KEY, FAST_BODY_KEYS, RUN_KEYS
from app.counterweight.panel import answers_table, verdict_legend
from app.counterweight.region import INSIDE_RAD, GoalRegion
from app.counterweight.scene import CAMERA, INITIAL_GOAL, NEEDS_A_RUN
from app.counterweight.trainer import LiveCounterweightTrainer, live_gradient_trainer
from app.shell.stage import GIZMO_SCALE
from learning.counterweight.config import PRESETS
from learning.counterweight.experiment import build_problem, checkpoint_path
from learning.counterweight.figures import skeleton_bones
from learning.counterweight.goals import goal_points
from learning.counterweight.methods import make_policy

REPO = Path(__file__).resolve().parents[3]
REGION = PRESETS["full"].goals


def _answer(**kwargs) -> BodyAnswer:
    fields = dict(q=np.zeros(36), success=True, hand_error=0.004, balance_margin=0.012, balanced=True,
                  com_xy=np.zeros(2), phase=RESTED, iterations=16, latency_ms=250.0, frames=np.zeros((40, 3)),
                  payload=np.zeros(3))  # fmt: skip
    return BodyAnswer(**(fields | kwargs))


def test_convex_hull_drops_interior_points_and_runs_counter_clockwise() -> None:
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5], [0.2, 0.9]], dtype=float)
    hull = convex_hull(square)
    assert sorted(map(tuple, hull)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    area = 0.5 * sum(a[0] * b[1] - b[0] * a[1] for a, b in zip(hull, np.roll(hull, -1, 0), strict=True))
    assert area == pytest.approx(1.0)  # positive: counter-clockwise


def _row(table: str, label: str) -> str:
    return next(line for line in table.splitlines() if f"</span> {label} |" in line)


def test_table_marks_pending_answers_a_violated_margin_and_methods_without_a_run() -> None:
    drawn = {
        "reach_only": _answer(balanced=False, balance_margin=-0.003, success=False, failed=("margin",)),
        "policy": _answer(),
        "constant": _answer(success=False, hand_error=0.0008, balance_margin=0.011, failed=("feet", "limits")),
        "es_seconds": NEEDS_A_RUN,
    }
    table = answers_table(drawn, pending={"policy"})
    reach = _row(table, "reach only")
    assert "| ✘ margin |" in reach and "-3.0 ⚠" in reach and "rested (16 it.)" in reach
    assert "| ✘ feet limits | 0.8 | 11.0 |" in _row(table, "best constant offset")  # reached, yet missed: says why
    policy = _row(table, "learned policy (R^9)")
    assert "□</span>" in policy and "opacity" in policy and ">4.0<" in policy, "pending: hollow swatch, dimmed"
    answered = answers_table(drawn).splitlines()
    for before, after in zip(answered, table.splitlines(), strict=True):  # pending keeps the layout
        if not before.startswith("| <span"):
            continue
        assert after.count("|") == before.count("|")
        assert re.sub(r"<[^>]+>", "", after).replace("□", "■") == re.sub(r"<[^>]+>", "", before)
    assert f"| {NEEDS_A_RUN} |" in _row(table, "ES (equal time)") and len(NEEDS_A_RUN) <= 12  # one line in a cell
    assert "| – |" in _row(table, "per-goal optimisation")
    assert len([line for line in table.splitlines() if line.startswith("| <span")]) == len(BODY_BY_KEY)
    legend = verdict_legend(0.01, 0.01, 1e-4)
    assert "the hand within 10 mm of the goal" in legend and "at least 9.9 mm inside the support polygon" in legend
    assert answers_table(drawn, verdict=legend).split("\n\n")[1].startswith("✔: the experiment's success")


def test_chunked_solve_is_the_experiments_solve(one_thread) -> None:
    solver = BodySolver(PRESETS["full"])
    problem = solver.problem
    goal = tuple(float(v) for v in problem.shoulder + torch.tensor([0.35, -0.05, -0.1]))
    offsets = torch.zeros(1, 18, dtype=solver.dtype)
    offsets[0, :3] = torch.tensor([-0.03, 0.02, -0.02])  # the pelvis moved
    offsets[0, 15:] = torch.tensor([-0.2, 0.1, 0.05])  # the free hand moved
    choice = {name: pose[0] for name, pose in problem.body_targets(offsets).items()}
    chunked = solver.solve(goal, [None, choice], None, solver.full_iterations)
    with torch.no_grad():
        reach = problem.solve(solver.goal_tensor(goal, 1), None, "body")
        chosen = problem.solve(solver.goal_tensor(goal, 1), offsets, "body", "r9")
    torch.testing.assert_close(chunked.q, torch.cat([reach.q, chosen.q]), atol=1e-5, rtol=0)
    answers = solver.answers(["reach_only", "policy"], [None, choice], chunked, RESTED, solver.full_iterations, 0.0)
    assert answers["reach_only"].success == bool(problem.outcome(reach).success[0])
    assert answers["policy"].success == bool(problem.outcome(chosen).success[0])
    targets = answers["policy"].targets
    assert answers["reach_only"].targets is None and set(targets) == {"pelvis", "torso", "left_hand"}
    np.testing.assert_allclose(targets["pelvis"], choice["pelvis"].double().numpy(), atol=1e-7)
    np.testing.assert_allclose(targets["left_hand"], choice["left_hand"].double().numpy(), atol=1e-7)
    torso = problem.tree.frame_pose(chunked.q[1], problem.robot.frames["torso"])  # the torso frame sits on the torso
    np.testing.assert_allclose(targets["torso"][:3, 3], torso[:3, 3].double().numpy(), atol=1e-6)
    np.testing.assert_allclose(targets["torso"][:3, :3], choice["torso"][:3, :3].double().numpy(), atol=1e-7)
    assert solver.solve(goal, [None, choice], None, solver.full_iterations, current=lambda: False) is None


def test_live_trainer_steps_validates_and_snapshots(one_thread) -> None:
    cfg = PRESETS["smoke"]
    solver = BodySolver(cfg)
    goals = (solver.problem.shoulder + torch.tensor([0.3, -0.05, -0.1]))[None].double()
    policy = make_policy("gradient", solver.problem, cfg)
    trainer = live_gradient_trainer(solver.problem, policy, (goals, goals), cfg.train, 0)
    loss = trainer.step()
    assert math.isfinite(loss) and trainer.step_count == 1 and trainer.history.loss == [loss]
    assert 0.0 <= trainer.validate() <= 1.0 and trainer.history.val_steps == [1]
    snapshot = trainer.snapshot()
    assert not any(p.requires_grad for p in snapshot.parameters())
    assert snapshot(goals).shape == (1, 18) and snapshot.parameterisation == "r9"


def test_goal_region_keeps_held_out_goals_and_moves_outside_ones_to_a_trained_goal() -> None:
    shoulder = np.array([0.0, -0.2, 1.2])
    region = GoalRegion(shoulder, REGION)
    inside = region.point(0.38, -0.1, -0.2)
    point, message = region.clamp(inside)
    assert message is None and np.array_equal(point, inside) and "front sector" in region.describe(inside)
    behind = region.point(0.38, -2.7, 0.0)
    assert region.clamp(behind)[1] is None and "behind sector" in region.describe(behind)
    for held_out in (region.point(0.43, -0.1, -0.2), region.point(0.38, -0.6, -0.2)):  # far; between the sectors
        assert region.clamp(held_out)[1] is None and "held out" in region.describe(held_out)
    cases = {  # (distance, azimuth, elevation) -> the trained part's nearest point
        (0.38, -1.5, -0.2): (
            0.38,
            REGION.sectors[1][1] - INSIDE_RAD,
            -0.2,
        ),  # at the side: behind, not the between band
        (0.38, 1.6, -0.2): (0.38, REGION.sectors[0][1] - INSIDE_RAD, -0.2),  # the other side: the front sector
        (0.38, 2.9, -0.2): (0.38, REGION.sectors[1][0] + INSIDE_RAD, -0.2),  # behind, the wrong side: round the back
        (0.70, -0.1, -0.2): (REGION.distance[1] - INSIDE_RAD, -0.1, -0.2),  # too far: the trained distance, not 0.44
        (0.50, -0.6, -0.2): (REGION.distance[1] - INSIDE_RAD, REGION.sectors[0][0] + INSIDE_RAD, -0.2),  # far, between
        (0.10, -0.1, -1.2): (REGION.distance[0] + INSIDE_RAD, -0.1, REGION.elevation[0] + INSIDE_RAD),  # near, low
    }
    for given, expected in cases.items():
        point, message = region.clamp(region.point(*given))
        np.testing.assert_allclose(region.spherical(point), expected, atol=1e-9)
        moved = ", ".join(f"{v:.3f}" for v in point)
        assert message is not None and "outside the task's region" in message and f"moved to ({moved}) m" in message
        assert "nearest point of the trained sectors" in message and "held out" not in region.describe(point)
        assert region.clamp(np.round(point, 4))[1] is None  # the page's rounding keeps it inside
    trained = np.stack([region.point(0.36, 0.1, -0.3), region.point(0.40, -0.3, 0.1), region.point(0.37, -2.5, 0)])
    for given, nearest in (((0.70, -0.1, 0.3), 1), ((0.38, 2.9, -0.2), 2), ((0.1, 0.3, -1.2), 0)):
        point, message = region.clamp(region.point(*given), trained)
        assert np.array_equal(point, trained[nearest]) and "the nearest goal the policies train on" in message
    point, message = region.clamp(inside, trained)
    assert message is None and np.array_equal(point, inside)  # inside: stays, whatever was trained
    point, message = region.clamp(np.array([np.nan, 0.0, 1.0]))
    assert np.all(np.isfinite(point)) and "nan" in message
    far = region.point(0.43, -0.1, 0.4)  # held out by distance, above the elevation range
    point, message = region.clamp(far)
    distance, _, elevation = region.spherical(point)
    limit = f"{math.degrees(REGION.elevation[1]):.1f}°"
    assert f"to {limit}" in message and f"elevation {math.degrees(elevation):.1f}°" in region.describe(point)
    assert math.degrees(elevation) <= math.degrees(REGION.elevation[1])  # the two lines agree: inside the limit
    assert f"beyond {REGION.distance[1]:.3f} m held out" in message and f"{distance:.3f} m" in region.describe(point)
    assert len(message) < 320 and "sector:" not in message  # a short paragraph; where it lies is the goal line's


@pytest.mark.slow
def test_moving_goal_draws_no_stale_answer_and_latency_while_training(start_g1) -> None:
    viewer = start_g1()
    assert all(viewer.drawn[key] == NEEDS_A_RUN for key in RUN_KEYS)  # said in their rows, not left out
    assert NEEDS_A_RUN in viewer.reach.table.content
    wait_until(lambda: viewer.trainer.status.step >= 1 and rested(viewer), 120, "the trainer and rested answers")
    viewer.latencies_ms.clear()
    region = viewer.region
    distance, azimuth, elevation = INITIAL_GOAL
    path = [region.point(distance, azimuth + 0.02 * i, elevation + 0.01 * i) for i in range(16)]
    for p in path:  # a hand dragging the goal across the front sector: a position every 150 ms
        viewer.board.offer_target(p, busy=lambda: viewer.answers.signal.is_busy)
        time.sleep(0.15)
    wait_until(lambda: rested(viewer), 30, "the rested answers for the final goal")
    assert viewer.drawn_question.p == pytest.approx(tuple(path[-1]))
    assert viewer.stale_draws == 0
    bones = np.array(skeleton_bones(viewer.solver.problem))
    for key in (REACH_ONLY, POLICY):  # each ghost's stick figure is its drawn answer's pose
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
    assert "front sector" in viewer.reach.where.content


def test_a_loaded_run_shows_every_policy_as_a_ghost_and_a_row(start_g1, smoke_run: Path) -> None:
    viewer = start_g1(checkpoint=checkpoint_path(smoke_run, 0, "gradient"))
    assert set(viewer.trained) == set(RUN_KEYS) and "run" not in viewer.status.messages
    wait_until(lambda: rested(viewer, FAST_BODY_KEYS), 60, "every policy's rested answer")
    table = viewer.reach.table.content
    for key in FAST_BODY_KEYS:
        answer, ghost = viewer.drawn[key], viewer.ghosts[key]
        assert re.search(r"\| (✔|✘( [a-z]+)*) \|", _row(table, BODY_BY_KEY[key].label)), key
        assert answer.success == (answer.failed == ()), key  # a ✘ names what was missed
        assert ghost.drawn == BODY_BY_KEY[key].shown  # answered; drawn as the picker says
        if key != REACH_ONLY:  # its body targets, as frames where its ghost is drawn
            for name, frame in ghost.targets.items():
                assert frame.visible == ghost.drawn
                np.testing.assert_allclose(frame.position, answer.targets[name][:3, 3], atol=1e-6)
    es = viewer.drawn["es_seconds"].targets["pelvis"]
    assert not np.allclose(es, viewer.drawn[POLICY].targets["pelvis"])  # each policy its own targets
    viewer.picker.boxes["es_evaluations"].value = True  # as a browser ticking it
    viewer.picker.boxes["es_seconds"].value = False
    wait_until(lambda: viewer.ghosts["es_evaluations"].drawn and not viewer.ghosts["es_seconds"].drawn, 5, "the picker")
    assert viewer.ghosts["es_evaluations"].targets["pelvis"].visible
    assert not viewer.ghosts["es_seconds"].targets["pelvis"].visible


def test_a_goal_outside_the_region_moves_to_a_trained_goal_with_a_message(start_g1, smoke_run: Path) -> None:
    viewer = start_g1(checkpoint=checkpoint_path(smoke_run, 0, "gradient"))
    region, trained = viewer.region, viewer.race.goals[0].numpy()
    side = region.point(0.38, -1.5, -0.2)  # beside the robot: between the sectors' azimuths
    question = viewer.set_target(side)
    assert np.min(np.linalg.norm(trained - question.p, axis=1)) < 1e-12  # a goal the trainers train on
    assert region.clamp(side, trained)[0] == pytest.approx(question.p)
    moved = ", ".join(f"{v:.3f}" for v in question.p)
    assert f"moved to ({moved}) m" in viewer.reach.bounds.content and "goal bounds" not in viewer.status.messages
    assert "sector" in viewer.reach.where.content and "held out" not in viewer.reach.where.content
    np.testing.assert_allclose(viewer.gizmo.handle.position, question.p)
    np.testing.assert_allclose(_boxes(viewer), question.p, atol=1e-4)  # the boxes follow a button

    far = region.point(0.6, -2.7, 0.0)  # typed: too far, behind
    for box, v in zip(viewer.reach.typed.boxes, far, strict=True):
        box.value = repr(float(v))  # typed text, taken at Enter (or a pause)
    viewer.reach.typed.commit()  # Enter
    goal = np.array(viewer.board.current.p)
    assert np.min(np.linalg.norm(trained - goal, axis=1)) < 1e-12
    assert "behind sector" in viewer.reach.where.content and "held out" not in viewer.reach.where.content
    np.testing.assert_allclose(_boxes(viewer), goal, atol=1e-4)  # committed: shows where it went
    held_out = region.point(0.43, -0.6, -0.1)  # farther than any trained goal, between the sectors: inside
    assert viewer.set_target(held_out).p == pytest.approx(held_out)
    assert viewer.reach.bounds.content == "" and "held out" in viewer.reach.where.content


def _boxes(viewer) -> list[float]:
    return [float(box.value) for box in viewer.reach.typed.boxes]


def test_a_goal_typed_key_by_key_keeps_its_minus_sign_and_refused_text_says_why(start_g1) -> None:
    """The goal boxes are the Franka scene's typed numbers: ``-0.25`` typed at 120 ms a key is -0.25, not 0.25; a box
    reading ``abc`` is refused under the boxes, the goal unchanged."""
    viewer = start_g1(train=False)
    region = viewer.region
    start = region.point(0.38, -0.3, -0.1)  # in front, right of the shoulder
    viewer.set_target(start)
    wanted = np.array(viewer.board.current.p)
    wanted[1] = round(wanted[1] - 0.01, 4)
    assert wanted[1] < 0 and region.clamp(wanted)[1] is None  # inside the region: nothing moves it
    said = type_text(viewer.reach.typed.boxes[1], f"{wanted[1]:.4f}", key_interval_s=0.12)
    assert said[:2] == ["-", "-0"]  # never rewritten under the cursor
    viewer.reach.typed.commit()  # Enter
    assert viewer.board.current.p[1] == pytest.approx(wanted[1]) and viewer.reach.refused.content == ""
    before = viewer.board.current.p
    viewer.reach.typed.boxes[0].value = "abc"
    viewer.reach.typed.commit()
    assert viewer.board.current.p == before
    assert "'abc' is not a number" in viewer.reach.refused.content
    assert viewer.reach.typed.boxes[0].value == f"{before[0]:.4f}".rstrip("0").rstrip(".")  # rewritten at Enter


@pytest.mark.slow
def test_worker_failures_are_shown_and_answers_go_on(start_g1, monkeypatch) -> None:
    def broken_step(self) -> float:
        raise RuntimeError("simulated trainer crash")

    def broken_optimise(self, p, should_stop):
        raise RuntimeError("simulated optimisation crash")

    monkeypatch.setattr(LiveCounterweightTrainer, "step", broken_step)
    monkeypatch.setattr(BodySolver, "optimise", broken_optimise)
    viewer = start_g1()
    wait_until(lambda: "trainer" in viewer.status.messages, 120, "the trainer failure in the status line")
    wait_until(lambda: "per-goal optimisation" in viewer.status.messages, 30, "the optimisation failure")
    assert "simulated trainer crash" in viewer.training.state.content
    assert "simulated optimisation crash" in viewer.status.handle.content
    viewer.set_target(viewer.region.point(0.38, -0.05, -0.2))
    wait_until(lambda: rested(viewer), 30, "answers after the failures")


G1_CAMERA = (CAMERA.position, CAMERA.look_at, CAMERA.fov_deg)
DRAG_X_M = -0.75  # from the initial goal in front of the shoulder to behind it, along the gizmo's x arrow
TYPED_GOAL = (0.38, 0.1, -0.1)  # distance (m), azimuth, elevation (rad): in front


@pytest.mark.browser
def test_dragging_the_goal_with_the_mouse_from_front_to_behind(page, tmp_path: Path) -> None:  # noqa: F811
    """Then types a goal in front into the goal's text boxes and commits it with Enter. ``--light``: the solid G1 as a stick figure too (its
    meshes take seconds a frame in software WebGL)."""
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


def _goal_line(page) -> str:  # noqa: F811
    return page.evaluate(
        """() => [...document.querySelectorAll("p")].map(p => p.innerText).find(t => t.startsWith("Goal:")) || \"\""""
    )


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
        return all(len(c) > 4 and c[1][:1] in ("✔", "✘") and (phase is None or phase in c[4]) for c in current.values())

    wait_until(lambda: answered("rested"), 90, "the first rested answers in the page", poll_s=0.2)
    assert "front sector" in _goal_line(page)
    before = rows()
    page.evaluate("document.querySelectorAll('.mantine-Notification-root').forEach(n => n.remove())")
    page.wait_for_timeout(1000)
    goal = _goal(INITIAL_GOAL)
    grab, _ = find_x_arrow(page, tuple(goal), G1_CAMERA, radius_px=15)
    box = page.locator("canvas").first.bounding_box()
    held = goal + [0.6 * GIZMO_SCALE, 0.0, 0.0]  # the point of the arrow under the mouse
    start, end = (project(p, box["width"], box["height"], G1_CAMERA) for p in (held, held + [DRAG_X_M, 0.0, 0.0]))
    page.mouse.move(*grab)
    page.mouse.down()
    for step in range(1, 11):
        page.mouse.move(*(grab + (end - start) * step / 10))
    page.mouse.up()
    wait_until(lambda: "behind sector" in _goal_line(page), 60, "the goal line to say the goal is behind", poll_s=0.2)
    wait_until(lambda: answered("rested") and rows() != before, 60, "rows answering the dragged goal", poll_s=0.2)
    print(f"\ndragged {np.linalg.norm(end - start):.0f} px: {_goal_line(page)}; rows {rows()}")

    typed = _goal(TYPED_GOAL)  # typed back into the front sector, committed by Enter (a pause would too)
    behind = rows()
    for axis, value in zip("xyz", typed, strict=True):
        page.locator(f"xpath={input_xpath(f'goal {axis} (m)')}").fill(f"{value:.4f}")
        page.wait_for_timeout(200)  # viser's page sends one message per 50 ms and keeps only the latest
    page.locator(f"xpath={input_xpath('goal z (m)')}").press("Enter")
    wait_until(lambda: "front sector" in _goal_line(page), 30, "the typed goal, committed by Enter", poll_s=0.2)
    wait_until(lambda: answered("rested") and rows() != behind, 60, "rows answering the typed goal", poll_s=0.2)
    print(f"typed: {_goal_line(page)}")


def _goal(spherical: tuple[float, float, float]) -> np.ndarray:
    shoulder = build_problem(PRESETS["full"]).shoulder.double()
    return goal_points(shoulder, *(torch.tensor([v], dtype=torch.float64) for v in spherical))[0].numpy()
