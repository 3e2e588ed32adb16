"""Evaluating every method the same way: its yaw checked with 64-step IK from ``q0``, plus complete latency.

A *chooser* maps ``(p (N, 3), q0 (N, dof)) -> yaw (N, 2)``. Latency is measured from inputs to final joints:
the chooser and the checking IK solve, at batch 1 (median over goals) and at a larger batch (per goal, the median of
rounds that time every method once in turn). A chooser that solved its answer's grasp to choose it (the angular
grid, the IK-trained predictor's hypotheses: a ``CheckingChooser``) hands that solve on, and the final solve continues
it, without solving its first steps twice: the same joints as the 64 steps from ``q0``, bit for bit on the compiled
solve (on torch's ops, whose rows vary with the batch they share, to rounding).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable

import torch

from kinematics import DifferentiableIKLayer, KinematicsLayer
from learning.grasp_yaw.baselines import (
    CheckedSolve,
    angular_grid,
    heading_yaw,
    ik_layer,
    online_optimization,
    radial_yaw,
    teacher,
)
from learning.grasp_yaw.config import ExperimentCfg
from learning.grasp_yaw.predictors import YawPolicy
from learning.grasp_yaw.splits import GoalSet
from learning.grasp_yaw.task import current_heading, failure_penalty, grasp_pose

_SINGLES_BUDGET_S = 3.0  # slow searches stop timing single goals after this long (at least 3 are timed)

Chooser = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class CheckingChooser:
    """A chooser that solves IK to choose: called, it answers yaws ``(N, 2)`` as every chooser does; ``choose``
    also hands on the answer's solve (``CheckedSolve``, or ``None`` where it solved none), for ``solve_choice``."""

    def __init__(self, choose: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, CheckedSolve | None]]):
        self.choose = choose

    def __call__(self, p: torch.Tensor, q0: torch.Tensor) -> torch.Tensor:
        return self.choose(p, q0)[0]


METHODS = (
    "radial",
    "heading",
    "shared_constant",
    "ik_trained",
    "ik_trained_one_yaw",
    "zero_order",
    "zero_order_wall_time",
    "teacher_supervised",
    "online_optimization",
    "angular_grid",
    "teacher",
)


def search_choosers(cfg: ExperimentCfg, kinematics: KinematicsLayer) -> dict[str, Chooser]:
    """The methods that need no training, as choosers."""
    b, w = cfg.baselines, cfg.weights
    penalty = failure_penalty(kinematics)
    grid_ik = ik_layer(kinematics, b.grid_ik_iterations)
    online_ik = ik_layer(kinematics, b.online_ik_iterations)
    teacher_ik = ik_layer(kinematics, b.teacher_ik_iterations)

    def grid(p: torch.Tensor, q0: torch.Tensor) -> tuple[torch.Tensor, CheckedSolve | None]:
        result = angular_grid(grid_ik, p, q0, b.grid_yaws, w, penalty, b.grid_anchor)
        return result.yaw, result.checked

    return {
        "radial": lambda p, q0: radial_yaw(p),
        "heading": lambda p, q0: heading_yaw(kinematics, q0),
        "online_optimization": lambda p, q0: (
            online_optimization(
                online_ik,
                p,
                q0,
                b.online_steps,
                b.online_learning_rate,
                w,
                penalty,
                start=current_heading(kinematics, q0) if b.online_start == "heading" else None,
                incumbents=b.online_incumbents,
            ).yaw
        ),
        "angular_grid": CheckingChooser(grid),
        "teacher": lambda p, q0: teacher(teacher_ik, p, q0, b.teacher_yaws, b.teacher_refine_yaws, w, penalty).yaw,
    }


def policy_chooser(policy: YawPolicy) -> CheckingChooser:
    def choose(p: torch.Tensor, q0: torch.Tensor) -> tuple[torch.Tensor, CheckedSolve | None]:
        with torch.no_grad():
            return policy.choose(p, q0)

    return CheckingChooser(choose)


def final_joints(
    eval_ik: DifferentiableIKLayer, target: torch.Tensor, q0: torch.Tensor, checked: CheckedSolve | None = None
) -> torch.Tensor:
    """The final (checking) solve's joints ``(N, dof)`` for ``target`` ``(N, 4, 4)``: ``eval_ik`` from ``q0``, or,
    where ``checked`` is that solve's beginning (its ``iterations`` steps toward ``target`` by a layer on the same
    kinematics whose settings are ``eval_ik``'s but for the iterations, at most ``eval_ik``'s), those joints continued
    for the steps left: the same joints, bit for bit, on the compiled solve (on torch's ops, to rounding)."""
    cfg = eval_ik.cfg
    if (
        checked is None
        or checked.ik.kinematics is not eval_ik.kinematics
        or checked.iterations > cfg.iterations
        or dataclasses.replace(checked.ik.cfg, iterations=cfg.iterations) != cfg
    ):
        return eval_ik(target, q0)
    if checked.iterations == cfg.iterations:
        return checked.q
    return eval_ik(target, checked.q, iterations=cfg.iterations - checked.iterations)


def solve_choice(chooser: Chooser, goals: GoalSet, eval_ik) -> tuple[torch.Tensor, torch.Tensor]:
    """Complete inference: the chosen yaw ``(N, 2)`` and final joints ``(N, dof)`` from the checking solve (continued
    from the chooser's own solve of the answer where it hands one on: ``final_joints``)."""
    if isinstance(chooser, CheckingChooser):
        yaw, checked = chooser.choose(goals.p, goals.q0)
    else:
        yaw, checked = chooser(goals.p, goals.q0), None
    with torch.no_grad():
        return yaw, final_joints(eval_ik, grasp_pose(goals.p, yaw), goals.q0, checked)


def round_robin_medians(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Seconds per call of each of ``fns``: the median of ``rounds`` rounds, each timing every callable once in turn
    (so a noisy machine slows them alike), after one warm-up call each."""
    for fn in fns.values():
        fn()
    seconds: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in seconds.items()}


def measure_latency(
    choosers: dict[str, Chooser], goals: GoalSet, eval_ik, batch: int, singles: int = 16, rounds: int = 7
) -> dict[str, dict[str, float]]:
    """Complete inference latency of each chooser: the median ms at batch 1 over ``singles`` goals (a chooser at a
    time), and ms per goal at ``batch``: the median of ``rounds`` rounds that each solve the batch once with every
    chooser in turn (``round_robin_medians``)."""
    one: dict[str, float] = {}
    for name, chooser in choosers.items():
        solve_choice(chooser, goals.subset(slice(0, 1)), eval_ik)  # warm-up
        times: list[float] = []
        for i in range(min(singles, len(goals))):
            start = time.perf_counter()
            solve_choice(chooser, goals.subset(slice(i, i + 1)), eval_ik)
            times.append(time.perf_counter() - start)
            if len(times) >= 3 and sum(times) > _SINGLES_BUDGET_S:
                break
        one[name] = statistics.median(times)
    many = goals.subset(slice(0, batch))
    fns = {name: (lambda chooser=chooser: solve_choice(chooser, many, eval_ik)) for name, chooser in choosers.items()}
    seconds = round_robin_medians(fns, rounds)
    return {
        name: {
            "batch1_ms": 1e3 * one[name],
            "batch": len(many),
            "rounds": rounds,
            "batch_ms_per_goal": 1e3 * seconds[name] / len(many),
            "goals_per_second": len(many) / seconds[name],
        }
        for name in choosers
    }


def eval_layer(cfg: ExperimentCfg, kinematics: KinematicsLayer):
    return ik_layer(kinematics, cfg.eval_ik_iterations)
