"""Atomic file writes: a reader never sees a half-written checkpoint, report or figure."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch


def _atomic(path: Path, write) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_torch_save(obj: Any, path: Path) -> None:
    _atomic(path, lambda handle: torch.save(obj, handle))


def atomic_write_text(path: Path, text: str) -> None:
    _atomic(path, lambda handle: handle.write(text.encode()))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def atomic_save_figure(figure, path: Path) -> None:
    _atomic(path, lambda handle: figure.savefig(handle, format=Path(path).suffix.lstrip("."), dpi=110))
