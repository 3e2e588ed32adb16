"""The counterweight experiment's goals and splits.

Goals lie around the reaching shoulder in two opposite sectors, in front of the robot and behind it on the
reaching side (``GoalRegionCfg``), half of every split from each. A goal enters the task only if it *needs* a
counterweight, decided by the layer before any training: with the body at its rest targets the reach fails, and
with the balance constraint removed it succeeds (``needs_counterweight``). Candidates are drawn until a split is
full; the fraction accepted is recorded.

Splits: train, validation (selects a run's checkpoint), tuning (chooses hyperparameters), IID test, and two
held-out ones: ``test_far`` (farther from the shoulder than any trained goal, both sectors) and ``test_between`` (an
azimuth band between the sectors, beside the front one on the reaching side); the tuning split is drawn like the
training one. Each split draws from its own generator seeded from the
experiment's split seed; the run saves them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from learning.common.io import atomic_torch_save
from learning.counterweight.config import ExperimentCfg, GoalRegionCfg
from learning.counterweight.problem import CounterweightProblem

SECTORS = ("front", "behind", "between")  # a goal's ``SplitGoals.sector`` indexes this
SPLITS = ("train", "validation", "test_iid", "test_far", "test_between", "tuning")  # new ones last: seeds by index
TEST_SPLITS = ("test_iid", "test_far", "test_between")
CANDIDATE_CHUNK = 256  # candidates solved per batch while filling a split (at most)
MAX_CANDIDATES = 200_000  # per split: a region where (almost) no goal needs a counterweight fails loudly


@dataclass(frozen=True)
class SplitGoals:
    """One split: the goals ``(n, 3)`` (float64, world frame), each one's sector index (0 front, 1 behind, 2 the
    between band), and how many candidates were drawn to fill it."""

    goals: torch.Tensor
    sector: torch.Tensor
    candidates: int


def goal_points(shoulder: torch.Tensor, distance: torch.Tensor, azimuth: torch.Tensor, elevation: torch.Tensor):
    """World goals ``(n, 3)`` at ``distance`` from the shoulder in the direction (azimuth, elevation)."""
    direction = torch.stack((elevation.cos() * azimuth.cos(), elevation.cos() * azimuth.sin(), elevation.sin()), -1)
    return shoulder.to(torch.float64) + distance[:, None] * direction


def spherical(goals: torch.Tensor, shoulder: torch.Tensor) -> torch.Tensor:
    """``(n, 3)`` distance (m), azimuth, elevation (rad) of world goals from the shoulder: ``goal_points``'s
    inverse (azimuth in ``(-pi, pi]``)."""
    d = goals.to(torch.float64) - shoulder.to(torch.float64)
    distance = d.norm(dim=-1)
    return torch.stack((distance, torch.atan2(d[:, 1], d[:, 0]), torch.asin(d[:, 2] / distance)), -1)


def _uniform(gen: torch.Generator, n: int, bounds: tuple[float, float]) -> torch.Tensor:
    return bounds[0] + (bounds[1] - bounds[0]) * torch.rand(n, generator=gen, dtype=torch.float64)


def split_band(region: GoalRegionCfg, split: str) -> tuple[tuple[float, float], tuple[tuple[float, float], ...]]:
    """The distance range and the azimuth intervals a split draws from (elevation: always ``region.elevation``)."""
    if split == "test_between":
        return region.distance, (region.between_azimuth,)
    return (region.far_distance if split == "test_far" else region.distance), region.sectors


@torch.no_grad()
def needs_counterweight(problem: CounterweightProblem, goals: torch.Tensor) -> torch.Tensor:
    """``(n,)`` bool: reach only (rest body targets) fails and the same reach without the balance constraint
    succeeds."""
    goals = goals.to(problem.tree.joint_lower.dtype)
    at_rest = problem.outcome(problem.solve(goals, None, "body")).success
    unbalanced = problem.outcome(problem.solve(goals, None, "no_balance")).reached
    return ~at_rest & unbalanced


def sample_split(
    problem: CounterweightProblem, gen: torch.Generator, n: int, region: GoalRegionCfg, split: str
) -> SplitGoals:
    """``n`` goals that need a counterweight, as evenly as possible from each of the split's sectors (each drawn
    uniformly over the sector, the first ones that need a counterweight kept)."""
    distance, intervals = split_band(region, split)
    goals, sectors, count = [], [], 0
    for index, azimuth in enumerate(intervals):
        wanted = n // len(intervals) + (1 if index < n % len(intervals) else 0)
        kept_goals, drawn = [], 0
        while sum(len(g) for g in kept_goals) < wanted:
            if drawn >= MAX_CANDIDATES:
                raise RuntimeError(
                    f"split {split}: only {sum(len(g) for g in kept_goals)} of {drawn} candidates in distance "
                    f"{distance}, azimuth {azimuth} need a counterweight; widen the region"
                )
            chunk = min(CANDIDATE_CHUNK, 32 * wanted)  # a small split (the smoke preset's) solves small batches
            candidates = goal_points(
                problem.shoulder,
                _uniform(gen, chunk, distance),
                _uniform(gen, chunk, azimuth),
                _uniform(gen, chunk, region.elevation),
            )
            room = wanted - sum(len(g) for g in kept_goals)
            kept = needs_counterweight(problem, candidates).nonzero()[:, 0][:room]
            # candidates counted up to the last one kept, so the kept fraction does not depend on the chunk size
            drawn += int(kept[-1]) + 1 if len(kept) == room else chunk
            kept_goals.append(candidates[kept])
        goals.append(torch.cat(kept_goals))
        sectors.append(torch.full((wanted,), 2 if split == "test_between" else index, dtype=torch.long))
        count += drawn
    order = torch.randperm(n, generator=gen)  # sectors mixed: any first k goals are a sample of the whole split
    return SplitGoals(torch.cat(goals)[order], torch.cat(sectors)[order], count)


def make_splits(cfg: ExperimentCfg, problem: CounterweightProblem) -> dict[str, SplitGoals]:
    """Every split, deterministic from ``cfg.split_seed``."""
    out = {}
    for index, name in enumerate(SPLITS):
        gen = torch.Generator().manual_seed(cfg.split_seed * 100 + index)
        out[name] = sample_split(problem, gen, getattr(cfg.splits, name), cfg.goals, name)
    return out


def save_splits(splits: dict[str, SplitGoals], path: Path) -> None:
    atomic_torch_save(
        {name: {"goals": s.goals, "sector": s.sector, "candidates": s.candidates} for name, s in splits.items()},
        path,
    )


def load_splits(path: Path) -> dict[str, SplitGoals]:
    data = torch.load(path, weights_only=True)
    return {name: SplitGoals(s["goals"], s["sector"], int(s["candidates"])) for name, s in data.items()}
