"""The ``ray`` executor: each job is a Ray core task (``@ray.remote``, retried by Ray when its worker dies).

With no address (and none in ``RAY_ADDRESS``), it starts an embedded local Ray of ``workers`` CPUs and shuts it
down when closed; a watchdog (``reaper``) kills what it started if this process dies without closing it. With an
address, it joins that cluster (``ray start --head`` on one machine, ``ray start --address`` on the others) and
leaves it running. If Ray is already initialised in this process, it uses that. The task (its problem's context:
goals, labels) is put in the object store once per grid and fetched once per worker process, which builds the
problem once and keeps it; OpenMP's passive wait and the thread count reach every worker through the task's
runtime environment, and a job on a CUDA device asks Ray for ``gpus_per_job`` GPUs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

from kinematics.errors import ConfigError
from learning.common.executor import Executor, run_in_worker, worker_environment
from learning.common.jobs import GridTask, Job, JobFailure
from learning.common.reaper import Reaper

try:
    import ray
except ImportError as exc:  # an optional extra
    raise ConfigError("the ray executor needs Ray: pip install -e '.[ray]'") from exc

_TASKS: dict[str, GridTask] = {}  # a worker's tasks, fetched once: object id -> task


@ray.remote
def _run_job(task_ref: list, job: Job) -> dict | JobFailure:
    """One job on a Ray worker. ``task_ref`` is ``[ObjectRef]`` (a list, so Ray does not fetch it for every job)."""
    key = task_ref[0].hex()
    if key not in _TASKS:
        import torch

        _TASKS.clear()
        _TASKS[key] = ray.get(task_ref[0])
        torch.set_num_threads(_TASKS[key].threads)
    return run_in_worker(_TASKS[key], job)


class RayExecutor(Executor):
    """Ray core tasks, ``retries`` retries of a job whose worker died (Ray's ``max_retries``)."""

    name = "ray"

    def __init__(
        self,
        workers: int = 1,
        address: str | None = None,
        retries: int = 3,
        gpus_per_job: float = 1.0,
        log: Callable[[str], None] | None = None,
        progress: bool = True,
    ) -> None:
        super().__init__(workers, log, progress)
        if retries < 0:
            raise ConfigError(f"retries must be at least 0, got {retries}")
        if gpus_per_job < 0:
            raise ConfigError(f"gpus_per_job must be at least 0, got {gpus_per_job}")
        self.retries, self.gpus_per_job = retries, gpus_per_job
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self.started_here = False
        self._reaper: Reaper | None = None
        self._refs: dict[tuple[str, str], ray.ObjectRef] = {}
        started = time.perf_counter()
        if not ray.is_initialized():
            if self.address is not None:
                try:
                    ray.init(address=self.address, log_to_driver=True)
                except ConnectionError as exc:
                    raise ConfigError(
                        f"could not join the Ray cluster at {self.address} ({exc}). A cluster started with `ray start` "
                        "asks its drivers for its token: set RAY_AUTH_MODE=token, with the head's ~/.ray/auth_token "
                        "on this machine or its text in RAY_AUTH_TOKEN (docs/cluster.md)"
                    ) from exc
            else:
                self._reaper = Reaper.start()
                with self._reaper.watching_new_children():
                    ray.init(num_cpus=workers, num_gpus=_local_gpus(), include_dashboard=False, log_to_driver=True)
            self.started_here = True
        self.startup_seconds = time.perf_counter() - started

    def _task_ref(self, task: GridTask) -> ray.ObjectRef:
        key = (task.name, task.config)
        if key not in self._refs:
            self._refs = {key: ray.put(task)}  # one grid's context in the store at a time
        return self._refs[key]

    def _stream(self, task: GridTask, jobs: list[Job]) -> Iterator[tuple[int, dict | JobFailure]]:
        gpus = self.gpus_per_job if task.device.startswith("cuda") else 0
        available = ray.cluster_resources().get("GPU", 0)
        if gpus > available:  # Ray would wait for a GPU that never comes
            raise ConfigError(
                f"the jobs run on {task.device} and ask {gpus:g} GPU each, but the Ray cluster has {available:g}: "
                "start its nodes with GPUs (ray start --num-gpus N), or train on the CPU"
            )
        remote = _run_job.options(
            num_cpus=task.threads,
            num_gpus=gpus,
            max_retries=self.retries,
            runtime_env={"env_vars": worker_environment(task)},
        )
        task_ref = self._task_ref(task)
        refs = {remote.remote([task_ref], job): index for index, job in enumerate(jobs)}
        waiting = list(refs)
        try:
            while waiting:
                done, waiting = ray.wait(waiting, num_returns=1)
                for ref in done:
                    try:
                        outcome = ray.get(ref)
                    except (ray.exceptions.RayError, ConnectionError) as exc:  # its retries spent, or Ray's own failure
                        outcome = JobFailure(jobs[refs[ref]], f"{type(exc).__name__}: {exc}")
                    yield refs[ref], outcome
        except BaseException:
            for ref in waiting:
                ray.cancel(ref, force=True)
            raise

    def close(self) -> None:
        self._refs = {}
        try:
            if self.started_here and ray.is_initialized():
                ray.shutdown()
                self.started_here = False
        finally:
            if self._reaper is not None:
                self._reaper.close()
                self._reaper = None


def _local_gpus() -> int:
    """The CUDA devices torch sees here (an embedded Ray offers them to the jobs)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
