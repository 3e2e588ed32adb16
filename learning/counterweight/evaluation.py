"""Every method, checked by the same final whole-body solve, on every test split.

Methods: ``reach_only`` (the body at its rest targets), ``rule`` (a hand-written counterweight: the free hand
moved away from the goal), ``constant`` (the best single R^9 offset), the trained policies (one per seed:
``gradient``, the ``gradient_axes`` ablation, and each zero-order method at equal layer evaluations and at equal
wall time, ``<method>_evaluations`` / ``<method>_seconds``; each as its selected checkpoint and as its last iterate,
``<key>_last``), ``online`` (per-goal optimisation through the layer),
``free_body`` (the body tasks removed: the whole body free under the same constraints) and ``no_balance`` (the rest
targets without the polygon constraint: an upper bound, whose success does not ask for balance). Latency is per
goal: the policy or rule, or the whole per-goal optimisation, plus the final solve, on this process's CPU threads.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import nn

from learning.counterweight.config import ExperimentCfg
from learning.counterweight.goals import SECTORS, SplitGoals
from learning.counterweight.methods import BUDGETS, ZERO_ORDER_METHODS
from learning.counterweight.online import optimise_offsets
from learning.counterweight.problem import R9_BLOCKS, R9_SIZE, CounterweightProblem

POLICY_METHODS = ("gradient", "gradient_axes", *(f"{m}_{b}" for m in ZERO_ORDER_METHODS for b in BUDGETS))


def last_key(key: str) -> str:
    """The name of a trained method's last iterate (``key`` alone names its selected checkpoint)."""
    return f"{key}_last"


TRAINED_ROWS = tuple(row for key in POLICY_METHODS for row in (key, last_key(key)))
METHODS = ("reach_only", "rule", "constant", *TRAINED_ROWS, "online", "free_body", "no_balance")
RULE_OFFSET_M = 0.3  # how far the rule moves the free hand


def counterweight_rule(problem: CounterweightProblem, goals: torch.Tensor) -> torch.Tensor:
    """The hand-written rule as an R^9 offset ``(B, 18)``: the free hand moved ``RULE_OFFSET_M`` horizontally away
    from the goal (as seen from the shoulder); everything else at rest."""
    away = -(goals - problem.shoulder.to(goals))[:, :2]
    offsets = goals.new_zeros(len(goals), R9_SIZE)
    hand = R9_BLOCKS[-1][1]
    offsets[:, hand.start : hand.start + 2] = RULE_OFFSET_M * away / away.norm(dim=-1, keepdim=True)
    return offsets


def _metrics(problem: CounterweightProblem, result, seconds: float, balance_required: bool) -> dict:
    outcome = problem.outcome(result)
    success = outcome.success if balance_required else outcome.reached
    return {
        "success": float(success.double().mean()),
        "reached": float(outcome.reached.double().mean()),
        "balanced": float(outcome.balanced.double().mean()),
        "hand_error_median_mm": 1e3 * float(outcome.hand_error.median()),
        "balance_margin_median_mm": 1e3 * float(outcome.balance_margin.median()),
        "latency_ms": 1e3 * seconds / len(result.q),
        "per_goal_success": [bool(v) for v in success],
    }


def evaluate_method(
    problem: CounterweightProblem,
    goals: torch.Tensor,
    choose: Callable[[torch.Tensor], torch.Tensor | None],
    layer: str = "body",
    balance_required: bool = True,
    parameterisation: str = "r9",
) -> tuple[dict, torch.Tensor]:
    """``choose(goals) -> outputs`` (or ``None`` for rest); the final solve on ``layer``; metrics and ``q``."""
    start = time.perf_counter()
    with torch.no_grad():
        outputs = choose(goals)
        result = problem.solve(goals, outputs, layer, parameterisation)
    seconds = time.perf_counter() - start
    return _metrics(problem, result, seconds, balance_required), result.q


def per_goal_chooser(problem: CounterweightProblem, cfg: ExperimentCfg):
    def choose(goals: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            return optimise_offsets(problem, goals, cfg.baselines, cfg.train.output_penalty)

    return choose


def choosers(problem: CounterweightProblem, cfg: ExperimentCfg, policies: dict[str, list[nn.Module]]) -> dict:
    """Every method's runs: ``(seed index or None, chooser, layer, balance required, parameterisation)``."""
    out = {
        "reach_only": [(None, lambda g: None, "body", True, "r9")],
        "rule": [(None, lambda g: counterweight_rule(problem, g), "body", True, "r9")],
    }
    for name in ("constant", *TRAINED_ROWS):
        out[name] = [(k, p, "body", True, p.parameterisation) for k, p in enumerate(policies.get(name, []))]
    out["online"] = [(None, per_goal_chooser(problem, cfg), "body", True, "r9")]
    out["free_body"] = [(None, lambda g: None, "free", True, "r9")]
    out["no_balance"] = [(None, lambda g: None, "no_balance", False, "r9")]
    return out


def evaluate_splits(
    problem: CounterweightProblem,
    cfg: ExperimentCfg,
    splits: dict[str, SplitGoals],
    policies: dict[str, list[nn.Module]],
    log: Callable[[str], None] = lambda _: None,
) -> dict:
    """``{split: {method: [metrics per seed]}}``; online runs on the split's first ``cfg.baselines.online_goals``
    goals."""
    dtype = problem.tree.joint_lower.dtype
    out = {}
    for split_name, split in splits.items():
        goals = split.goals.to(dtype)
        out[split_name] = {}
        for method, runs in choosers(problem, cfg, policies).items():
            subset = goals[: cfg.baselines.online_goals] if method == "online" else goals
            results = []
            sector = split.sector[: len(subset)]
            for seed, choose, layer, balance, parameterisation in runs:
                metrics, _ = evaluate_method(problem, subset, choose, layer, balance, parameterisation)
                metrics["seed"], metrics["goals"] = seed, len(subset)
                success = torch.tensor(metrics["per_goal_success"])
                for index, name in enumerate(SECTORS):
                    inside = sector == index
                    metrics[f"success_{name}"] = float(success[inside].double().mean()) if inside.any() else None
                results.append(metrics)
            if results:
                out[split_name][method] = results
                log(f"{split_name} {method}: success {sum(r['success'] for r in results) / len(results):.2f}")
    return out


@torch.no_grad()
def body_response(problem: CounterweightProblem, goals: torch.Tensor, outputs: torch.Tensor | None) -> dict:
    """What a body choice does at the final pose, per goal: the pelvis's and the free hand's displacement from
    rest and the centre of mass's ground shift (m, world x and y)."""
    tree, robot = problem.tree, problem.robot
    q = problem.solve(goals, outputs, "body").q
    state, rest = tree.forward_kinematics(q), tree.forward_kinematics(problem.q_stand)
    out = {}
    for key, frame in (("pelvis", robot.frames["pelvis"]), ("free_hand", robot.frames["left_hand"])):
        out[key] = (tree.frame_pose(state, frame)[..., :2, 3] - tree.frame_pose(rest, frame)[:2, 3]).tolist()
    out["com"] = (tree.center_of_mass(state)[..., :2] - tree.center_of_mass(rest)[:2]).tolist()
    return out
