"""A run read at a budget: the checkpoints it had reached within that many layer evaluations (or seconds), its
selected checkpoint and last iterate among them (the latest probed checkpoint), and their probe goals' per-goal
success."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from learning.counterweight.selection import Curve, selected_index


@dataclass(frozen=True)
class AtBudget:
    """``selected`` and ``last``: checkpoint indices; ``success`` and ``last_success``: their probe success
    (fraction); ``per_goal`` and ``last_per_goal``: ``(goals,)`` bool; ``evaluations`` and ``seconds``: spent at the
    last checkpoint within the budget; ``exhausted``: the run ended before the budget did."""

    selected: int
    last: int
    success: float
    last_success: float
    per_goal: torch.Tensor
    last_per_goal: torch.Tensor
    evaluations: int
    seconds: float
    exhausted: bool


def at_budget(result: dict, max_evaluations: int | None = None, max_seconds: float | None = None) -> AtBudget:
    """``result`` (a run's ``Trained.to_dict()`` with probes) within ``max_evaluations`` or ``max_seconds``."""
    curve = Curve(**result["curve"])
    spent = curve.evaluations if max_seconds is None else curve.seconds
    limit = max_evaluations if max_seconds is None else max_seconds
    within = max(1, sum(1 for value in spent if value <= limit))
    selected = selected_index(curve, within)
    last = max(i for i in range(within) if curve.probed[i])  # the latest probed (the first always is)
    probe = result["probe"]
    return AtBudget(
        selected,
        last,
        float(probe[selected].double().mean()),
        float(probe[last].double().mean()),
        probe[selected],
        probe[last],
        curve.evaluations[last],
        curve.seconds[last],
        within == len(spent),
    )


def evaluations_to_reach(result: dict, threshold: float, max_evaluations: int | None = None) -> int | None:
    """The layer evaluations at which the run's selected checkpoint first has probe success ``>= threshold``
    (``None``: never within the run, or within ``max_evaluations``)."""
    curve = Curve(**result["curve"])
    probe = result["probe"].double().mean(-1)
    for within in range(1, len(curve.evaluations) + 1):
        if max_evaluations is not None and curve.evaluations[within - 1] > max_evaluations:
            return None
        if float(probe[selected_index(curve, within)]) >= threshold:
            return curve.evaluations[within - 1]
    return None
