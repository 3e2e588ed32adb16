"""The final solve continues a chooser's own solve of its answer (``evaluation.final_joints``): the angular grid's and
the IK-trained predictor's joints are the 64 steps from ``q0`` that every method is checked with (bit for bit on the
compiled solve; on torch's ops, whose rows vary with the batch they share, to rounding), while only the steps left
are solved; a solve that is not that one's beginning (other settings, another kinematics, more steps) is not
continued."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kinematics import DifferentiableIKLayer
from kinematics.native import loader
from learning.common.panda import franka_kinematics
from learning.grasp_yaw.baselines import CheckedSolve, ik_layer
from learning.grasp_yaw.config import preset
from learning.grasp_yaw.evaluation import (
    CheckingChooser,
    eval_layer,
    final_joints,
    policy_chooser,
    search_choosers,
    solve_choice,
)
from learning.grasp_yaw.predictors import YawPolicy, build_predictor
from learning.grasp_yaw.splits import make_splits
from learning.grasp_yaw.task import grasp_pose


@pytest.fixture(scope="module")
def setup():
    cfg = preset("smoke")
    kinematics = franka_kinematics()
    goals = make_splits(cfg, kinematics)["test_iid"].to(kinematics.device, kinematics.dtype).subset(slice(0, 16))
    return cfg, kinematics, goals


class CountingLayer(DifferentiableIKLayer):
    """The evaluation's layer, recording the steps of each solve it is asked for."""

    def __init__(self, layer: DifferentiableIKLayer) -> None:
        super().__init__(layer.kinematics, layer.cfg)
        self.asked: list[int] = []

    def solve(self, target, seed=None, *, iterations=None):
        self.asked.append(self.cfg.iterations if iterations is None else iterations)
        return super().solve(target, seed, iterations=iterations)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "torch_ops"])
@pytest.mark.parametrize("method", ["angular_grid", "ik_trained"])
def test_a_checking_choosers_final_joints_are_the_full_solves_and_only_the_steps_left_are_solved(
    setup, method, compiled
):
    if not compiled:
        with loader.disabled():
            _check_the_continued_final_solve(setup, method, exact=False)
        return
    if loader.library() is None:
        pytest.skip("no compiled kernels on this machine")
    _check_the_continued_final_solve(setup, method, exact=True)


def _check_the_continued_final_solve(setup, method: str, exact: bool) -> None:
    cfg, kinematics, goals = setup
    torch.manual_seed(0)
    if method == "ik_trained":
        policy = YawPolicy(build_predictor("ik_trained", kinematics, cfg), kinematics, cfg)
        assert cfg.train.hypotheses > 1
        chooser = policy_chooser(policy)
        check = cfg.train.ik_iterations
    else:
        chooser = search_choosers(cfg, kinematics)[method]
        check = cfg.baselines.grid_ik_iterations
    assert isinstance(chooser, CheckingChooser) and 0 < check < cfg.eval_ik_iterations
    eval_ik = CountingLayer(eval_layer(cfg, kinematics))
    yaw, q = solve_choice(chooser, goals, eval_ik)
    assert eval_ik.asked == [cfg.eval_ik_iterations - check]
    with torch.no_grad():
        from_q0 = eval_layer(cfg, kinematics)(grasp_pose(goals.p, yaw), goals.q0)
    if exact:
        assert torch.equal(q, from_q0)
    else:  # torch's ops: a row's rounding depends on the batch it shares (the check's holds every candidate)
        torch.testing.assert_close(q, from_q0, rtol=0, atol=1e-5)
    assert not torch.equal(q, goals.q0)
    # called as any chooser, it answers the same yaws
    assert torch.equal(chooser(goals.p, goals.q0), yaw)


def test_a_one_yaw_predictor_hands_nothing_on_and_its_final_solve_starts_at_q0(setup):
    cfg, kinematics, goals = setup
    policy = YawPolicy(build_predictor("ik_trained_one_yaw", kinematics, cfg), kinematics, cfg)
    eval_ik = CountingLayer(eval_layer(cfg, kinematics))
    yaw, q = solve_choice(policy_chooser(policy), goals, eval_ik)
    assert eval_ik.asked == [cfg.eval_ik_iterations]
    with torch.no_grad():
        assert torch.equal(q, eval_ik(grasp_pose(goals.p, yaw), goals.q0))


def checked_solve(ik: DifferentiableIKLayer, target: torch.Tensor, q0: torch.Tensor) -> CheckedSolve:
    with torch.no_grad():
        return CheckedSolve(ik(target, q0), ik)


def test_a_solve_that_is_not_the_final_solves_beginning_is_not_continued(setup):
    cfg, kinematics, goals = setup
    eval_ik = eval_layer(cfg, kinematics)
    target = grasp_pose(goals.p, torch.tensor([[0.0, 1.0]]).expand(len(goals), 2))
    with torch.no_grad():
        from_q0 = eval_ik(target, goals.q0)
        other_settings = DifferentiableIKLayer(kinematics, dataclasses.replace(eval_ik.cfg, iterations=24, damping=0.2))
        other_kinematics = ik_layer(franka_kinematics(), 24)
        longer = ik_layer(kinematics, cfg.eval_ik_iterations + 8)
        for ik in (other_settings, other_kinematics, longer):
            counting = CountingLayer(eval_ik)
            q = final_joints(counting, target, goals.q0, checked_solve(ik, target, goals.q0))
            assert counting.asked == [cfg.eval_ik_iterations] and torch.equal(q, from_q0)
        # a check of exactly the final solve's steps is the final solve: nothing more is solved
        same = checked_solve(ik_layer(kinematics, cfg.eval_ik_iterations), target, goals.q0)
        counting = CountingLayer(eval_ik)
        assert final_joints(counting, target, goals.q0, same) is same.q and counting.asked == []
        assert torch.equal(same.q, from_q0)
