"""The trained counterweight methods: which policy each trains, how, and the configurations its tuning tries.

- ``gradient``: the network, R^9 outputs, Adam through the layer (the paper's method);
- ``gradient_axes``: the same trainer on the 7-D hand-chosen action (an ablation; it reuses ``gradient``'s tuned
  learning rate);
- ``es``: OpenAI-ES on the network;
- ``sep_cma``: separable CMA-ES (``cmaes``) on the network;
- ``linear_cma``: full CMA-ES (``cmaes``) on ``LinearPolicy`` (a small policy, 72 weights);
- ``pgpe``: PGPE with ClipUp (EvoTorch) on the network (the study's);
- ``gradient_implicit``: ``gradient``'s trainer on a problem whose layer differentiates implicitly (the study's;
  the caller passes that problem);
- ``constant``: one R^9 offset for every goal, Adam through the layer from a few starts (``train_best_constant``:
  a diagnostic baseline, not tuned).

The zero-order methods run at two budgets: the gradient trainer's layer evaluations (``budget="evaluations"``)
and its wall time (``budget="seconds"``). Every budget includes the run's selection solves
(``learning.counterweight.selection``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch import nn

from learning.counterweight.config import ExperimentCfg
from learning.counterweight.policy import ConstantPolicy, CounterweightPolicy, LinearPolicy
from learning.counterweight.problem import R9_BLOCKS, CounterweightProblem
from learning.counterweight.selection import Checkpoints, Trained, with_checkpoints
from learning.counterweight.training import train_gradient
from learning.counterweight.zero_order import PGPE, LibraryCMA, OpenAIES, flat_weights, train_zero_order

GRADIENT_METHODS = ("gradient", "gradient_axes", "gradient_implicit")
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
    if method in ("gradient", "gradient_implicit", "es", "sep_cma", "pgpe"):
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


def checkpoints_for(
    problem: CounterweightProblem,
    cfg: ExperimentCfg,
    selection_goals: torch.Tensor,
    probe_goals: torch.Tensor | None = None,
    probe_dense: int | None = None,
) -> Checkpoints:
    """A run's checkpoints: the selection goals solved every ``validate_every * batch_size`` training evaluations
    of ``cfg.train`` (the same for every method, whatever its own batch); ``probe_goals`` at all of them, or as
    ``Checkpoints`` says with ``probe_dense``."""
    every = cfg.train.validate_every * cfg.train.batch_size
    return Checkpoints(problem, selection_goals, every, probe_goals, probe_dense)


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
        checkpoints = Checkpoints(problem, validation_goals, train_cfg.validate_every * train_cfg.batch_size)
        trained = train_gradient(problem, policy, train_goals, checkpoints, train_cfg, 0, log=log)
        log(f"constant from a free-hand offset of {start:+.2f} m: validation {trained.best_validation_success:.2f}")
        if best is None or trained.best_validation_success > best.best_validation_success:
            best = trained
    return best


def evaluation_budget(cfg: ExperimentCfg, selection_goals: int) -> int:
    """The gradient trainer's layer evaluations, its checkpoints' ``selection_goals`` solves included: what every
    method gets at ``budget="evaluations"``."""
    train = cfg.train
    return with_checkpoints(train.steps * train.batch_size, train.validate_every * train.batch_size, selection_goals)


def zero_order_optimiser(
    method: str, settings: dict, cfg: ExperimentCfg, policy: nn.Module, seed: int
) -> tuple[OpenAIES | LibraryCMA | PGPE, int]:
    """``method``'s optimiser of ``policy``'s weights (from where they are) with ``settings`` (overrides of
    ``cfg.zero_order``), and its batch of goals per candidate."""
    z = dataclasses.replace(cfg.zero_order, **settings)
    centre = flat_weights(policy)
    if method == "es":
        return OpenAIES(centre, z.es_pairs, z.es_sigma, z.es_learning_rate, seed), z.es_batch_size
    if method == "sep_cma":
        return LibraryCMA(centre, z.sep_cma_sigma, z.sep_cma_population, True, seed), z.cma_batch_size
    if method == "linear_cma":
        return LibraryCMA(centre, z.linear_cma_sigma, z.linear_cma_population, False, seed), z.cma_batch_size
    if method == "pgpe":
        return PGPE(centre, z.pgpe_population, z.pgpe_stdev, z.pgpe_learning_rate), z.pgpe_batch_size
    raise ValueError(f"unknown counterweight method {method!r}")


def train_method(
    method: str,
    settings: dict,
    problem: CounterweightProblem,
    cfg: ExperimentCfg,
    train_goals: torch.Tensor,
    checkpoints: Checkpoints,
    seed: int,
    max_evaluations: int | None = None,
    max_seconds: float | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> Trained:
    """Train ``method`` with ``settings`` (overrides of ``cfg.train`` or ``cfg.zero_order``) from ``seed``, until
    ``max_seconds`` if given, else ``max_evaluations`` (default: the gradient trainer's), selection included."""
    torch.manual_seed(seed)
    policy = make_policy(method, problem, cfg)
    if max_seconds is None and max_evaluations is None:
        max_evaluations = evaluation_budget(cfg, checkpoints.cost)
    if method in GRADIENT_METHODS:
        if max_seconds is not None:
            raise ValueError(f"{method} trains to a budget of layer evaluations, not of seconds")
        train_cfg = dataclasses.replace(cfg.train, **settings)
        return train_gradient(problem, policy, train_goals, checkpoints, train_cfg, seed, max_evaluations, log)
    optimiser, batch = zero_order_optimiser(method, settings, cfg, policy, seed)
    budget = {"max_seconds": max_seconds} if max_seconds is not None else {"max_evaluations": max_evaluations}
    return train_zero_order(
        problem, policy, optimiser, train_goals, checkpoints, batch, cfg.train.output_penalty, seed, log=log, **budget
    )
