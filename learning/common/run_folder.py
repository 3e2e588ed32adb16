"""A run folder: its configuration, checked before anything is written, and the results of its jobs, each written
atomically as it arrives (``jobs/<phase>/<job name>.pt``).

A new run needs an empty (or absent) folder; ``resume=True`` continues a folder written by the same configuration
and refuses one written by another, naming the first difference. Settings that change how a grid runs, never what
it computes (``workers``), may differ.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch

from kinematics.errors import ConfigError
from learning.common.io import atomic_torch_save, atomic_write_json
from learning.common.jobs import Job, fingerprint

RESULT_FORMAT = "grasp-yaw-ik/job-result/1"
RUNNING_SETTINGS = ("workers",)  # how the jobs run, not what they compute


def _flatten(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, Mapping):
        out: dict[str, object] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: value}


def config_difference(saved: Mapping, current: Mapping) -> str | None:
    """The first setting (dotted name) on which two configurations differ, with both values; None if equal."""
    a, b = _flatten(computed_config(saved)), _flatten(computed_config(current))
    for name in [*b, *(name for name in a if name not in b)]:  # in the configuration's own order
        if a.get(name, "<absent>") != b.get(name, "<absent>"):
            return f"{name} is {a.get(name, '<absent>')!r} in the folder and {b.get(name, '<absent>')!r} now"
    return None


def computed_config(config: Mapping) -> dict:
    """The configuration without the settings that only change how it runs."""
    return {key: value for key, value in config.items() if key not in RUNNING_SETTINGS}


def config_fingerprint(config: Mapping) -> str:
    """What a grid task's jobs are keyed by: the digest of the configuration's computed settings."""
    return fingerprint(computed_config(config))


class RunFolder:
    """``path`` for a run of ``config`` (a JSON mapping): refused if it holds another run, or any files without
    ``resume``; ``config.json`` written on a new run."""

    def __init__(self, path: Path, config: Mapping, resume: bool = False) -> None:
        self.path, self.resume = Path(path), resume
        self.check(self.path, config, resume)
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path / "config.json", dict(config))

    @staticmethod
    def check(path: Path, config: Mapping, resume: bool) -> None:
        """Refuse ``path`` (``ConfigError``, one line) for a run of ``config``, before anything starts."""
        path = Path(path)
        config_path = path / "config.json"
        if resume:
            if not config_path.is_file():
                raise ConfigError(f"nothing to resume: {path} has no config.json (start it without --resume)")
            saved = json.loads(config_path.read_text())
            difference = config_difference(saved, json.loads(json.dumps(config)))
            if difference is not None:
                raise ConfigError(f"{path} was written by another configuration: {difference}")
        elif path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise ConfigError(f"run folder {path} is not empty; pass --resume to continue it, or choose another --run")

    def results(self, phase: str) -> ResultStore:
        return ResultStore(self.path / "jobs" / phase)


class ResultStore:
    """One phase's job results: a file per finished job, its key inside, read back only if the key matches."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def path(self, job: Job) -> Path:
        return self.folder / f"{job.name}.pt"

    def load(self, job: Job) -> dict | None:
        """The saved result of ``job``, or None if it has not finished."""
        path = self.path(job)
        if not path.is_file():
            return None
        try:
            data = torch.load(path, weights_only=True)
        except Exception as exc:
            raise ConfigError(f"{path} is not a readable job result ({exc}); delete it to rerun its job") from exc
        if not isinstance(data, dict) or data.get("format") != RESULT_FORMAT or data.get("key") != job.key:
            raise ConfigError(f"{path} does not hold the result of {job.describe()}; delete it to rerun its job")
        return data["result"]

    def save(self, job: Job, result: dict) -> None:
        atomic_torch_save({"format": RESULT_FORMAT, "key": job.key, "result": result}, self.path(job))
