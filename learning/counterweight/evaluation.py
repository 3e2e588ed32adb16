"""Every method, checked by the same final whole-body solve, on every test split.

Methods: ``reach_only`` (the body at its rest targets), ``constant`` (one action for every goal: the free hand
all the way back), ``rule`` (the hand-written counterweight rule),
``gradient`` and ``es_evaluations`` / ``es_time`` (the trained policies, one per seed), ``online`` (per-goal
optimisation through the layer), ``free_body`` (the body tasks removed: the whole body free under the same
constraints) and ``no_balance`` (the rest targets without the polygon constraint: an upper bound, whose success
does not ask for balance). Latency is per goal: the policy or rule, or the whole per-goal optimisation, plus the
final solve, on this machine's CPU threads.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from learning.counterweight.config import ExperimentCfg
from learning.counterweight.online import optimise_actions
from learning.counterweight.policy import CounterweightPolicy, constant_counterweight, counterweight_rule
from learning.counterweight.problem import ACTIONS, CounterweightProblem

POLICY_METHODS = ("gradient", "es_evaluations", "es_time")
METHODS = ("reach_only", "constant", "rule", *POLICY_METHODS, "online", "free_body", "no_balance")


def _metrics(problem: CounterweightProblem, result, actions, seconds: float, balance_required: bool) -> dict:
    outcome = problem.outcome(result)
    success = outcome.success if balance_required else outcome.reached
    metrics = {
        "success": float(success.double().mean()),
        "reached": float(outcome.reached.double().mean()),
        "balanced": float(outcome.balanced.double().mean()),
        "hand_error_median_mm": 1e3 * float(outcome.hand_error.median()),
        "hand_error_mean_mm": 1e3 * float(outcome.hand_error.mean()),
        "balance_margin_median_mm": 1e3 * float(outcome.balance_margin.median()),
        "balance_margin_min_mm": 1e3 * float(outcome.balance_margin.min()),
        "latency_ms": 1e3 * seconds / len(result.q),
    }
    if actions is not None:
        metrics["mean_action"] = [float(v) for v in actions.mean(0)]
    return metrics


def evaluate_method(
    problem: CounterweightProblem, goals: torch.Tensor, choose: Callable[[torch.Tensor], torch.Tensor | None],
    layer: str = "body", balance_required: bool = True,
) -> tuple[dict, torch.Tensor | None]:  # fmt: skip
    """``choose(goals) -> actions`` (or ``None`` for rest); the final solve on ``layer``; metrics and actions."""
    start = time.perf_counter()
    with torch.no_grad():
        actions = choose(goals)
        result = problem.solve(goals, actions, layer)
    seconds = time.perf_counter() - start
    return _metrics(problem, result, actions, seconds, balance_required), actions


def choosers(problem: CounterweightProblem, cfg: ExperimentCfg, policies: dict[str, list[CounterweightPolicy]]):
    """Every method's chooser; the trained ones once per seed."""
    out = {
        "reach_only": [(None, lambda g: None, "body", True)],
        "constant": [(None, constant_counterweight, "body", True)],
        "rule": [(None, lambda g: counterweight_rule(g, problem.shoulder, cfg.goals), "body", True)],
    }
    for name in POLICY_METHODS:
        out[name] = [(seed, policy, "body", True) for seed, policy in enumerate(policies.get(name, []))]
    out["online"] = [(None, _online(problem, cfg), "body", True)]
    out["free_body"] = [(None, lambda g: None, "free", True)]
    out["no_balance"] = [(None, lambda g: None, "no_balance", False)]
    return out


def _online(problem: CounterweightProblem, cfg: ExperimentCfg):
    def choose(goals: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            return optimise_actions(problem, goals, cfg.baselines, cfg.train.action_penalty)

    return choose


def evaluate_splits(
    problem: CounterweightProblem,
    cfg: ExperimentCfg,
    splits: dict[str, torch.Tensor],
    policies: dict[str, list[CounterweightPolicy]],
    log: Callable[[str], None] = lambda _: None,
) -> dict:
    """``{split: {method: {"runs": [metrics per seed], "actions": ...}}}``; online runs on the split's first
    ``cfg.baselines.online_goals`` goals."""
    dtype = problem.tree.joint_lower.dtype
    out = {}
    for split, goals in splits.items():
        goals = goals.to(dtype)
        out[split] = {}
        for method, runs in choosers(problem, cfg, policies).items():
            subset = goals[: cfg.baselines.online_goals] if method == "online" else goals
            results = []
            for seed, choose, layer, balance in runs:
                metrics, _ = evaluate_method(problem, subset, choose, layer, balance)
                metrics["seed"], metrics["goals"] = seed, len(subset)
                results.append(metrics)
            if results:
                out[split][method] = results
                log(f"{split} {method}: success {sum(r['success'] for r in results) / len(results):.2f}")
    return out


def strategy(problem: CounterweightProblem, policy: CounterweightPolicy, goals: torch.Tensor) -> dict:
    """The policy's action against the goal's distance from the shoulder (the discovered strategy)."""
    dtype = problem.tree.joint_lower.dtype
    goals = goals.to(dtype)
    with torch.no_grad():
        actions = policy(goals) * problem.scale
    distance = (goals - problem.shoulder).norm(dim=-1)
    order = distance.argsort()
    return {
        "distance_m": distance[order].tolist(),
        **{ACTIONS[k]: actions[order, k].tolist() for k in range(len(ACTIONS))},
    }
