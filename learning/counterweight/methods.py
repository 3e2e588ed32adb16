"""The trained counterweight methods: which policy each trains, how, and the configurations its tuning tries.

- ``gradient``: the network, R^9 outputs, Adam through the layer (the paper's method);
- ``gradient_axes``: the same trainer on the 7-D hand-chosen action (an ablation; it reuses ``gradient``'s tuned
  learning rate);
- ``es``: OpenAI-ES on the network;
- ``sep_cma``: separable CMA-ES (``cmaes``) on the network;
- ``linear_cma``: full CMA-ES (``cmaes``) on ``LinearPolicy`` (a small policy, 72 weights);
- ``constant``: one R^9 offset for every goal, Adam through the layer from a few starts (``train_best_constant``:
  a diagnostic baseline, not tuned).

The zero-order methods run at two budgets: the gradient trainer's layer evaluations (``budget="evaluations"``)
and its wall time (``budget="seconds"``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch import nn

from learning.counterweight.config import ExperimentCfg
from learning.counterweight.policy import ConstantPolicy, CounterweightPolicy, LinearPolicy
from learning.counterweight.problem import R9_BLOCKS, CounterweightProblem
from learning.counterweight.training import Trained, train_gradient
from learning.counterweight.zero_order import LibraryCMA, OpenAIES, flat_weights, train_zero_order

GRADIENT_METHODS = ("gradient", "gradient_axes")
ZERO_ORDER_METHODS = ("es", "sep_cma", "linear_cma")
TUNED_METHODS = ("gradient", *ZERO_ORDER_METHODS)
BUDGETS = ("evaluations", "seconds")


def make_policy(method: str, problem: CounterweightProblem, cfg: ExperimentCfg) -> nn.Module:
    """The untrained policy of ``method`` (zero output: the rest targets)."""
    bound, shoulder = cfg.problem.offset_bound, problem.shoulder
    if method == "linear_cma":
        return LinearPolicy(shoulder, "r9", bound)
    if method == "constant":
        return ConstantPolicy(shoulder, "r9", bound)
    if method == "gradient_axes":
        return CounterweightPolicy(shoulder, cfg.train.hidden, "axes", bound)
    if method in ("gradient", "es", "sep_cma"):
        return CounterweightPolicy(shoulder, cfg.train.hidden, "r9", bound)
    raise ValueError(f"unknown counterweight method {method!r}")


def tuning_grid(method: str, cfg: ExperimentCfg) -> list[dict]:
    """The configurations ``method``'s tuning tries (the same number for every tuned method)."""
    t = cfg.tuning
    if method == "gradient":
        return [{"learning_rate": lr} for lr in t.gradient_learning_rate]
    if method == "es":
        return [{"es_sigma": sigma, "es_learning_rate": lr} for sigma, lr in t.es]
    if method == "sep_cma":
        return [{"sep_cma_sigma": sigma} for sigma in t.sep_cma_sigma]
    if method == "linear_cma":
        return [{"linear_cma_sigma": sigma} for sigma in t.linear_cma_sigma]
    raise ValueError(f"{method!r} is not tuned")


def train_best_constant(
    problem: CounterweightProblem,
    cfg: ExperimentCfg,
    train_goals: torch.Tensor,
    validation_goals: torch.Tensor,
    log: Callable[[str], None] = lambda _: None,
) -> Trained:
    """The best single R^9 offset for every goal: Adam through the layer from each of
    ``cfg.baselines.constant_starts`` (the free hand moved forward by that much), the best on validation kept."""
    b = cfg.baselines
    train_cfg = dataclasses.replace(
        cfg.train, steps=b.constant_steps, batch_size=b.constant_batch_size, learning_rate=b.constant_learning_rate
    )
    best = None
    for start in b.constant_starts:
        policy = make_policy("constant", problem, cfg)
        with torch.no_grad():
            policy.raw[R9_BLOCKS[-1][1].start] = start  # the free hand's x (the bound is near the identity here)
        trained = train_gradient(problem, policy, train_goals, validation_goals, train_cfg, 0, log)
        log(f"constant from a free-hand offset of {start:+.2f} m: validation {trained.best_validation_success:.2f}")
        if best is None or trained.best_validation_success > best.best_validation_success:
            best = trained
    return best


def evaluation_budget(cfg: ExperimentCfg) -> int:
    """The gradient trainer's layer evaluations: what the zero-order methods get at ``budget="evaluations"``."""
    return cfg.train.steps * cfg.train.batch_size


def train_method(
    method: str,
    settings: dict,
    problem: CounterweightProblem,
    cfg: ExperimentCfg,
    train_goals: torch.Tensor,
    validation_goals: torch.Tensor,
    seed: int,
    max_seconds: float | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> Trained:
    """Train ``method`` with ``settings`` (overrides of ``cfg.train`` or ``cfg.zero_order``) from ``seed``; a
    zero-order method spends ``max_seconds`` if given, else the gradient trainer's layer evaluations."""
    torch.manual_seed(seed)
    policy = make_policy(method, problem, cfg)
    if method in GRADIENT_METHODS:
        train_cfg = dataclasses.replace(cfg.train, **settings)
        return train_gradient(problem, policy, train_goals, validation_goals, train_cfg, seed, log)
    z = dataclasses.replace(cfg.zero_order, **settings)
    centre = flat_weights(policy)
    if method == "es":
        optimiser, batch = OpenAIES(centre, z.es_pairs, z.es_sigma, z.es_learning_rate, seed), z.es_batch_size
    elif method == "sep_cma":
        optimiser, batch = LibraryCMA(centre, z.sep_cma_sigma, z.sep_cma_population, True, seed), z.cma_batch_size
    elif method == "linear_cma":
        optimiser = LibraryCMA(centre, z.linear_cma_sigma, z.linear_cma_population, False, seed)
        batch = z.cma_batch_size
    else:
        raise ValueError(f"unknown counterweight method {method!r}")
    budget = {"max_seconds": max_seconds} if max_seconds is not None else {"max_evaluations": evaluation_budget(cfg)}
    return train_zero_order(
        problem,
        policy,
        optimiser,
        train_goals,
        validation_goals,
        batch,
        cfg.train.output_penalty,
        cfg.train.validate_every * cfg.train.batch_size,
        seed,
        log=log,
        **budget,
    )
