"""Bounds of the viewer's inputs: grasp targets inside the arm's top-down reach, start joints inside their limits.

A value from the page or the command line that falls outside is moved to the nearest allowed one, and the caller
gets a sentence saying what was changed, to show to the user: no method is asked a question it cannot answer
without a word.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

import assets


def clamp_target(p: Sequence[float]) -> tuple[np.ndarray, str | None]:
    """``p`` ``(3,)`` metres -> the nearest point of the reachable set and a message (None if ``p`` was inside).

    The set is ``assets.PANDA_TOP_DOWN_REACH.target_box`` intersected with the top-down reach sphere of ``assets``; a non-finite
    coordinate is replaced by the box's centre on that axis.
    """
    given = np.asarray(p, dtype=float).reshape(3)
    box = np.array(assets.PANDA_TOP_DOWN_REACH.target_box, dtype=float)
    centre = box.mean(axis=1)
    point = np.where(np.isfinite(given), given, centre)
    point = np.clip(point, box[:, 0], box[:, 1])
    wrist = point + np.array([0.0, 0.0, assets.PANDA_TOP_DOWN_REACH.wrist_height])
    offset = wrist - np.array(assets.PANDA_TOP_DOWN_REACH.shoulder)
    distance = float(np.linalg.norm(offset))
    if distance > assets.PANDA_TOP_DOWN_REACH.radius:
        # 0.1 mm inside, so that the page's 4-decimal rounding of the moved point stays inside too.
        wrist = np.array(assets.PANDA_TOP_DOWN_REACH.shoulder) + offset * (
            (assets.PANDA_TOP_DOWN_REACH.radius - 1e-4) / distance
        )
        point = np.clip(wrist - np.array([0.0, 0.0, assets.PANDA_TOP_DOWN_REACH.wrist_height]), box[:, 0], box[:, 1])
    if np.array_equal(point, given):
        return point, None
    shown = ", ".join(_number(v) for v in given)
    moved = ", ".join(f"{v:.3f}" for v in point)
    return point, (
        f"target ({shown}) m is outside the arm's top-down reach (wrist within {assets.PANDA_TOP_DOWN_REACH.radius} m of "
        f"the shoulder, z >= 0): moved to ({moved}) m"
    )


def clamp_joints(q: Sequence[float], limits: Mapping[str, tuple[float, float]]) -> tuple[np.ndarray, str | None]:
    """``q`` ``(7,)`` radians -> each arm joint clipped to ``limits[name]`` (a non-finite value goes to the middle
    of its range) and a message naming the joints that moved (None if none did)."""
    given = np.asarray(q, dtype=float).reshape(len(assets.PANDA.joints))
    lower = np.array([limits[name][0] for name in assets.PANDA.joints], dtype=float)
    upper = np.array([limits[name][1] for name in assets.PANDA.joints], dtype=float)
    clipped = np.clip(np.where(np.isfinite(given), given, (lower + upper) / 2), lower, upper)
    moved = [
        f"{name} {_number(v)} -> {c:.3f}"
        for name, v, c in zip(assets.PANDA.joints, given, clipped, strict=True)
        if not v == c
    ]
    if not moved:
        return clipped, None
    return clipped, "start joints outside their limits were clipped (rad): " + ", ".join(moved)


def _number(v: float) -> str:
    return f"{v:.3f}" if math.isfinite(v) and abs(v) < 1e6 else f"{v:g}"
