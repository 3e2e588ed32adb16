"""The counterweight experiment's goals and splits: train, validation (selects checkpoints), IID test, and two
held-out splits farther and higher than any goal trained on. Each split draws from its own generator seeded from
the experiment's split seed; the run saves them."""

from __future__ import annotations

from pathlib import Path

import torch

from learning.counterweight.config import ExperimentCfg, GoalRegionCfg
from learning.io import atomic_torch_save

SPLITS = ("train", "validation", "test_iid", "test_far", "test_high")
TEST_SPLITS = ("test_iid", "test_far", "test_high")


def _uniform(gen: torch.Generator, n: int, bounds: tuple[float, float]) -> torch.Tensor:
    return bounds[0] + (bounds[1] - bounds[0]) * torch.rand(n, generator=gen, dtype=torch.float64)


def goal_points(shoulder: torch.Tensor, distance: torch.Tensor, azimuth: torch.Tensor, elevation: torch.Tensor):
    """World goals ``(n, 3)`` at ``distance`` from the shoulder in the direction (azimuth, elevation)."""
    direction = torch.stack((elevation.cos() * azimuth.cos(), elevation.cos() * azimuth.sin(), elevation.sin()), -1)
    return shoulder.to(torch.float64) + distance[:, None] * direction


def sample_goals(gen: torch.Generator, n: int, region: GoalRegionCfg, shoulder: torch.Tensor, split: str):
    distance = _uniform(gen, n, region.far_distance if split == "test_far" else region.distance)
    azimuth = _uniform(gen, n, region.azimuth)
    elevation = _uniform(gen, n, region.high_elevation if split == "test_high" else region.elevation)
    return goal_points(shoulder, distance, azimuth, elevation)


def make_splits(cfg: ExperimentCfg, shoulder: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every split's goals ``(n, 3)``, float64, deterministic from ``cfg.split_seed``."""
    out = {}
    for index, name in enumerate(SPLITS):
        gen = torch.Generator().manual_seed(cfg.split_seed * 100 + index)
        out[name] = sample_goals(gen, getattr(cfg.splits, name), cfg.goals, shoulder, name)
    return out


def save_splits(splits: dict[str, torch.Tensor], path: Path) -> None:
    atomic_torch_save(splits, path)


def load_splits(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)
