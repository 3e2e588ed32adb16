"""The training protocol, fixed before any zero-order run: the same tuning budget for every tuned method, then
every seed of each method's chosen configuration, the zero-order methods at the gradient trainer's
layer-evaluation budget and at its wall time. Every run's budget includes its checkpoints' validation solves
(``learning.counterweight.selection``), and every run solves the tuning split at its checkpoints (not charged).

1. Tuning: each tuned method (``TUNED_METHODS``) trains each of its ``tuning_grid`` configurations once, from
   ``cfg.tuning.seed``, at the layer-evaluation budget; the configuration whose selected checkpoint does best on
   the tuning split (ties: the first) is chosen.
2. Seeds: the chosen configuration of every method, and the ``gradient_axes`` ablation (with ``gradient``'s
   choice), for each of ``cfg.seeds``; the zero-order methods at the layer-evaluation budget.
3. Equal time: each zero-order method for each seed again, for as many seconds as the gradient trainer of that
   seed took.

Each phase is a grid of jobs on one executor (``learning.common.executors``): the local pool of ``workers``
processes (one torch thread each, so every method's seconds are measured under the same load) or Ray. With a run
folder, each job's result is saved as it arrives, and a resumed run derives the chosen settings and the gradient
trainer's seconds from the saved results, so it runs exactly the jobs the interrupted one had left.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from learning.common.executor import Executor
from learning.common.jobs import GridTask, Job, settings_of
from learning.common.run_folder import RunFolder, config_fingerprint
from learning.counterweight.config import ExperimentCfg
from learning.counterweight.methods import TUNED_METHODS, ZERO_ORDER_METHODS, checkpoints_for, train_method, tuning_grid
from learning.counterweight.selection import Trained


def _build(context: tuple[ExperimentCfg, dict[str, torch.Tensor]]) -> dict:
    import assets
    from learning.counterweight.problem import CounterweightProblem

    cfg, goals = context
    problem = CounterweightProblem(assets.ROBOTS[cfg.problem.robot], cfg.problem)
    return {"problem": problem, "cfg": cfg, **goals}


def _run(worker: dict, job: Job) -> dict:
    problem, cfg = worker["problem"], worker["cfg"]
    checkpoints = checkpoints_for(problem, cfg, worker["validation"], worker["tuning"])
    trained = train_method(
        job.method,
        dict(job.settings),
        problem,
        cfg,
        worker["train"],
        checkpoints,
        job.seed,
        max_seconds=job.max_seconds,
    )
    return trained.to_dict()


def counterweight_task(cfg: ExperimentCfg, goals: dict[str, torch.Tensor]) -> GridTask:
    """The grid task every protocol job trains on: the problem of ``cfg`` and its ``goals``: ``train``,
    ``validation`` (a run's checkpoints) and ``tuning``."""
    return GridTask("counterweight", _build, _run, (cfg, goals), config_fingerprint(cfg.to_dict()))


def tuning_score(trained: Trained) -> float:
    """The tuning split's success at the run's selected checkpoint."""
    return trained.curve.probe_success[trained.selected]


def run_protocol(
    cfg: ExperimentCfg,
    goals: dict[str, torch.Tensor],
    executor: Executor,
    folder: RunFolder | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> dict:
    """``{"tuning": {method: [{settings, tuning_success, last_tuning_success, best_validation_success,
    evaluations, seconds}]}, "chosen": {method: settings}, "runs": [(Job, Trained)]}``: every trained policy of the
    report, on ``goals`` (``train``, ``validation``, ``tuning``)."""
    task = counterweight_task(cfg, goals)

    def run(phase: str, jobs: list[Job]) -> list[Trained]:
        store = folder.results(phase) if folder is not None else None
        return [Trained.from_dict(result) for result in executor.map(task, jobs, store, phase)]

    tuning_jobs = [
        Job(method, settings_of(settings), cfg.tuning.seed, config=task.config)
        for method in TUNED_METHODS
        for settings in tuning_grid(method, cfg)
    ]
    log(f"tuning: {len(tuning_jobs)} runs ({', '.join(TUNED_METHODS)}; seed {cfg.tuning.seed})")
    tuning: dict[str, list[dict]] = {method: [] for method in TUNED_METHODS}
    for job, trained in zip(tuning_jobs, run("tuning", tuning_jobs), strict=True):
        tuning[job.method].append(
            {
                "settings": dict(job.settings),
                "tuning_success": tuning_score(trained),
                "last_tuning_success": trained.curve.probe_success[-1],
                "best_validation_success": trained.best_validation_success,
                "evaluations": trained.evaluations,
                "seconds": trained.seconds,
            }
        )
    chosen = {
        method: max(rows, key=lambda row: (row["tuning_success"], row["last_tuning_success"]))["settings"]
        for method, rows in tuning.items()
    }
    chosen["gradient_axes"] = chosen["gradient"]
    for method, settings in chosen.items():
        log(f"chosen for {method}: {settings}")
    seed_jobs = [
        Job(method, settings_of(chosen[method]), seed, config=task.config)
        for seed in cfg.seeds
        for method in ("gradient", "gradient_axes", *ZERO_ORDER_METHODS)
    ]
    log(f"seeds: {len(seed_jobs)} runs")
    runs = list(zip(seed_jobs, run("seeds", seed_jobs), strict=True))
    gradient_seconds = {job.seed: trained.seconds for job, trained in runs if job.method == "gradient"}
    time_jobs = [
        Job(method, settings_of(chosen[method]), seed, gradient_seconds[seed], config=task.config)
        for seed in cfg.seeds
        for method in ZERO_ORDER_METHODS
    ]
    log(f"equal wall time: {len(time_jobs)} runs")
    runs += list(zip(time_jobs, run("equal_time", time_jobs), strict=True))
    return {"tuning": tuning, "chosen": chosen, "runs": runs}
