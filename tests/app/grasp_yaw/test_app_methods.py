"""Every method the experiment compares, live in the viewer: answered for a dragged target exactly as the
experiment's evaluation answers it, searches abandoned when the target moves, the picker, the labels and the table."""

from __future__ import annotations

import dataclasses
import math
import threading

import numpy as np
import pytest
import torch
from viewer_support import drag, wait_until

from app.grasp_yaw.inference import MethodResult
from app.grasp_yaw.methods import BY_KEY, KEYS, SEARCH_KEYS
from app.grasp_yaw.scene import Viewer
from learning.common.panda import franka_kinematics
from learning.grasp_yaw.checkpoints import load_checkpoint
from learning.grasp_yaw.config import preset
from learning.grasp_yaw.evaluation import eval_layer, policy_chooser, search_choosers, solve_choice
from learning.grasp_yaw.experiment import checkpoint_path, train_run
from learning.grasp_yaw.scoring import score_yaws
from learning.grasp_yaw.splits import GoalSet
from learning.grasp_yaw.task import failure_penalty


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A smoke-sized trained run with one seed: every trained method has a checkpoint."""
    cfg = preset("smoke")
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, seeds=(0,)))
    folder = tmp_path_factory.mktemp("run")
    train_run(cfg, folder, show_progress=False)
    return folder


def _all_answered(viewer: Viewer) -> bool:
    current = viewer.board.current
    return (
        viewer.drawn_question is not None
        and viewer.drawn_question.place == current.place
        and not viewer.pending
        and all(isinstance(viewer.drawn.get(key), MethodResult) for key in KEYS)
    )


def test_every_method_answers_a_dragged_target_as_the_experiment_does(start_viewer, run) -> None:
    viewer = start_viewer(checkpoint=checkpoint_path(run, 0, "ik_trained"), train=False)
    wait_until(lambda: viewer.board.current.policy is not None, 60, "the loaded predictor's snapshot")
    final = np.array([0.52, -0.18, 0.14])
    drag(viewer, [np.array([0.45, 0.1, 0.1]), np.array([0.5, -0.1, 0.12]), final])
    wait_until(
        lambda: _all_answered(viewer) and "Learned predictor vs teacher: yaw" in viewer.grasp.table.content,
        60,
        "every method's answer for the dragged target, in the table",
    )
    assert viewer.drawn_question.p == tuple(final)

    kinematics = franka_kinematics("cpu")
    cfg = viewer.cfg
    goals = GoalSet(
        torch.tensor([viewer.board.current.p], dtype=kinematics.dtype),
        torch.tensor([viewer.board.current.q0], dtype=kinematics.dtype),
    )
    experiment = search_choosers(cfg, kinematics)
    for key in ("learned", "teacher_supervised", "zero_order", "shared_constant"):
        name = BY_KEY[key].experiment_name
        experiment[name] = policy_chooser(load_checkpoint(checkpoint_path(run, 0, name), kinematics)[0])
    ik, penalty = eval_layer(cfg, kinematics), failure_penalty(kinematics)
    for key in KEYS:
        yaw, _ = solve_choice(experiment[BY_KEY[key].experiment_name], goals, ik)
        expected = score_yaws(ik, goals, yaw, cfg.weights, penalty)
        shown = viewer.drawn[key]
        assert abs(math.remainder(shown.yaw - math.atan2(float(yaw[0, 1]), float(yaw[0, 0])), 2 * math.pi)) < 1e-5, key
        assert shown.success == bool(expected.success[0] > 0.5), key
        assert shown.displacement == pytest.approx(float(expected.displacement[0]), abs=1e-4), key
    assert viewer.stale_draws == 0 and viewer.supervisor.failures() == 0
    table = viewer.grasp.table.content
    for key in KEYS:
        assert BY_KEY[key].label in table
    assert "**" in table, "the best value of a column is marked"


@pytest.mark.slow
def test_without_a_run_the_teacher_supervised_predictor_is_trained_live(start_viewer) -> None:
    viewer = start_viewer()
    for key in ("zero_order", "shared_constant"):
        assert "needs a run" in viewer.drawn[key]
    assert "--run RUN" in viewer.status.messages["checkpoint"]
    wait_until(lambda: viewer.supervised.status.step >= 3, 60, "the teacher's labels and supervised steps")
    wait_until(lambda: isinstance(viewer.drawn.get("teacher_supervised"), MethodResult), 30, "its live answer")
    assert viewer.trainer.status.step >= 1, "both trainers step, taking turns"
    assert "running" in viewer.supervised_panel.state.content and not viewer.supervised_panel.progress.visible
    shown = viewer.drawn["teacher_supervised"]
    question = viewer.drawn_question
    kinematics = franka_kinematics("cpu")
    goals = GoalSet(
        torch.tensor([question.p], dtype=kinematics.dtype), torch.tensor([question.q0], dtype=kinematics.dtype)
    )
    yaw, _ = solve_choice(
        policy_chooser(question.policies["teacher_supervised"]), goals, eval_layer(viewer.cfg, kinematics)
    )
    assert abs(math.remainder(shown.yaw - math.atan2(float(yaw[0, 1]), float(yaw[0, 0])), 2 * math.pi)) < 1e-5


@pytest.mark.slow
def test_a_search_is_abandoned_when_the_target_moves(start_viewer, monkeypatch) -> None:
    viewer = start_viewer(train=False)
    wait_until(lambda: isinstance(viewer.drawn.get("reference"), MethodResult), 60, "the first searches")
    entered, release = threading.Event(), threading.Event()
    grid = viewer.search.solver.choosers["angular_grid"]

    def held_grid(p, q0):
        entered.set()
        release.wait(10)
        return grid(p, q0)

    monkeypatch.setitem(viewer.search.solver.choosers, "angular_grid", held_grid)
    abandoned, discarded = viewer.search.abandoned, viewer.board.search.discarded
    viewer.set_target(np.array([0.45, 0.2, 0.1]))
    assert entered.wait(10)
    viewer.set_target(np.array([0.55, -0.2, 0.1]))  # while the grid searches the first target
    entered.clear()
    release.set()
    wait_until(lambda: _all_answered_searches(viewer), 60, "the searches for the second target")
    assert viewer.board.search.discarded == discarded + 1, "the first target's grid answer is discarded"
    assert viewer.search.abandoned >= abandoned + len(SEARCH_KEYS) - 1, "its other searches never ran"
    assert viewer.stale_draws == 0


def _all_answered_searches(viewer: Viewer) -> bool:
    return viewer.drawn_question is not None and all(
        isinstance(viewer.drawn.get(k), MethodResult) and k not in viewer.pending for k in SEARCH_KEYS
    )


@pytest.mark.slow
def test_the_picker_chooses_the_ghosts_and_labels_never_overlap(start_viewer) -> None:
    viewer = start_viewer(train=False)
    wait_until(lambda: _all_answered_searches(viewer), 60, "the searches")
    drawn = [g for g in viewer.ghosts.values() if g.drawn]
    assert {g.key for g in drawn} >= {"radial", "angular_grid", "online_optimization", "reference"}
    heights = sorted(float(g._label.position[2]) for g in drawn)
    assert all(b - a > 0.03 for a, b in zip(heights, heights[1:], strict=False)), heights
    viewer.picker.boxes["heading"].value = False  # as a browser unticking it
    viewer.picker.boxes["angular_grid"].value = False
    assert not viewer.ghosts["heading"].drawn and not viewer.ghosts["angular_grid"].drawn
    viewer.picker.boxes["heading"].value = True
    assert viewer.ghosts["heading"].drawn
    assert "angular grid" in viewer.grasp.table.content, "the table lists every method whatever is shown"
    drawn = [g for g in viewer.ghosts.values() if g.drawn]
    heights = sorted(float(g._label.position[2]) for g in drawn)
    assert all(b - a > 0.03 for a, b in zip(heights, heights[1:], strict=False)), heights


@pytest.fixture
def one_torch_thread():
    """``python -m app``'s default: one torch thread per worker (``--threads 1``)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.slow
def test_answer_times_at_a_hands_pace_while_training(one_torch_thread, start_viewer) -> None:
    """The viewer's own timing, trainers running, threads as ``python -m app`` sets them: fast ghosts after a
    target change, searches after it rests."""
    viewer = start_viewer()
    wait_until(lambda: viewer.trainer.status.step >= 2 and _all_answered_searches(viewer), 60, "the first answers")
    viewer.latencies_ms.clear()
    for latencies in viewer.search_latencies_ms.values():
        latencies.clear()
    for i in range(8):
        viewer.set_target(np.array([0.40 + 0.02 * i, -0.2 + 0.05 * i, 0.1]))
        wait_until(lambda: _all_answered_searches(viewer), 30, "every search's answer")
    fast = float(np.median(viewer.latencies_ms))
    searches = {key: float(np.median(values)) for key, values in viewer.search_latencies_ms.items()}
    print(
        f"\nmedian ms after a target change, trainer at step {viewer.trainer.status.step}: fast ghosts {fast:.0f}, "
        + ", ".join(f"{key} {ms:.0f}" for key, ms in searches.items())
        + f" (settle {1e3 * viewer.search.settle_s:.0f} ms before online optimisation and the teacher)"
    )
    assert viewer.stale_draws == 0
    assert fast < 1000 and searches["angular_grid"] < 1500
    assert max(searches.values()) < 3000


def test_the_table_marks_the_best_printed_value_of_each_column_and_the_gap_to_the_teacher() -> None:
    from app.grasp_yaw.panel import results_table

    def answer(displacement: float, success: bool, ms: float, yaw: float = 0.3) -> MethodResult:
        return MethodResult(yaw, success, displacement, 0.0 if success else 0.01, 0.0, np.zeros(7), np.eye(4), ms)

    rows = {
        "radial": answer(1.0, False, 30),  # cheapest but failed: not the best displacement
        "learned": answer(4.0001, True, 40, yaw=0.4),
        "heading": answer(4.0, True, 31),
        "reference": answer(3.9, True, 90),
    }
    lines = results_table(rows).splitlines()
    row = {key: next(line for line in lines if f"</span> {BY_KEY[key].label} |" in line) for key in rows}
    assert "**3.900**" in row["reference"] and "**1.000**" not in row["radial"]
    assert "**30**" in row["radial"] and "**0.0 / 0.0**" in row["learned"] and "**0.0 / 0.0**" in row["heading"]
    gap = next(line for line in lines if line.startswith("Learned predictor vs teacher"))
    assert "yaw 5.7° apart, Δq +0.100 rad² (+3 %), both solve" in gap
    pending = results_table(rows, pending={"reference"}).splitlines()
    dimmed = next(line for line in pending if "Learned predictor vs teacher" in line)
    assert "opacity" in dimmed and "yaw 5.7° apart" in dimmed, "a pending answer dims the gap, keeping its text"
    assert "waiting for both answers" in results_table({"learned": rows["learned"]}).splitlines()[-3]
