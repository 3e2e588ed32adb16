"""Per-goal online optimisation: each goal's own R^9 offset, optimised by Adam through the whole-body layer
(``online_steps`` solves with their backward per goal). No learning across goals; the reference a policy is
measured against."""

from __future__ import annotations

from collections.abc import Callable

import torch

from learning.counterweight.config import BaselineCfg
from learning.counterweight.problem import HAND, R9_SIZE, CounterweightProblem, bound_offsets


def optimise_offsets(
    problem: CounterweightProblem,
    goals: torch.Tensor,
    cfg: BaselineCfg,
    penalty: float,
    should_stop: Callable[[], bool] | None = None,
) -> torch.Tensor | None:
    """``(B, 18)`` bounded R^9 offsets, from rest; per goal the best iterate is kept, a successful one (the final
    outcome, ``CounterweightProblem.outcome``, of the same solve) before any other, then the lower loss (the loss
    knows the hand, not the feet: a large body offset can pull a foot past its tolerance). ``None`` if
    ``should_stop()`` turned true between steps (the viewer abandons a goal that moved on)."""
    raw = goals.new_zeros(len(goals), R9_SIZE, requires_grad=True)
    optimizer = torch.optim.Adam([raw], lr=cfg.online_learning_rate)
    bound = problem.cfg.offset_bound
    best = torch.zeros_like(raw.detach())
    best_loss = torch.full((len(goals),), torch.inf, dtype=goals.dtype)
    best_success = torch.zeros(len(goals), dtype=torch.bool)
    for _ in range(cfg.online_steps):
        if should_stop is not None and should_stop():
            return None
        offsets = bound_offsets(raw, bound)
        result = problem.solve(goals, offsets, "body", "r9")
        loss = result.residuals[HAND].square().sum(-1) + penalty * offsets.square().sum(-1)
        with torch.no_grad():
            success = problem.outcome(result).success
            better = (success & ~best_success) | ((success == best_success) & (loss < best_loss))
            best_success |= success
            best = torch.where(better[:, None], offsets, best)
            best_loss = torch.where(better, loss, best_loss)
        optimizer.zero_grad()
        loss.sum().backward()
        optimizer.step()
    return best.detach()
