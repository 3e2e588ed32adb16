"""A cell's diagnostics, before any training at that level: its goal sets, how many candidates needed a
counterweight (per azimuth interval), reach only and the reach without balance on the test goals, the best constant
offset (Adam through the layer, chosen on the selection goals) and per-goal optimisation (the first test goals).
The cell is kept only if it keeps the task's properties (``learning.counterweight.distribution.PROPERTIES``)."""

from __future__ import annotations

import torch

from learning.counterweight.distribution import PROPERTIES
from learning.counterweight.methods import make_policy, train_best_constant
from learning.counterweight.online import optimise_offsets
from learning.counterweight.problem import CounterweightProblem
from learning.counterweight.study.design import Cell, StudyCfg
from learning.counterweight.study.regions import cell_goal_sets


@torch.no_grad()
def _success(problem: CounterweightProblem, goals: torch.Tensor, outputs, layer: str = "body") -> torch.Tensor:
    outcome = problem.outcome(problem.solve(goals, outputs, layer))
    return outcome.reached if layer == "no_balance" else outcome.success


def _rate(mask: torch.Tensor) -> float:
    return float(mask.double().mean())


def cell_diagnostics(problem: CounterweightProblem, cfg: StudyCfg, cell: Cell) -> dict:
    """``{"goal_sets": {name: {...}}, "diagnostics": {...}}`` of ``cell`` (``problem`` at its tolerance)."""
    sets = cell_goal_sets(problem, cfg, cell)
    dtype = problem.tree.joint_lower.dtype
    test = sets["test"]["goals"].to(dtype)
    experiment = cfg.experiment(cell)
    constant = train_best_constant(problem, experiment, sets["train"]["goals"], sets["selection"]["goals"])
    policy = make_policy("constant", problem, experiment)
    policy.load_state_dict(constant.state)
    with torch.no_grad():
        constant_success = _success(problem, test, policy(test))
    subset = test[: cfg.sizes.per_goal]
    with torch.enable_grad():
        offsets = optimise_offsets(problem, subset, cfg.baselines, cfg.train.output_penalty)
    per_goal = _success(problem, subset, offsets)
    row = {
        "reach_only": _rate(_success(problem, test, None)),
        "no_balance": _rate(_success(problem, test, None, "no_balance")),
        "best_constant": _rate(constant_success),
        "best_constant_per_goal": constant_success.tolist(),
        "per_goal": _rate(per_goal),
        "per_goal_goals": len(subset),
        "candidates": {name: s["candidates"] for name, s in sets.items()},
        "kept": {name: len(s["goals"]) / s["candidates"] for name, s in sets.items()},
        "kept_by_interval": sets["train"]["kept_by_interval"],
        "test_front_share": _rate(sets["test"]["arc"] == 0),
    }
    row["properties"] = {
        f"{key} {op} {threshold}": (row[key] <= threshold if op == "<=" else row[key] >= threshold)
        for key, op, threshold in PROPERTIES
    }
    row["kept_cell"] = all(row["properties"].values())
    return {"goal_sets": sets, "diagnostics": row}
