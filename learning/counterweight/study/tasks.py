"""What the study's workers run: a cell's diagnostics, and one training run of a method in a cell. Both are grid
tasks on the experiments' executor (``learning.common``), built once per worker process.

A training job names its cell, its run length and its probe in three settings of its own, beside the method's:
``cell``, ``evaluations`` (layer evaluations, selection included) and ``probe`` (``"tuning"`` or ``"test"``: the goal
set solved, uncharged, at every checkpoint). Its result is the run (``Trained.to_dict()``) without its weights: the
study reads curves and per-goal probe success, and a run's weights are retrained from its job (method, settings,
seed) deterministically; the results stay small enough to keep the job store with the report.
"""

from __future__ import annotations

import dataclasses

import torch

from learning.common.jobs import GridTask, Job
from learning.common.run_folder import config_fingerprint
from learning.counterweight.study.design import StudyCfg

JOB_SETTINGS = ("cell", "evaluations", "probe")


class _Problems:
    """A worker's problems, one per tolerance and gradient mode, built on first use."""

    def __init__(self, cfg: StudyCfg) -> None:
        self.cfg, self._built = cfg, {}

    def get(self, tolerance: float, gradient: str = "unrolled"):
        import assets
        from learning.counterweight.problem import CounterweightProblem

        key = (tolerance, gradient)
        if key not in self._built:
            problem_cfg = dataclasses.replace(self.cfg.problem, tolerance=tolerance, gradient=gradient)
            self._built[key] = CounterweightProblem(assets.ROBOTS[problem_cfg.robot], problem_cfg)
        return self._built[key]


def _build_diagnostics(cfg: StudyCfg) -> dict:
    return {"cfg": cfg, "problems": _Problems(cfg)}


def _run_diagnostics(worker: dict, job: Job) -> dict:
    from learning.counterweight.study.diagnostics import cell_diagnostics

    cfg = worker["cfg"]
    cell = cfg.cell(dict(job.settings)["cell"])
    torch.manual_seed(job.seed)
    return cell_diagnostics(worker["problems"].get(cell.tolerance), cfg, cell)


def diagnostics_task(cfg: StudyCfg) -> GridTask:
    return GridTask(
        "counterweight-study-diagnostics",
        _build_diagnostics,
        _run_diagnostics,
        cfg,
        config_fingerprint(cfg.to_dict()),
    )


def _build_training(context: tuple[StudyCfg, dict]) -> dict:
    cfg, goals = context
    return {"cfg": cfg, "goals": goals, "problems": _Problems(cfg)}


def _run_training(worker: dict, job: Job) -> dict:
    from learning.counterweight.methods import checkpoints_for, train_method

    cfg: StudyCfg = worker["cfg"]
    settings = dict(job.settings)
    cell = cfg.cell(settings.pop("cell"))
    evaluations, probe = settings.pop("evaluations"), settings.pop("probe")
    gradient = "implicit" if job.method == "gradient_implicit" else "unrolled"
    problem = worker["problems"].get(cell.tolerance, gradient)
    experiment = cfg.experiment(cell)
    goals = worker["goals"][cell.name]
    checkpoints = checkpoints_for(problem, experiment, goals["selection"], goals[probe], cfg.probe_dense)
    trained = train_method(
        job.method, settings, problem, experiment, goals["train"], checkpoints, job.seed, max_evaluations=evaluations
    )
    result = trained.to_dict()
    result["state"], result["last_state"] = {}, {}
    return result


def training_task(cfg: StudyCfg, goals: dict[str, dict[str, torch.Tensor]]) -> GridTask:
    """Training runs on the kept cells' ``goals`` (``{cell: {set: (n, 3)}}``)."""
    return GridTask(
        "counterweight-study",
        _build_training,
        _run_training,
        (cfg, goals),
        config_fingerprint({"study": cfg.to_dict(), "cells": sorted(goals)}),
    )
