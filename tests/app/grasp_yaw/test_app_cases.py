"""The Franka scene's run browser: the saved test cases, the model picker, the current-posture toggle and the yaw
landscape (the grid's own evaluations, each drawn method's yaw marked on it)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from viewer_support import wait_until

from app.grasp_yaw.inference import MethodResult
from learning.common.panda import franka_kinematics
from learning.grasp_yaw.checkpoints import load_checkpoint
from learning.grasp_yaw.config import preset
from learning.grasp_yaw.evaluation import eval_layer, policy_chooser, solve_choice
from learning.grasp_yaw.experiment import checkpoint_path, train_run
from learning.grasp_yaw.splits import GoalSet, load_splits


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A smoke-sized run with two seeds: every trained method has a checkpoint per seed."""
    cfg = preset("smoke")
    folder = tmp_path_factory.mktemp("run")
    train_run(cfg, folder, show_progress=False)
    return folder


def _shows_case(viewer, goals: GoalSet, index: int) -> bool:
    question = viewer.board.current
    return np.allclose(question.p, goals.p[index].numpy(), atol=1e-6) and np.allclose(
        question.q0, goals.q0[index].numpy(), atol=1e-6
    )


def test_a_picked_case_is_asked_whole_and_every_method_answers_it(start_viewer, run) -> None:
    viewer = start_viewer(checkpoint=checkpoint_path(run, 0, "ik_trained"), train=False)
    saved = load_splits(run / "splits.pt")
    assert f"run `{run.name}`" in viewer.cases.source.content
    viewer.cases.split.value = "test_shift"  # as a browser picking it
    wait_until(lambda: _shows_case(viewer, saved["test_shift"], 0), 10, "case 0 of the shift split")
    assert viewer.cases.case.max == len(saved["test_shift"]) - 1
    viewer.cases.step(+1)
    viewer.cases.step(+1)
    wait_until(lambda: _shows_case(viewer, saved["test_shift"], 2), 10, "case 2 of the shift split")
    assert "test_shift #2" in viewer.cases.shown.content
    wait_until(
        lambda: viewer.drawn_question == viewer.board.current and isinstance(viewer.drawn.get("learned"), MethodResult),
        60,
        "the answers for the case",
    )
    # The learned answer on screen is the loaded predictor's for exactly this case, checked as the experiment does.
    kinematics = franka_kinematics("cpu")
    goals = saved["test_shift"].subset(slice(2, 3)).to("cpu", kinematics.dtype)
    policy = load_checkpoint(checkpoint_path(run, 0, "ik_trained"), kinematics)[0]
    yaw, _ = solve_choice(policy_chooser(policy), goals, eval_layer(viewer.cfg, kinematics))
    shown = viewer.drawn["learned"]
    assert abs(math.remainder(shown.yaw - math.atan2(float(yaw[0, 1]), float(yaw[0, 0])), 2 * math.pi)) < 1e-5


def test_the_model_picker_switches_the_learned_predictor_and_back_to_the_trainer(start_viewer, run) -> None:
    viewer = start_viewer(checkpoint=checkpoint_path(run, 0, "ik_trained"), train=False)
    options = viewer.models.dropdown.options
    assert options[0] == "live trainer" and len(options) == 1 + 6 * 2, options  # 6 trained methods x 2 seeds
    assert viewer.models.dropdown.value == "IK-trained predictor · seed 0"
    kinematics = franka_kinematics("cpu")
    goals = GoalSet(
        torch.tensor([viewer.board.current.p], dtype=kinematics.dtype),
        torch.tensor([viewer.board.current.q0], dtype=kinematics.dtype),
    )
    for method, seed, name in (
        ("teacher_supervised", 1, "teacher-supervised predictor · seed 1"),
        ("shared_constant", 0, "shared constant (IK-trained) · seed 0"),
    ):
        viewer.models.dropdown.value = name  # as a browser picking it
        policy = load_checkpoint(checkpoint_path(run, seed, method), kinematics)[0]
        yaw = policy_chooser(policy)(goals.p, goals.q0)
        expected = math.atan2(float(yaw[0, 1]), float(yaw[0, 0]))
        wait_until(
            lambda expected=expected: (
                isinstance(viewer.drawn.get("learned"), MethodResult)
                and "learned" not in viewer.pending
                and abs(math.remainder(viewer.drawn["learned"].yaw - expected, 2 * math.pi)) < 1e-5
            ),
            60,
            f"the learned row answering as {name}",
        )
        assert name in viewer.status.messages["model"] and viewer.trainer.status.state != "running"
    viewer.models.dropdown.value = "live trainer"
    wait_until(lambda: viewer.trainer.status.state == "running", 30, "the trainer to resume")
    assert "model" not in viewer.status.messages


@pytest.mark.slow
def test_the_landscape_is_the_grids_evaluations_with_the_drawn_methods_marked(start_viewer) -> None:
    viewer = start_viewer(train=False)
    target = np.array([0.45, -0.2, 0.1])
    viewer.set_target(target)
    wait_until(
        lambda: (
            (rendered := viewer.landscape_panel.rendered) is not None
            and not rendered.pending
            and viewer.drawn_question == viewer.board.current
            and isinstance(viewer.drawn.get("angular_grid"), MethodResult)
            and {"radial", "angular_grid"} <= set(rendered.markers)
        ),
        60,
        "the landscape of the new target",
    )
    rendered = viewer.landscape_panel.rendered
    grid = viewer.drawn["angular_grid"]
    assert rendered.yaw_deg.size == viewer.cfg.baselines.grid_yaws
    # The grid's own evaluations: its answer is the cheapest solved yaw of the curve (its cost adds tiny
    # residual terms, so compare displacement loosely), and its marker sits on the curve.
    best = rendered.displacement[rendered.success].min()
    assert rendered.markers["angular_grid"][1] == pytest.approx(grid.displacement, abs=1e-9)
    assert grid.displacement == pytest.approx(best, rel=0.05)
    assert rendered.markers["radial"][0] == pytest.approx(math.degrees(math.atan2(-0.2, 0.45)), abs=1e-4)
    before = rendered.markers["radial"]
    # A new target: the plot says pending at once, then shows the new grid with the markers moved.
    viewer.set_target(np.array([0.5, 0.25, 0.1]))
    assert viewer.landscape.pending
    wait_until(
        lambda: (
            not viewer.landscape_panel.rendered.pending
            and viewer.landscape_panel.rendered.markers["radial"] != before
            and viewer.drawn_question == viewer.board.current
        ),
        60,
        "the landscape of the next target",
    )
    assert viewer.landscape_panel.rendered.markers["radial"][0] == pytest.approx(
        math.degrees(math.atan2(0.25, 0.5)), abs=1e-4
    )
    assert viewer.supervisor.failures() == 0


@pytest.mark.slow
def test_the_current_posture_can_be_hidden(start_viewer) -> None:
    viewer = start_viewer(train=False)
    viewer.current_posture.value = False  # as a browser unticking it
    assert not viewer.robot.visible
    viewer.current_posture.value = True
    assert viewer.robot.visible
