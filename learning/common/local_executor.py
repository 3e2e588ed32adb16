"""The ``local`` executor: the jobs in this process one after the other, or in a pool of spawned processes on
this machine (the default executor; nothing to install). Pool workers exit when the driver dies."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

import torch

from learning.common.executor import Executor, run_in_worker
from learning.common.jobs import GridTask, Job, JobFailure, WorkerLostError

_POOL_TASK: list[GridTask] = []


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)  # the driver died (killed): no orphan keeps computing


def _pool_init(task: GridTask, parent: int) -> None:
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True, name="exit-with-parent").start()
    torch.set_num_threads(task.threads)
    _POOL_TASK[:] = [task]


def _pool_run(job: Job) -> dict | JobFailure:
    return run_in_worker(_POOL_TASK[0], job)


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
                yield index, run_in_worker(task, job)
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
