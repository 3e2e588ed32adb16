"""Training the counterweight policy: through the whole-body layer (gradients), and by evolution strategies
(zero-order, forward solves only) at the same number of layer evaluations or the same wall time.

One *layer evaluation* is one goal's whole-body solve; the gradient trainer spends ``batch_size`` per step (each
with its backward), ES spends ``2 * es_pairs * es_batch_size`` per estimate. Validation solves are counted by
neither. Each trainer keeps the weights of its best validation success (ties: the lower median hand error).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from learning.counterweight.config import TrainCfg
from learning.counterweight.policy import CounterweightPolicy
from learning.counterweight.problem import HAND, CounterweightProblem
from learning.evolution import centred_ranks


@dataclass
class Curve:
    """Validation success after ``evaluations`` layer evaluations and ``seconds`` of training."""

    evaluations: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    validation_success: list[float] = field(default_factory=list)
    validation_error: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Trained:
    state: dict
    curve: Curve
    evaluations: int
    seconds: float


def reach_loss(problem: CounterweightProblem, goals: torch.Tensor, actions: torch.Tensor, penalty: float):
    """Per goal: the final hand error squared (m^2) through the layer plus ``penalty * |action|^2``."""
    result = problem.solve(goals, actions, "body")
    return result.residuals[HAND].square().sum(-1) + penalty * actions.square().sum(-1)


class _Validator:
    def __init__(self, problem: CounterweightProblem, goals: torch.Tensor) -> None:
        self.problem, self.goals = problem, goals
        self.best, self.best_key = None, None

    @torch.no_grad()
    def __call__(self, policy: CounterweightPolicy, curve: Curve, evaluations: int, seconds: float, loss: float):
        outcome = self.problem.outcome(self.problem.solve(self.goals, policy(self.goals), "body"))
        success, error = float(outcome.success.double().mean()), float(outcome.hand_error.median())
        curve.evaluations.append(evaluations)
        curve.seconds.append(seconds)
        curve.validation_success.append(success)
        curve.validation_error.append(error)
        curve.train_loss.append(loss)
        key = (success, -error)
        if self.best_key is None or key > self.best_key:
            self.best, self.best_key = copy.deepcopy(policy.state_dict()), key


class GradientTrainer:
    """The policy and its Adam optimiser; ``step()`` trains on one batch of goals through the layer and returns
    the batch's mean loss (the viewer's live trainer and ``train_gradient`` share it)."""

    def __init__(self, problem: CounterweightProblem, train_goals: torch.Tensor, cfg: TrainCfg, seed: int) -> None:
        torch.manual_seed(seed)
        self.problem, self.cfg = problem, cfg
        self.policy = CounterweightPolicy(problem.shoulder, cfg.hidden)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=cfg.learning_rate)
        self.generator = torch.Generator().manual_seed(seed)
        self.goals = train_goals.to(problem.tree.joint_lower.dtype)
        self.evaluations, self.seconds = 0, 0.0

    def step(self) -> float:
        start = time.perf_counter()
        cfg = self.cfg
        goals = self.goals[torch.randint(len(self.goals), (cfg.batch_size,), generator=self.generator)]
        loss = reach_loss(self.problem, goals, self.policy(goals), cfg.action_penalty).mean()
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.seconds += time.perf_counter() - start
        self.evaluations += cfg.batch_size
        return float(loss.detach())


def train_gradient(
    problem: CounterweightProblem,
    train_goals: torch.Tensor,
    validation_goals: torch.Tensor,
    cfg: TrainCfg,
    seed: int,
    log: Callable[[str], None] = lambda _: None,
) -> Trained:
    trainer = GradientTrainer(problem, train_goals, cfg, seed)
    dtype = problem.tree.joint_lower.dtype
    validation, curve = _Validator(problem, validation_goals.to(dtype)), Curve()
    validation(trainer.policy, curve, 0, 0.0, float("nan"))
    for step in range(1, cfg.steps + 1):
        loss = trainer.step()
        if step % cfg.validate_every == 0 or step == cfg.steps:
            validation(trainer.policy, curve, trainer.evaluations, trainer.seconds, loss)
            log(f"gradient seed {seed} step {step}: loss {loss:.2e}, validation success "
                f"{curve.validation_success[-1]:.2f}")  # fmt: skip
    return Trained(validation.best, curve, trainer.evaluations, trainer.seconds)


def train_es(
    problem: CounterweightProblem,
    train_goals: torch.Tensor,
    validation_goals: torch.Tensor,
    cfg: TrainCfg,
    seed: int,
    max_evaluations: int | None = None,
    max_seconds: float | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> Trained:
    """OpenAI-ES (antithetic Gaussian perturbations of every weight, centred ranks, Adam on the estimate) until
    ``max_evaluations`` layer evaluations or ``max_seconds`` of training are spent."""
    if (max_evaluations is None) == (max_seconds is None):
        raise ValueError("give exactly one budget: max_evaluations or max_seconds")
    torch.manual_seed(seed)
    dtype = problem.tree.joint_lower.dtype
    policy = CounterweightPolicy(problem.shoulder, cfg.hidden)
    params = list(policy.parameters())
    optimizer = torch.optim.Adam(params, lr=cfg.es_learning_rate)
    gen = torch.Generator().manual_seed(10_000 + seed)
    train_goals, validation = train_goals.to(dtype), _Validator(problem, validation_goals.to(dtype))
    curve, evaluations, seconds = Curve(), 0, 0.0
    validation(policy, curve, 0, 0.0, float("nan"))
    per_estimate = 2 * cfg.es_pairs * cfg.es_batch_size
    validate_each = cfg.validate_every * cfg.batch_size  # the gradient trainer's validation spacing, in evaluations
    next_validation = validate_each

    def spent() -> bool:
        if max_evaluations is not None:
            return evaluations + per_estimate > max_evaluations
        return seconds >= max_seconds

    while not spent():
        start = time.perf_counter()
        with torch.no_grad():
            goals = train_goals[torch.randint(len(train_goals), (cfg.es_batch_size,), generator=gen)]
            centre = parameters_to_vector(params)
            noise = torch.randn(cfg.es_pairs, centre.numel(), generator=gen, dtype=centre.dtype)
            actions = []
            for sign in (1.0, -1.0):
                for k in range(cfg.es_pairs):
                    vector_to_parameters(centre + sign * cfg.es_sigma * noise[k], params)
                    actions.append(policy(goals))
            vector_to_parameters(centre, params)
            copies = 2 * cfg.es_pairs
            loss = reach_loss(problem, goals.repeat(copies, 1), torch.cat(actions), cfg.action_penalty)
            fitness = centred_ranks(loss.reshape(2, cfg.es_pairs, cfg.es_batch_size).mean(-1))
            estimate = ((fitness[0] - fitness[1])[:, None] * noise).sum(0) / (2 * cfg.es_pairs * cfg.es_sigma)
        for p, g in zip(params, estimate.split([p.numel() for p in params]), strict=True):
            p.grad = g.view_as(p).clone()  # the ES estimate of d(mean loss)/d(weights), for Adam
        optimizer.step()
        seconds += time.perf_counter() - start
        evaluations += per_estimate
        if evaluations >= next_validation or spent():
            next_validation += validate_each
            validation(policy, curve, evaluations, seconds, float(loss.mean()))
            log(f"es seed {seed} evaluations {evaluations}: validation success {curve.validation_success[-1]:.2f}")
    if curve.evaluations[-1] != evaluations:
        validation(policy, curve, evaluations, seconds, float("nan"))
    return Trained(validation.best, curve, evaluations, seconds)
