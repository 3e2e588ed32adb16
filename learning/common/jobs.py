"""A grid's jobs and what they share: ``Job`` (one training run, with a stable key), ``GridTask`` (the problem every
job of a grid trains on, built once per worker process), and the errors a grid raises.

A job's key names everything its result depends on: the method, its settings, the seed, the budget and a
fingerprint of the task's configuration. Its result is a mapping of tensors and plain values (what
``torch.load(weights_only=True)`` reads back), so the run folder's files are safe to read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kinematics.errors import ProjectError
from learning.common.provenance import source_fingerprint


def fingerprint(config: Mapping) -> str:
    """A short stable digest of a configuration mapping (JSON with sorted keys)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Job:
    """One training run: ``method`` with ``settings`` from ``seed``, for ``max_seconds`` of training if given (else
    its method's own budget), on the task whose configuration has fingerprint ``config``."""

    method: str
    settings: tuple[tuple[str, Any], ...] = ()
    seed: int = 0
    max_seconds: float | None = None
    config: str = ""

    @property
    def budget(self) -> str:
        return "seconds" if self.max_seconds is not None else "evaluations"

    @property
    def key(self) -> dict:
        return {
            "method": self.method,
            "settings": [list(item) for item in self.settings],
            "seed": self.seed,
            "max_seconds": self.max_seconds,
            "config": self.config,
        }

    @property
    def name(self) -> str:
        """A file name: readable, and unique through the digest of the whole key."""
        digest = hashlib.sha256(json.dumps(self.key, sort_keys=True).encode()).hexdigest()[:12]
        return f"{self.method}-seed{self.seed}-{self.budget}-{digest}"

    def describe(self) -> str:
        settings = ", ".join(f"{k}={v}" for k, v in self.settings)
        budget = f", {self.max_seconds:.2f} s" if self.max_seconds is not None else ""
        return f"{self.method}({settings}) seed {self.seed}{budget}"


def settings_of(settings: Mapping) -> tuple[tuple[str, Any], ...]:
    """A job's settings from a mapping: sorted, hashable."""
    return tuple(sorted(settings.items()))


@dataclass(frozen=True)
class GridTask:
    """What every job of a grid shares. ``build(context)`` makes a worker's problem, once per process;
    ``run(problem, job)`` trains one job on it and returns its result. Both are module-level functions (workers
    import them); ``context`` is sent to each worker once. ``threads`` torch threads per worker; a ``device``
    of ``cuda...`` makes every job ask its executor for a GPU."""

    name: str
    build: Callable[[Any], Any]
    run: Callable[[Any, Job], dict]
    context: Any
    config: str
    threads: int = 1
    device: str = "cpu"
    code: str = field(default_factory=source_fingerprint)  # the driver's; a worker running other code refuses


@dataclass(frozen=True)
class JobFailure:
    """A job that raised: its traceback as the worker printed it."""

    job: Job
    traceback: str


class GridError(ProjectError):
    """Jobs of a grid failed; every finished result is saved and ``--resume`` runs only what is missing."""

    def __init__(self, message: str, failures: list[JobFailure] = ()) -> None:
        super().__init__(message)
        self.failures = list(failures)


class WorkerLostError(GridError):
    """A worker process died in the middle of a job (killed, out of memory) and the executor does not retry."""
