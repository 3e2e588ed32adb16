"""A run's files as the scenes' metrics panels read them: its ``report.json`` and its PNG figures."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import numpy as np

from kinematics.errors import ProjectError


def read_report(run: Path) -> dict:
    """The run's ``report.json``; a ``ProjectError`` saying what to run when it is missing or unreadable."""
    path = run / "report.json"
    if not path.is_file():
        raise ProjectError(f"{path} does not exist; run `python -m learning evaluate --run {run}`")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ProjectError(f"{path} is not a readable report: {exc}") from exc


def read_figure(path: Path) -> np.ndarray:
    """``(H, W, 3|4)`` uint8 pixels of a PNG."""
    pixels = matplotlib.image.imread(path)
    return (pixels * 255).round().astype(np.uint8) if pixels.dtype != np.uint8 else pixels
