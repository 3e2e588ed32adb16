"""What every executor of a grid's jobs does (``local_executor``, ``ray_executor``; ``executors`` picks one).

``Executor.map(task, jobs, store, phase)`` returns the results in submission order. With a store, jobs whose result
is already saved are not run again (``--resume``), and each new result is written as it arrives. A job that raises
does not stop the others: when the rest are done, ``GridError`` names every failed job with its traceback (each
also written beside the results, ``<job name>.failed.txt``).
"""

from __future__ import annotations

import os
import platform
import traceback
from collections.abc import Callable, Iterator

from kinematics.errors import ConfigError
from learning.common.io import atomic_write_text
from learning.common.jobs import GridError, GridTask, Job, JobFailure
from learning.common.progress import GridProgress
from learning.common.provenance import source_fingerprint
from learning.common.run_folder import ResultStore

_PROBLEMS: dict[tuple[str, str], object] = {}  # a worker process's problems, built once: (task name, config) -> problem


def worker_problem(task: GridTask) -> object:
    """The problem of ``task`` in this process, built on first use; refused where this process runs other code
    than the driver that made ``task`` (a cluster node at another commit)."""
    key = (task.name, task.config)
    if key not in _PROBLEMS:
        if task.code != source_fingerprint():
            raise ConfigError(
                f"this worker ({platform.node()}) runs other project code than the driver (source fingerprint "
                f"{source_fingerprint()}, the driver's {task.code}): install the same commit on every node"
            )
        if len(_PROBLEMS) >= 2:  # a worker serves one grid at a time; keep the newest problems only
            _PROBLEMS.pop(next(iter(_PROBLEMS)))
        _PROBLEMS[key] = task.build(task.context)
    return _PROBLEMS[key]


def run_in_worker(task: GridTask, job: Job) -> dict | JobFailure:
    """``task.run`` on this process's problem, or the failure it raised (building the problem included), with
    its traceback as the worker printed it."""
    try:
        return task.run(worker_problem(task), job)
    except Exception:
        return JobFailure(job, traceback.format_exc())


def worker_environment(task: GridTask) -> dict[str, str]:
    """What a worker process needs before it imports torch: OpenMP's passive wait and the task's thread count."""
    threads = str(task.threads)
    return {
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
    }


class Executor:
    """Runs a grid's jobs; ``_stream`` yields ``(index, result or JobFailure)`` as jobs finish."""

    name = "executor"

    def __init__(self, workers: int, log: Callable[[str], None] | None = None, progress: bool = True) -> None:
        if workers < 1:
            raise ConfigError(f"workers must be at least 1, got {workers}")
        self.workers, self.log, self.show_progress = workers, log, progress

    def _stream(self, task: GridTask, jobs: list[Job]) -> Iterator[tuple[int, dict | JobFailure]]:
        raise NotImplementedError

    def map(self, task: GridTask, jobs: list[Job], store: ResultStore | None = None, phase: str = "jobs") -> list:
        results: list[dict | None] = [store.load(job) if store is not None else None for job in jobs]
        pending = [i for i, result in enumerate(results) if result is None]
        progress = GridProgress(phase, len(jobs), len(jobs) - len(pending), self.log, self.show_progress)
        failures: list[JobFailure] = []
        try:
            for index, outcome in self._stream(task, [jobs[i] for i in pending]):
                job = jobs[pending[index]]
                if isinstance(outcome, JobFailure):
                    failures.append(outcome)
                    if store is not None:
                        atomic_write_text(store.folder / f"{job.name}.failed.txt", outcome.traceback)
                    progress.update(f"{job.describe()} FAILED")
                    continue
                if store is not None:
                    store.save(job, outcome)
                    (store.folder / f"{job.name}.failed.txt").unlink(missing_ok=True)
                results[pending[index]] = outcome
                progress.update(job.describe())
        finally:
            progress.close()
        if failures:
            saved = ""
            if store is not None:
                saved = f"; the others' results are saved in {store.folder}, and --resume runs only what is missing"
            lines = [f"{len(failures)} of {len(jobs)} jobs of {phase} failed{saved}:"]
            lines += [f"- {failure.job.describe()}:\n{failure.traceback.rstrip()}" for failure in failures]
            raise GridError("\n".join(lines), failures)
        return results

    def close(self) -> None:
        pass

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
