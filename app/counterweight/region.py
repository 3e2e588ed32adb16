"""Where the G1 scene's reach goal may go: the counterweight task's goal region around the reaching shoulder.

The region is the experiment's (``GoalRegionCfg``), in spherical coordinates about the shoulder: distance from the
nearest trained goal to the farthest held-out one (``distance[0]`` to ``far_distance[1]``), the elevation range,
and an azimuth in one of the trained sectors (in front; behind on the reaching side) or in the held-out band
between them. A goal from the page (dragged, typed) inside the region stays where it is, held-out parts included:
that is where a user asks how the methods generalise. One that falls outside is moved to a *trained* goal, where
the methods are meant to succeed, not to the region's edge (its far corners are held out, and some of them no
method can reach with the feet held): the nearest of the trainers' training goals to the nearest point of the
trained part (each coordinate clamped on its own, the azimuth to the nearest edge of the nearest trained sector,
around the circle), or that point itself before any goals are drawn. The caller gets a message saying what was
moved, where to, and the region (in the goal line's precision, so the two agree), to show beside the goal: no method
is asked a question from outside the task without a word.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from learning.counterweight.config import GoalRegionCfg
from learning.counterweight.goals import SECTORS, goal_points

BETWEEN = SECTORS[-1]  # the held-out band between the trained sectors (``SECTORS`` names those first)
INSIDE_RAD = 1e-3  # a clamped goal lies this far inside the region (rad, and m for the distance), so that the
# page's rounding of its coordinates to 0.1 mm keeps it inside


class GoalRegion:
    """The goal region of ``cfg`` around ``shoulder`` ``(3,)`` (m, world frame)."""

    def __init__(self, shoulder: np.ndarray, cfg: GoalRegionCfg) -> None:
        self.shoulder = np.asarray(shoulder, dtype=float).reshape(3)
        self.cfg = cfg
        self.distance = (cfg.distance[0], cfg.far_distance[1])
        self.bands = (*zip(SECTORS, cfg.sectors, strict=False), (BETWEEN, cfg.between_azimuth))

    def spherical(self, p: np.ndarray) -> tuple[float, float, float]:
        """Distance (m), azimuth and elevation (rad) of ``p`` from the shoulder (straight ahead at the shoulder)."""
        d = np.asarray(p, dtype=float).reshape(3) - self.shoulder
        distance = float(np.linalg.norm(d))
        if distance < 1e-9:
            return distance, 0.0, 0.0
        return distance, math.atan2(d[1], d[0]), math.asin(float(np.clip(d[2] / distance, -1.0, 1.0)))

    def point(self, distance: float, azimuth: float, elevation: float) -> np.ndarray:
        """``(3,)`` the world point at those spherical coordinates (``goal_points``)."""
        values = (torch.tensor([v], dtype=torch.float64) for v in (distance, azimuth, elevation))
        return goal_points(torch.from_numpy(self.shoulder), *values)[0].numpy()

    def band(self, azimuth: float) -> str | None:
        """The sector (or the between band) holding ``azimuth``, None if none does."""
        return next((name for name, (lo, hi) in self.bands if lo <= azimuth <= hi), None)

    def contains(self, p: np.ndarray) -> bool:
        """Whether ``p`` ``(3,)`` m lies in the region (held-out parts included)."""
        given = np.asarray(p, dtype=float).reshape(3)
        if not np.all(np.isfinite(given)):
            return False
        distance, azimuth, elevation = self.spherical(given)
        inside = self.distance[0] <= distance <= self.distance[1] and self.band(azimuth) is not None
        return inside and self.cfg.elevation[0] <= elevation <= self.cfg.elevation[1]

    def clamp(self, p: np.ndarray, trained: np.ndarray | None = None) -> tuple[np.ndarray, str | None]:
        """``p`` ``(3,)`` m -> itself and None if it lies in the region; else a trained goal and a message: the
        nearest row of ``trained`` ``(n, 3)`` (the trainers' training goals) to the nearest point of the trained part,
        or that point if ``trained`` is None or empty. A non-finite coordinate is taken as the shoulder's."""
        given = np.asarray(p, dtype=float).reshape(3)
        if self.contains(given):
            return given, None
        distance, azimuth, elevation = self.spherical(np.where(np.isfinite(given), given, self.shoulder))
        moved_azimuth = azimuth if self.band(azimuth) not in (None, BETWEEN) else self._nearest_azimuth(azimuth)
        point = self.point(_clip(distance, *self.cfg.distance), moved_azimuth, _clip(elevation, *self.cfg.elevation))
        where = "the nearest point of the trained sectors"
        if trained is not None and len(trained):
            goals = np.asarray(trained, dtype=float).reshape(-1, 3)
            point = goals[int(np.argmin(np.linalg.norm(goals - point, axis=1)))].copy()
            where = "the nearest goal the policies train on"
        shown = ", ".join(f"{v:.3f}" if math.isfinite(v) else f"{v:g}" for v in given)
        moved = ", ".join(f"{v:.3f}" for v in point)
        return point, f"({shown}) m is outside the task's region: moved to ({moved}) m, {where}. {self.extent()}"

    def _nearest_azimuth(self, azimuth: float) -> float:
        """The nearest trained sector's edge to ``azimuth`` around the circle, moved ``INSIDE_RAD`` into it."""
        sectors = self.cfg.sectors
        edges = [(lo, lo + INSIDE_RAD) for lo, _ in sectors] + [(hi, hi - INSIDE_RAD) for _, hi in sectors]
        return min(edges, key=lambda edge: abs(math.remainder(azimuth - edge[0], 2 * math.pi)))[1]

    def extent(self) -> str:
        """The region in one sentence, in the precision the goal line uses (m to 0.001, degrees to 0.1)."""
        bands = "; ".join(f"{name} {math.degrees(lo):.1f}° to {math.degrees(hi):.1f}°" for name, (lo, hi) in self.bands)
        el, trained = self.cfg.elevation, self.cfg.distance[1]
        return (
            f"The region: {self.distance[0]:.3f}–{self.distance[1]:.3f} m from the shoulder (beyond {trained:.3f} m held "
            f"out), elevation {math.degrees(el[0]):.1f}° to {math.degrees(el[1]):.1f}°, azimuth {bands}."
        )

    def describe(self, p: np.ndarray) -> str:
        """Where ``p`` lies: its spherical coordinates from the shoulder (degrees) and its sector."""
        distance, azimuth, elevation = self.spherical(p)
        band = self.band(azimuth)
        where = {None: "outside the sectors", BETWEEN: "between the sectors (held out)"}.get(band, f"{band} sector")
        if distance > self.cfg.distance[1]:
            where += ", farther than any trained goal (held out)"
        return (
            f"{distance:.3f} m, azimuth {math.degrees(azimuth):.1f}°, elevation {math.degrees(elevation):.1f}° "
            f"from the shoulder: {where}"
        )

    def sample(self, gen: torch.Generator) -> np.ndarray:
        """``(3,)`` a goal drawn uniformly from a trained sector chosen at random (not filtered: it may not need a
        counterweight)."""
        sector = self.cfg.sectors[int(torch.randint(len(self.cfg.sectors), (1,), generator=gen))]
        u = torch.rand(3, generator=gen, dtype=torch.float64).tolist()
        ranges = (self.cfg.distance, sector, self.cfg.elevation)
        return self.point(*(lo + (hi - lo) * v for (lo, hi), v in zip(ranges, u, strict=True)))


def _clip(value: float, lo: float, hi: float) -> float:
    """``value`` if inside ``[lo, hi]``, else ``INSIDE_RAD`` inside the nearer bound."""
    if value < lo:
        return lo + INSIDE_RAD
    if value > hi:
        return hi - INSIDE_RAD
    return value
