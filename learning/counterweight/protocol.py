"""The training protocol, fixed before any zero-order run: the same tuning budget for every tuned method, then
every seed of each method's chosen configuration, the zero-order methods at the gradient trainer's
layer-evaluation budget and at its wall time.

1. Tuning: each tuned method (``TUNED_METHODS``) trains each of its ``tuning_grid`` configurations once, from
   ``cfg.tuning.seed``, at the layer-evaluation budget; the configuration with the best validation success (ties:
   the first) is chosen.
2. Seeds: the chosen configuration of every method, and the ``gradient_axes`` ablation (with ``gradient``'s
   choice), for each of ``cfg.seeds``; the zero-order methods at the layer-evaluation budget.
3. Equal time: each zero-order method for each seed again, for as many seconds as the gradient trainer of that
   seed took.

Jobs run on ``cfg.workers`` processes side by side, one torch thread each (``workers=1``: in this process), so
every method's seconds are measured under the same load.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import torch

from learning.counterweight.config import ExperimentCfg
from learning.counterweight.methods import TUNED_METHODS, ZERO_ORDER_METHODS, train_method, tuning_grid
from learning.counterweight.training import Trained


@dataclass(frozen=True)
class Job:
    """One training run: ``method`` with ``settings`` from ``seed``; ``max_seconds`` for an equal-time run."""

    method: str
    settings: tuple[tuple[str, float], ...]
    seed: int
    max_seconds: float | None = None

    @property
    def budget(self) -> str:
        return "seconds" if self.max_seconds is not None else "evaluations"


_WORKER: dict = {}


def _init_worker(cfg: ExperimentCfg, train: torch.Tensor, validation: torch.Tensor) -> None:
    import assets
    from learning.counterweight.problem import CounterweightProblem

    torch.set_num_threads(1)
    _WORKER.update(
        problem=CounterweightProblem(assets.ROBOTS[cfg.problem.robot], cfg.problem),
        cfg=cfg,
        train=train,
        validation=validation,
    )


def _run(job: Job) -> Trained:
    w = _WORKER
    return train_method(
        job.method, dict(job.settings), w["problem"], w["cfg"], w["train"], w["validation"], job.seed, job.max_seconds
    )


class JobRunner:
    """Runs jobs in ``cfg.workers`` processes (or here for one), in submission order of results."""

    def __init__(self, cfg: ExperimentCfg, train: torch.Tensor, validation: torch.Tensor) -> None:
        self.pool = None
        if cfg.workers > 1:
            self.pool = ProcessPoolExecutor(
                cfg.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(cfg, train, validation),
            )
        else:
            _init_worker(cfg, train, validation)
            torch.set_num_threads(torch.get_num_threads())

    def run(self, jobs: list[Job]) -> list[Trained]:
        if self.pool is None:
            return [_run(job) for job in jobs]
        return list(self.pool.map(_run, jobs))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def _settings(settings: dict) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(settings.items()))


def run_protocol(
    cfg: ExperimentCfg, train: torch.Tensor, validation: torch.Tensor, log: Callable[[str], None] = lambda _: None
) -> dict:
    """``{"tuning": {method: [{settings, best_validation_success, evaluations, seconds}]}, "chosen": {method:
    settings}, "runs": [(Job, Trained)]}``: every trained policy of the report."""
    runner = JobRunner(cfg, train, validation)
    try:
        tuning_jobs = [
            Job(method, _settings(settings), cfg.tuning.seed)
            for method in TUNED_METHODS
            for settings in tuning_grid(method, cfg)
        ]
        log(f"tuning: {len(tuning_jobs)} runs ({', '.join(TUNED_METHODS)}; seed {cfg.tuning.seed})")
        tuned = runner.run(tuning_jobs)
        tuning: dict[str, list[dict]] = {method: [] for method in TUNED_METHODS}
        for job, trained in zip(tuning_jobs, tuned, strict=True):
            tuning[job.method].append(
                {
                    "settings": dict(job.settings),
                    "best_validation_success": trained.best_validation_success,
                    "evaluations": trained.evaluations,
                    "seconds": trained.seconds,
                }
            )
        chosen = {
            method: max(rows, key=lambda row: row["best_validation_success"])["settings"]
            for method, rows in tuning.items()
        }
        chosen["gradient_axes"] = chosen["gradient"]
        for method, settings in chosen.items():
            log(f"chosen for {method}: {settings}")
        seed_jobs = [
            Job(method, _settings(chosen[method]), seed)
            for seed in cfg.seeds
            for method in ("gradient", "gradient_axes", *ZERO_ORDER_METHODS)
        ]
        log(f"seeds: {len(seed_jobs)} runs")
        runs = list(zip(seed_jobs, runner.run(seed_jobs), strict=True))
        gradient_seconds = {job.seed: trained.seconds for job, trained in runs if job.method == "gradient"}
        time_jobs = [
            Job(method, _settings(chosen[method]), seed, gradient_seconds[seed])
            for seed in cfg.seeds
            for method in ZERO_ORDER_METHODS
        ]
        log(f"equal wall time: {len(time_jobs)} runs")
        runs += list(zip(time_jobs, runner.run(time_jobs), strict=True))
    finally:
        runner.close()
    return {"tuning": tuning, "chosen": chosen, "runs": runs}
