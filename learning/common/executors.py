"""The executors of a grid's jobs, by name: ``local`` (this process, or a pool of processes on this machine: the
default, nothing to install) and ``ray`` (Ray core tasks: an embedded local Ray, or a cluster joined by its
address)."""

from __future__ import annotations

from collections.abc import Callable

from kinematics.errors import ConfigError
from learning.common.executor import Executor
from learning.common.local_executor import LocalExecutor

EXECUTORS = ("local", "ray")


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
