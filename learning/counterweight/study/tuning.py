"""The study's tuning: grids, the edge rule, and the choice per budget.

A ``Search`` tunes one method in one cell from fixed settings over a grid: each configuration runs from every
tuning seed; its score at a budget is the mean over seeds of the tuning goals' success at the selected checkpoint
within that budget (ties: the last iterate's, then the grid's order). After each round, for each budget, a choice
on an edge of a dimension with more than one value extends that dimension one step past the edge (the grid's ratio
there), as far as the setting admits (``MINIMUM``, ``EVEN``), and the search runs another round; it is done when
every budget's choice is interior or the rounds are spent.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from learning.counterweight.study.budgets import at_budget
from learning.counterweight.study.design import EVEN, MINIMUM, Grid


def configurations(grid: Grid) -> list[dict]:
    names = [name for name, _ in grid]
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*(v for _, v in grid))]


def extended_value(values: tuple, side: int, setting: str):
    """The value one step past ``values``' edge (``side`` -1 below, +1 above) at the grid's ratio there, or
    ``None`` where the setting admits none."""
    ordered = sorted(values)
    ratio = ordered[1] / ordered[0] if side < 0 else ordered[-1] / ordered[-2]
    value = ordered[0] / ratio if side < 0 else ordered[-1] * ratio
    if isinstance(ordered[0], int):
        value = int(round(value))
        if setting in EVEN:  # the even value on the far side
            value = 2 * (math.floor(value / 2) if side < 0 else math.ceil(value / 2))
        if value < MINIMUM.get(setting, 1) or value in ordered:
            return None
    else:
        value = float(f"{value:.3g}")
    return value


@dataclass
class Search:
    """One method's tuning in one cell (see the module's docstring)."""

    cell: str
    method: str
    stage: str
    grid: Grid
    fixed: dict
    budgets: tuple[str, ...]
    max_rounds: int
    rounds: int = 0
    extensions: list[dict] = field(default_factory=list)
    not_extended: list[dict] = field(default_factory=list)
    choices: dict = field(default_factory=dict)  # budget -> settings (fixed included)
    scores: list[dict] = field(default_factory=list)
    done: bool = False

    def settings(self) -> list[dict]:
        return [{**self.fixed, **config} for config in configurations(self.grid)]

    def update(self, results: Callable[[dict], list[dict]], limits: dict[str, dict]) -> None:
        """Choose per budget from ``results(settings)`` (one result per tuning seed) within ``limits[budget]``
        (``max_evaluations`` or ``max_seconds``); extend the grid where a choice is on an edge."""
        self.rounds += 1
        rows = []
        for settings in self.settings():
            runs = results(settings)
            row = {"settings": settings}
            for budget in self.budgets:
                read = [at_budget(run, **limits[budget]) for run in runs]
                row[budget] = sum(r.success for r in read) / len(read)
                row[f"{budget}_last"] = sum(r.last_success for r in read) / len(read)
            rows.append(row)
        self.scores = rows
        self.choices = {
            budget: max(rows, key=lambda row, b=budget: (row[b], row[f"{b}_last"]))["settings"]
            for budget in self.budgets
        }
        grid, extended = list(self.grid), False
        if self.rounds <= self.max_rounds:
            for index, (setting, values) in enumerate(self.grid):
                if len(values) < 2:
                    continue
                for side, edge in ((-1, min(values)), (1, max(values))):
                    if not any(choice[setting] == edge for choice in self.choices.values()):
                        continue
                    value = extended_value(grid[index][1], side, setting)
                    if value is None:
                        self.not_extended.append(
                            {"setting": setting, "at": edge, "why": "the setting admits no further"}
                        )
                        continue
                    grid[index] = (setting, tuple(sorted((*grid[index][1], value))))
                    self.extensions.append({"round": self.rounds, "setting": setting, "from": edge, "to": value})
                    extended = True
        elif any(
            choice[setting] in (min(values), max(values)) and len(values) > 1
            for choice in self.choices.values()
            for setting, values in self.grid
        ):
            self.not_extended.append({"setting": "any", "at": None, "why": f"{self.max_rounds} extension rounds spent"})
        self.grid = tuple(grid)
        self.done = not extended

    def to_dict(self) -> dict:
        return {
            "cell": self.cell,
            "method": self.method,
            "stage": self.stage,
            "grid": [[name, list(values)] for name, values in self.grid],
            "fixed": self.fixed,
            "budgets": list(self.budgets),
            "rounds": self.rounds,
            "extensions": self.extensions,
            "not_extended": self.not_extended,
            "choices": self.choices,
            "scores": self.scores,
        }


def neighbourhood(values: tuple, chosen) -> tuple:
    """The chosen value and its neighbours in ``values`` (sorted), for a non-base level's search."""
    ordered = sorted(values)
    index = ordered.index(chosen)
    return tuple(ordered[max(0, index - 1) : index + 2])
