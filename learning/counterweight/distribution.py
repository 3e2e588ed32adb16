"""The task's diagnostics, before any training of a policy: on every split, how many sampled goals needed a
counterweight (were kept), and how reach only and the reach without balance do on the kept ones; on the IID test
split, the best single constant R^9 offset (Adam through the layer on the training goals, its checkpoint chosen
on validation) and per-goal optimisation. The task tests the claim only if it keeps ``PROPERTIES``: reach only
fails, the reach without balance succeeds, no constant solves it, and per-goal optimisation does."""

from __future__ import annotations

from collections.abc import Callable

import torch

from learning.counterweight.config import ExperimentCfg
from learning.counterweight.goals import TEST_SPLITS, SplitGoals
from learning.counterweight.methods import make_policy, train_best_constant
from learning.counterweight.online import optimise_offsets
from learning.counterweight.problem import CounterweightProblem

# (key, comparison, threshold) on the IID test split
PROPERTIES = (
    ("reach_only", "<=", 0.10),
    ("no_balance", ">=", 0.95),
    ("best_constant", "<=", 0.50),
    ("per_goal", ">=", 0.90),
)


def _rate(mask: torch.Tensor) -> float:
    return float(mask.double().mean()) if mask.numel() else float("nan")


@torch.no_grad()
def _success(problem: CounterweightProblem, goals: torch.Tensor, outputs, layer: str = "body") -> torch.Tensor:
    outcome = problem.outcome(problem.solve(goals, outputs, layer))
    return outcome.reached if layer == "no_balance" else outcome.success


def distribution_check(
    problem: CounterweightProblem,
    cfg: ExperimentCfg,
    splits: dict[str, SplitGoals],
    log: Callable[[str], None] = lambda _: None,
) -> tuple[dict, dict]:
    """``(check, constant_state)``: the diagnostics (per split, then ``"iid"`` with the properties) and the best
    constant's weights (the report's ``constant`` method)."""
    dtype = problem.tree.joint_lower.dtype
    check: dict = {"splits": {}}
    for name, split in splits.items():
        goals = split.goals.to(dtype)
        row = {
            "goals": len(goals),
            "candidates": split.candidates,
            "kept": len(goals) / max(split.candidates, 1),
            "front_share": _rate(split.sector == 0),
        }
        if name in TEST_SPLITS:
            row["reach_only"] = _rate(_success(problem, goals, None))
            row["no_balance"] = _rate(_success(problem, goals, None, "no_balance"))
        check["splits"][name] = row
    iid = splits["test_iid"]
    goals = iid.goals.to(dtype)
    constant = train_best_constant(problem, cfg, splits["train"].goals, splits["validation"].goals, log)
    policy = make_policy("constant", problem, cfg)
    policy.load_state_dict(constant.state)
    with torch.no_grad():
        constant_success = _success(problem, goals, policy(goals))
    subset = goals[: cfg.baselines.online_goals]
    with torch.enable_grad():
        offsets = optimise_offsets(problem, subset, cfg.baselines, cfg.train.output_penalty)
    per_goal = _success(problem, subset, offsets)
    iid_row = {
        "reach_only": check["splits"]["test_iid"]["reach_only"],
        "no_balance": check["splits"]["test_iid"]["no_balance"],
        "best_constant": _rate(constant_success),
        "best_constant_by_sector": {
            sector: _rate(constant_success[iid.sector == index]) for index, sector in enumerate(("front", "behind"))
        },
        "best_constant_offset": [float(v) for v in policy(goals[:1]).detach()[0]],
        "per_goal": _rate(per_goal),
        "per_goal_goals": len(subset),
    }
    iid_row["properties"] = {
        f"{key} {op} {threshold}": (iid_row[key] <= threshold if op == "<=" else iid_row[key] >= threshold)
        for key, op, threshold in PROPERTIES
    }
    check["iid"] = iid_row
    return check, constant.state
