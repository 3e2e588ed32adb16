"""A study cell's goals: candidates drawn around the reaching shoulder over the cell's azimuth intervals (uniformly
over their union), the ones that need a counterweight kept (``needs_counterweight`` at the cell's tolerance), four
disjoint sets (train, tuning, selection, test) from their own generators."""

from __future__ import annotations

import math

import torch

from learning.counterweight.goals import goal_points, needs_counterweight
from learning.counterweight.problem import CounterweightProblem
from learning.counterweight.study.design import ARCS, GOAL_SETS, Cell, StudyCfg, azimuth_intervals

CANDIDATE_CHUNK = 256
MAX_CANDIDATES = 100_000


def arc_of(azimuth: torch.Tensor) -> torch.Tensor:
    """``(n,)`` long: 0 on the front arc, 1 on the behind arc, 2 elsewhere (azimuths in rad, any branch)."""
    out = torch.full(azimuth.shape, 2, dtype=torch.long)
    for index, (lo, hi) in enumerate(ARCS):
        centre, half = (lo + hi) / 2, (hi - lo) / 2
        inside = (torch.remainder(azimuth - centre + math.pi, 2 * math.pi) - math.pi).abs() <= half
        out[inside] = index
    return out


def sample_goals(problem: CounterweightProblem, cfg: StudyCfg, cell: Cell, n: int, gen: torch.Generator) -> dict:
    """``{"goals" (n, 3) float64, "interval" (n,) the azimuth interval each was drawn in, "arc" (n,), "candidates",
    "kept_by_interval"}``: the first ``n`` candidates that need a counterweight."""
    intervals = azimuth_intervals(cell.sectors)
    lows = torch.tensor([lo for lo, _ in intervals], dtype=torch.float64)
    widths = torch.tensor([hi - lo for lo, hi in intervals], dtype=torch.float64)
    distance, elevation = cfg.goals.distance, cfg.goals.elevation
    goals, chosen, azimuths, drawn = [], [], [], 0
    drawn_by = torch.zeros(len(intervals), dtype=torch.long)
    kept_by = torch.zeros(len(intervals), dtype=torch.long)
    while sum(len(g) for g in goals) < n:
        if drawn >= MAX_CANDIDATES:
            raise RuntimeError(f"cell {cell.name}: too few of {drawn} candidates need a counterweight")
        chunk = min(CANDIDATE_CHUNK, 32 * n)
        which = torch.multinomial(widths, chunk, replacement=True, generator=gen)
        azimuth = lows[which] + widths[which] * torch.rand(chunk, generator=gen, dtype=torch.float64)
        d = distance[0] + (distance[1] - distance[0]) * torch.rand(chunk, generator=gen, dtype=torch.float64)
        e = elevation[0] + (elevation[1] - elevation[0]) * torch.rand(chunk, generator=gen, dtype=torch.float64)
        candidates = goal_points(problem.shoulder, d, azimuth, e)
        room = n - sum(len(g) for g in goals)
        kept = needs_counterweight(problem, candidates).nonzero()[:, 0][:room]
        used = int(kept[-1]) + 1 if len(kept) == room else chunk  # counted up to the last one kept
        drawn += used
        drawn_by += torch.bincount(which[:used], minlength=len(intervals))
        kept_by += torch.bincount(which[kept], minlength=len(intervals))
        goals.append(candidates[kept])
        chosen.append(which[kept])
        azimuths.append(azimuth[kept])
    return {
        "goals": torch.cat(goals),
        "interval": torch.cat(chosen),
        "arc": arc_of(torch.cat(azimuths)),
        "candidates": drawn,
        "kept_by_interval": (kept_by.double() / drawn_by.clamp(min=1).double()).tolist(),
    }


def cell_goal_sets(problem: CounterweightProblem, cfg: StudyCfg, cell: Cell) -> dict[str, dict]:
    """The cell's four goal sets, each from its own generator (the split seed, the index of the first cell with the
    same task, the set's): cells that differ only in the policy's width share their goals."""
    index = [c.task for c in cfg.cells()].index(cell.task)
    out = {}
    for k, name in enumerate(GOAL_SETS):
        gen = torch.Generator().manual_seed(cfg.split_seed * 1000 + index * 10 + k)
        out[name] = sample_goals(problem, cfg, cell, getattr(cfg.sizes, name), gen)
    every = torch.cat([s["goals"] for s in out.values()])
    if len(torch.unique(every, dim=0)) != len(every):
        raise RuntimeError(f"cell {cell.name}: a goal is in two goal sets")
    return out
