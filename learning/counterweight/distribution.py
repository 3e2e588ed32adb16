"""Before any training: on every split, how often reach-only succeeds, how often the same reach succeeds with
the balance constraint removed, and how often it fails *because of balance* (fails with it, succeeds without)."""

from __future__ import annotations

import torch

from learning.counterweight.problem import CounterweightProblem


@torch.no_grad()
def distribution_check(problem: CounterweightProblem, splits: dict[str, torch.Tensor]) -> dict:
    dtype = problem.tree.joint_lower.dtype
    out = {}
    for split, goals in splits.items():
        goals = goals.to(dtype)
        with_balance = problem.outcome(problem.solve(goals, None, "body")).success
        without = problem.outcome(problem.solve(goals, None, "no_balance")).reached
        out[split] = {
            "goals": len(goals),
            "reach_only": float(with_balance.double().mean()),
            "no_balance": float(without.double().mean()),
            "fails_because_of_balance": float((~with_balance & without).double().mean()),
        }
    return out
