"""Per-goal online optimisation: each goal's own action, optimised by Adam through the whole-body layer
(``online_steps`` solves with their backward per goal). No learning across goals; the reference a policy is
measured against."""

from __future__ import annotations

from collections.abc import Callable

import torch

from learning.counterweight.config import BaselineCfg
from learning.counterweight.problem import ACTIONS, CounterweightProblem
from learning.counterweight.training import reach_loss


def optimise_actions(
    problem: CounterweightProblem,
    goals: torch.Tensor,
    cfg: BaselineCfg,
    penalty: float,
    should_stop: Callable[[], bool] | None = None,
) -> torch.Tensor | None:
    """``(B, 7)`` actions in ``[-1, 1]``: ``tanh`` of per-goal parameters, from rest, best loss kept per goal;
    ``None`` if ``should_stop()`` turned true between steps (the viewer abandons a goal that moved on)."""
    raw = goals.new_zeros(len(goals), len(ACTIONS), requires_grad=True)
    optimizer = torch.optim.Adam([raw], lr=cfg.online_learning_rate)
    best = torch.zeros_like(raw.detach())
    best_loss = torch.full((len(goals),), torch.inf, dtype=goals.dtype)
    for _ in range(cfg.online_steps):
        if should_stop is not None and should_stop():
            return None
        actions = torch.tanh(raw)
        loss = reach_loss(problem, goals, actions, penalty)
        with torch.no_grad():
            better = loss < best_loss
            best = torch.where(better[:, None], actions, best)
            best_loss = torch.where(better, loss, best_loss)
        optimizer.zero_grad()
        loss.sum().backward()
        optimizer.step()
    return best.detach()
