"""The executors of a grid's jobs: ``local`` (this process, or a pool of processes on this machine: the default,
nothing to install) and ``ray`` (Ray core tasks, ``learning.common.ray_executor``: an embedded local Ray, or a
cluster joined by its address).

``Executor.map(task, jobs, store, phase)`` returns the results in submission order. With a store, jobs whose result
is already saved are not run again (``--resume``), and each new result is written as it arrives. A job that raises
does not stop the others: when the rest are done, ``GridError`` names every failed job with its traceback (each
also written beside the results, ``<job name>.failed.txt``).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

import torch

from kinematics.errors import ConfigError
from learning.common.io import atomic_write_text
from learning.common.jobs import GridError, GridTask, Job, JobFailure, WorkerLostError, guarded
from learning.common.progress import GridProgress
from learning.common.run_folder import ResultStore

EXECUTORS = ("local", "ray")

_PROBLEMS: dict[tuple[str, str], object] = {}  # a worker process's problems, built once: (task name, config) -> problem


def worker_problem(task: GridTask) -> object:
    """The problem of ``task`` in this process, built on first use."""
    key = (task.name, task.config)
    if key not in _PROBLEMS:
        if len(_PROBLEMS) >= 2:  # a worker serves one grid at a time; keep the newest problems only
            _PROBLEMS.pop(next(iter(_PROBLEMS)))
        _PROBLEMS[key] = task.build(task.context)
    return _PROBLEMS[key]


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


# --- local: this process, or a spawn pool whose workers exit when the driver dies ---------------------------------

_POOL_TASK: list[GridTask] = []


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)  # the driver died (killed): no orphan keeps computing


def _pool_init(task: GridTask, parent: int) -> None:
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True, name="exit-with-parent").start()
    torch.set_num_threads(task.threads)
    _POOL_TASK[:] = [task]
    worker_problem(task)


def _pool_run(job: Job) -> dict | JobFailure:
    task = _POOL_TASK[0]
    return guarded(task, worker_problem(task), job)


class LocalExecutor(Executor):
    """``workers=1``: the jobs run one after the other in this process (its torch threads unchanged); more: a pool
    of spawned processes, ``task.threads`` torch threads each, each building the problem once. A worker that dies
    breaks the pool: ``WorkerLostError`` (the local executor does not retry; the finished results are saved)."""

    name = "local"

    def __init__(self, workers: int = 1, log: Callable[[str], None] | None = None, progress: bool = True) -> None:
        super().__init__(workers, log, progress)
        self.pool: ProcessPoolExecutor | None = None
        self.pool_task: tuple[str, str] | None = None

    def _pool(self, task: GridTask) -> ProcessPoolExecutor:
        if self.pool is not None and self.pool_task != (task.name, task.config):
            self.pool.shutdown(cancel_futures=True)
            self.pool = None
        if self.pool is None:
            self.pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_pool_init,
                initargs=(task, os.getpid()),
            )
            self.pool_task = (task.name, task.config)
        return self.pool

    def _stream(self, task: GridTask, jobs: list[Job]) -> Iterator[tuple[int, dict | JobFailure]]:
        if self.workers == 1:
            for index, job in enumerate(jobs):
                yield index, guarded(task, worker_problem(task), job)
            return
        pool = self._pool(task)
        futures = {pool.submit(_pool_run, job): index for index, job in enumerate(jobs)}
        try:
            waiting = set(futures)
            while waiting:
                done, waiting = wait(waiting, return_when=FIRST_COMPLETED)
                for future in done:
                    try:
                        outcome = future.result()
                    except BrokenProcessPool as exc:
                        raise WorkerLostError(
                            "a worker process died in the middle of a job (killed, or out of memory); the finished "
                            "jobs' results are saved: rerun with --resume (the ray executor retries such jobs)"
                        ) from exc
                    yield futures[future], outcome
        except BaseException:
            for future in futures:
                future.cancel()
            self.close()
            raise

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
            self.pool = None


def make_executor(
    name: str = "local",
    workers: int = 1,
    address: str | None = None,
    retries: int = 3,
    gpus_per_job: float = 1.0,
    log: Callable[[str], None] | None = None,
    progress: bool = True,
) -> Executor:
    """The executor called ``name``: ``local`` (``address`` and ``retries`` do not apply) or ``ray``."""
    if name == "local":
        if address is not None:
            raise ConfigError("--address joins a Ray cluster: it needs --executor ray")
        return LocalExecutor(workers, log, progress)
    if name == "ray":
        from learning.common.ray_executor import RayExecutor

        return RayExecutor(workers, address, retries, gpus_per_job, log, progress)
    raise ConfigError(f"unknown executor {name!r}; choose one of {EXECUTORS}")


def executor_from_arguments(args, workers: int, log: Callable[[str], None] | None = None) -> Executor:
    """The executor a ``train`` command line asks for (``--executor``, ``--address``, ``--retries``,
    ``--gpus-per-job``) on ``workers``."""
    return make_executor(args.executor, workers, args.address, args.retries, args.gpus_per_job, log)
