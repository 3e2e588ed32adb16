"""A cell's diagnostics, before any training at that level: its goal sets, how many candidates needed a
counterweight (per azimuth interval), reach only and the reach without balance on the test goals, the best constant
offset (Adam through the layer, chosen on the selection goals) and per-goal optimisation (the first test goals).
The cell is kept only if it keeps the task's properties (``learning.counterweight.distribution.PROPERTIES``)."""

from __future__ import annotations

from learning.counterweight.distribution import constant_and_per_goal, rate, solved, task_properties
from learning.counterweight.problem import CounterweightProblem
from learning.counterweight.study.design import Cell, StudyCfg
from learning.counterweight.study.regions import cell_goal_sets


def cell_diagnostics(problem: CounterweightProblem, cfg: StudyCfg, cell: Cell) -> dict:
    """``{"goal_sets": {name: {...}}, "diagnostics": {...}}`` of ``cell`` (``problem`` at its tolerance)."""
    sets = cell_goal_sets(problem, cfg, cell)
    dtype = problem.tree.joint_lower.dtype
    test = sets["test"]["goals"].to(dtype)
    _, _, constant_success, per_goal = constant_and_per_goal(
        problem, cfg.experiment(cell), sets["train"]["goals"], sets["selection"]["goals"], test, cfg.sizes.per_goal
    )
    row = {
        "reach_only": rate(solved(problem, test, None)),
        "no_balance": rate(solved(problem, test, None, "no_balance")),
        "best_constant": rate(constant_success),
        "best_constant_per_goal": constant_success.tolist(),
        "per_goal": rate(per_goal),
        "per_goal_goals": len(per_goal),
        "candidates": {name: s["candidates"] for name, s in sets.items()},
        "kept": {name: len(s["goals"]) / s["candidates"] for name, s in sets.items()},
        "kept_by_interval": sets["train"]["kept_by_interval"],
        "test_front_share": rate(sets["test"]["arc"] == 0),
    }
    row["properties"] = task_properties(row)
    row["kept_cell"] = all(row["properties"].values())
    return {"goal_sets": sets, "diagnostics": row}
