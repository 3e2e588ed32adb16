"""The G1 scene's race: the zero-order trainer beside the gradient trainer on the same goals (the study's methods at
its tuned settings, the study's levels of goal-dependence), its ghost and its verdict, and the charts of both
validation curves against layer evaluations and seconds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from browser_support import UI_TIMEOUT_MS, find_x_arrow, method_row, pick, serve_app
from viewer_support import rested, wait_until

from app.counterweight import race
from app.counterweight.answers import POLICY, RACE, BodySolver
from app.counterweight.methods import BODY_BY_KEY
from app.counterweight.scene import CAMERA, INITIAL_GOAL
from app.counterweight.trainer import live_zero_order_trainer
from app.shell.trainer_worker import TrainerStatus
from learning.counterweight.config import PRESETS
from learning.counterweight.goals import goal_points
from learning.counterweight.study.design import StudyCfg, azimuth_intervals
from learning.counterweight.study.tuned import tuned_settings


def _status(seed: int, evaluations: list[int], seconds: list[float], success: list[float]) -> TrainerStatus:
    steps = list(range(len(success)))
    return TrainerStatus("running", len(success), 1, seed, val_steps=steps, val_success=success,
                         val_evaluations=evaluations, val_seconds=seconds)  # fmt: skip


def test_the_charts_merge_both_trainers_points_each_at_its_own_x() -> None:
    gradient = _status(0, [0, 48, 96], [0.0, 1.0, 2.0], [0.0, 0.5, 1.0])
    zero_order = _status(0, [0, 128], [0.0, 0.5], [0.0, 0.25])
    x, g, z = race.race_curves(gradient, zero_order, "evaluations")
    np.testing.assert_array_equal(x, [0, 0, 48, 96, 128])
    np.testing.assert_array_equal(g, [0, np.nan, 50, 100, np.nan])
    np.testing.assert_array_equal(z, [np.nan, 0, np.nan, np.nan, 25])
    x, g, z = race.race_curves(gradient, zero_order, "seconds")
    np.testing.assert_array_equal(x, [0, 0, 0.5, 1, 2])
    np.testing.assert_array_equal(z, [np.nan, 0, 25, np.nan, np.nan])
    x, g, z = race.race_curves(None, None, "seconds")  # nothing validated yet: one empty point
    assert len(x) == 1 and np.isnan(g).all() and np.isnan(z).all()


def test_the_race_takes_the_studys_tuned_settings_and_says_where_they_come_from(tmp_path: Path) -> None:
    store = tmp_path / "study"
    (store / "tuning").mkdir(parents=True)
    choice = {"pgpe_stdev": 0.004, "pgpe_learning_rate": 0.02, "pgpe_population": 8, "pgpe_batch_size": 2}
    searches = [{"cell": "base", "method": "pgpe", "stage": "B", "choices": {"10x": choice, "1x": {}}},
                {"cell": "sectors-4", "method": "es", "stage": "B", "choices": {"10x": {"es_pairs": 3}}}]  # fmt: skip
    (store / "tuning" / "tuning B.json").write_text(json.dumps(searches))
    assert tuned_settings("pgpe", "10x", store) == choice
    assert tuned_settings("es", "10x", store) is None  # only the base cell's choices count
    assert tuned_settings("pgpe", "10x", tmp_path / "none") is None
    settings, source = race.race_settings("es", PRESETS["full"])  # the committed store
    assert (settings, source.startswith("the study's tuning at 10x")) == (tuned_settings("es"), True) or (
        settings == {} and "defaults" in source
    )


def test_a_zero_order_trainer_steps_records_its_spending_and_snapshots() -> None:
    cfg = PRESETS["smoke"]
    problem = BodySolver(cfg).problem
    goals = (problem.shoulder + torch.tensor([[0.3, -0.05, -0.1], [0.28, 0.1, -0.15]])).double()
    settings = {"pgpe_population": 4, "pgpe_batch_size": 1}
    trainer = live_zero_order_trainer(problem, cfg, "pgpe", settings, (goals, goals[:1]), seed=3)
    assert trainer.evaluations_per_step == 4
    before = [p.clone() for p in trainer.policy.parameters()]
    loss = trainer.step()
    assert math.isfinite(loss) and trainer.step_count == 1
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.policy.parameters(), strict=True))
    assert 0.0 <= trainer.validate() <= 1.0
    history = trainer.history
    assert history.val_ik_evaluations == [4] and history.val_seconds[0] > 0  # the step's, not the validation's
    snapshot = trainer.snapshot()
    assert not any(p.requires_grad for p in snapshot.parameters()) and snapshot(goals).shape == (2, 18)


def test_a_levels_goals_lie_in_its_sectors_and_need_a_counterweight(monkeypatch) -> None:
    monkeypatch.setattr(race, "RACE_GOALS", {"train": 3, "validation": 2})
    cfg = PRESETS["full"]
    problem = BodySolver(cfg).problem
    train, validation = race.level_goals(problem, cfg, "sectors-1")
    assert train.shape == (3, 3) and validation.shape == (2, 3)
    ((lo, hi),) = azimuth_intervals(StudyCfg().cell("sectors-1").sectors)
    d = torch.cat((train, validation)) - problem.shoulder.double()
    azimuth = torch.atan2(d[:, 1], d[:, 0])
    assert bool(((azimuth >= lo) & (azimuth <= hi)).all())
    assert not torch.equal(train[0], validation[0])  # each split its own generator


@pytest.mark.slow
def test_the_race_runs_beside_the_gradient_trainer_and_follows_the_pickers(start_g1, monkeypatch) -> None:
    """Both trainers step on the same goals and take turns; the race's ghost answers as a fast method; picking PGPE
    restarts the zero-order trainer alone; picking a level draws its goals and restarts both on them."""
    monkeypatch.setattr(race, "RACE_GOALS", {"train": 8, "validation": 4})
    viewer = start_g1()
    wait_until(lambda: viewer.race.trainer.status.step >= 1 and viewer.trainer.status.step >= 1, 240, "both trainers")
    wait_until(lambda: rested(viewer, (POLICY, RACE)), 60, "both policies' rested answers")
    assert viewer.ghosts[RACE].drawn and BODY_BY_KEY[RACE].label in viewer.reach.table.content
    assert "ES" in viewer.race.panel.about.content and viewer.race.goals_name == race.EXPERIMENT_REGION
    wait_until(lambda: len(viewer.race.trainer.status.val_success) >= 2, 120, "the zero-order trainer's validations")
    x, gradient, zero_order = viewer.race.panel.by_evaluations.data
    assert np.isfinite(gradient).any() and np.isfinite(zero_order).any() and np.all(np.diff(x) >= 0)
    gradient_seed = viewer.trainer.status.seed
    viewer.race.panel.method.value = "PGPE"  # as a browser picking it
    wait_until(lambda: "PGPE" in viewer.race.panel.about.content, 60, "the PGPE trainer")
    assert viewer.race.method == "pgpe" and viewer.trainer.status.seed == gradient_seed
    viewer.race.panel.goals.value = "1 sector"
    wait_until(lambda: viewer.race.goals_name == "1 sector", 120, "the level's goals")
    wait_until(lambda: viewer.trainer.status.seed > gradient_seed, 60, "the gradient trainer's restart")
    assert viewer.race.goals[0].shape == (8, 3) and "1 sector" in viewer.race.panel.about.content
    assert viewer.stale_draws == 0 and viewer.supervisor.failures() == 0


G1_CAMERA = (CAMERA.position, CAMERA.look_at, CAMERA.fov_deg)
RACE_ROW = BODY_BY_KEY[RACE].label


@pytest.mark.browser
def test_the_race_is_picked_and_watched_with_the_mouse(request, page, tmp_path: Path) -> None:
    """Pick PGPE and the 2-sector goals from the race's dropdowns with the mouse, then drag the goal's gizmo: the
    race's row answers every goal with a verdict, its text follows each pick, both charts are on the page."""
    page.goto(serve_app(request, tmp_path, "--robot", "g1"))
    page.locator("canvas").first.wait_for(timeout=UI_TIMEOUT_MS)
    page.get_by_text("Race: gradient vs zero-order (live)", exact=True).first.wait_for(timeout=UI_TIMEOUT_MS)

    def race_row() -> list[str]:
        return method_row(page, RACE_ROW)

    def answered() -> bool:
        row = race_row()
        return len(row) > 4 and row[1][:1] in ("✔", "✘")

    wait_until(answered, 120, "the race's zero-order policy answering in the table", poll_s=0.2)
    page.get_by_text("ES (", exact=False).first.wait_for(timeout=UI_TIMEOUT_MS)
    pick(page, "zero-order method", "PGPE")
    page.get_by_text("PGPE (", exact=False).first.wait_for(timeout=60_000)
    pick(page, "goals", "2 sectors")
    page.get_by_text("goals of 2 sectors, validated", exact=False).first.wait_for(timeout=120_000)  # restarted on them
    wait_until(answered, 120, "the race's row after the restarts", poll_s=0.2)
    before, goal_before = race_row(), goal_line(page)
    page.evaluate("document.querySelectorAll('.mantine-Notification-root').forEach(n => n.remove())")
    page.wait_for_timeout(1000)
    goal = np.array(launch_goal())
    grab, direction = find_x_arrow(page, tuple(goal), G1_CAMERA, radius_px=15)
    page.mouse.move(*grab)
    page.mouse.down()
    for step in range(1, 7):
        page.mouse.move(*(grab + 60.0 * step / 6 * direction))
    page.mouse.up()
    wait_until(lambda: goal_line(page) != goal_before, 60, "the dragged goal", poll_s=0.2)
    wait_until(lambda: answered() and race_row() != before, 60, "the race's answer to the dragged goal", poll_s=0.2)
    for axis in ("layer evaluations", "training seconds"):
        page.get_by_text(f"validation success % vs {axis}", exact=True).first.wait_for(timeout=UI_TIMEOUT_MS)
    page.screenshot(path=str(tmp_path / "g1_race.png"))
    print(f"\nrace row before the drag {before}, after {race_row()}; the page: {tmp_path / 'g1_race.png'}")


def goal_line(page) -> str:
    return page.evaluate(
        """() => [...document.querySelectorAll("p")].map(p => p.innerText).find(t => t.startsWith("Goal:")) || \"\""""
    )


def launch_goal() -> np.ndarray:
    """Where the G1 scene puts its goal at launch (``INITIAL_GOAL`` from the shoulder)."""
    shoulder = BodySolver(PRESETS["full"]).problem.shoulder.double()
    return goal_points(shoulder, *(torch.tensor([v], dtype=torch.float64) for v in INITIAL_GOAL))[0].numpy()
