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


def rate(mask: torch.Tensor) -> float:
    return float(mask.double().mean()) if mask.numel() else float("nan")


@torch.no_grad()
def solved(problem: CounterweightProblem, goals: torch.Tensor, outputs, layer: str = "body") -> torch.Tensor:
    """``(n,)`` bool: success (``"no_balance"``: the hand reached, feet and limits held) of ``outputs`` on ``goals``."""
    outcome = problem.outcome(problem.solve(goals, outputs, layer))
    return outcome.reached if layer == "no_balance" else outcome.success


def constant_and_per_goal(
    problem: CounterweightProblem,
    cfg: ExperimentCfg,
    train: torch.Tensor,
    validation: torch.Tensor,
    test: torch.Tensor,
    per_goal_count: int,
    log: Callable[[str], None] = lambda _: None,
) -> tuple[object, torch.nn.Module, torch.Tensor, torch.Tensor]:
    """The two baselines that decide whether a task tests the claim: the best constant offset (trained on
    ``train``, chosen on ``validation``) and per-goal optimisation on the first ``per_goal_count`` ``test`` goals.
    Returns the constant's run, its policy, and the per-goal success of each on ``test`` and on that subset."""
    constant = train_best_constant(problem, cfg, train, validation, log)
    policy = make_policy("constant", problem, cfg)
    policy.load_state_dict(constant.state)
    with torch.no_grad():
        constant_success = solved(problem, test, policy(test))
    subset = test[:per_goal_count]
    with torch.enable_grad():
        offsets = optimise_offsets(problem, subset, cfg.baselines, cfg.train.output_penalty)
    return constant, policy, constant_success, solved(problem, subset, offsets)


def task_properties(row: dict) -> dict[str, bool]:
    """Each of ``PROPERTIES`` held by the diagnostics ``row``, by its text (``"best_constant <= 0.5"``)."""
    return {
        f"{key} {op} {threshold}": (row[key] <= threshold if op == "<=" else row[key] >= threshold)
        for key, op, threshold in PROPERTIES
    }


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
            "front_share": rate(split.sector == 0),
        }
        if name in TEST_SPLITS:
            row["reach_only"] = rate(solved(problem, goals, None))
            row["no_balance"] = rate(solved(problem, goals, None, "no_balance"))
        check["splits"][name] = row
    iid = splits["test_iid"]
    goals = iid.goals.to(dtype)
    constant, policy, constant_success, per_goal = constant_and_per_goal(
        problem, cfg, splits["train"].goals, splits["validation"].goals, goals, cfg.baselines.online_goals, log
    )
    iid_row = {
        "reach_only": check["splits"]["test_iid"]["reach_only"],
        "no_balance": check["splits"]["test_iid"]["no_balance"],
        "best_constant": rate(constant_success),
        "best_constant_by_sector": {
            sector: rate(constant_success[iid.sector == index]) for index, sector in enumerate(("front", "behind"))
        },
        "best_constant_offset": [float(v) for v in policy(goals[:1]).detach()[0]],
        "per_goal": rate(per_goal),
        "per_goal_goals": len(per_goal),
    }
    iid_row["properties"] = task_properties(iid_row)
    check["iid"] = iid_row
    return check, constant.state
