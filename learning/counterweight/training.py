"""Training a counterweight policy through the whole-body layer (gradients), and what every trainer shares: the
loss, the validation that keeps the best checkpoint, the learning curve.

One *layer evaluation* is one goal's whole-body solve; the gradient trainer spends ``batch_size`` per step (each
with its backward). Validation solves are counted by no trainer, and neither are their seconds. Each trainer keeps
the weights of its best validation success (ties: the lower median hand error).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from learning.counterweight.config import TrainCfg
from learning.counterweight.problem import HAND, CounterweightProblem


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
    """A trainer's best validation checkpoint, its curve, and the budget it spent."""

    state: dict
    curve: Curve
    evaluations: int
    seconds: float
    best_validation_success: float

    def to_dict(self) -> dict:
        """Tensors and plain values (a grid job's result, read back with ``weights_only=True``)."""
        return {
            "state": self.state,
            "curve": self.curve.to_dict(),
            "evaluations": self.evaluations,
            "seconds": self.seconds,
            "best_validation_success": self.best_validation_success,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Trained:
        return cls(
            data["state"], Curve(**data["curve"]), data["evaluations"], data["seconds"], data["best_validation_success"]
        )


def reach_loss(
    problem: CounterweightProblem, goals: torch.Tensor, outputs: torch.Tensor, parameterisation: str, penalty: float
) -> torch.Tensor:
    """Per goal: the final hand error squared (m^2) through the layer plus ``penalty * |outputs|^2``."""
    result = problem.solve(goals, outputs, "body", parameterisation)
    return result.residuals[HAND].square().sum(-1) + penalty * outputs.square().sum(-1)


class Validator:
    """Scores a policy on the validation goals, appends to the curve and keeps the best weights."""

    def __init__(self, problem: CounterweightProblem, goals: torch.Tensor) -> None:
        self.problem, self.goals = problem, goals.to(problem.tree.joint_lower.dtype)
        self.best, self.best_key = None, None

    @torch.no_grad()
    def __call__(self, policy: nn.Module, curve: Curve, evaluations: int, seconds: float, loss: float) -> None:
        result = self.problem.solve(self.goals, policy(self.goals), "body", policy.parameterisation)
        outcome = self.problem.outcome(result)
        success, error = float(outcome.success.double().mean()), float(outcome.hand_error.median())
        curve.evaluations.append(evaluations)
        curve.seconds.append(seconds)
        curve.validation_success.append(success)
        curve.validation_error.append(error)
        curve.train_loss.append(loss)
        key = (success, -error)
        if self.best_key is None or key > self.best_key:
            self.best, self.best_key = copy.deepcopy(policy.state_dict()), key

    @property
    def best_success(self) -> float:
        return self.best_key[0]


class GradientTrainer:
    """A policy and its Adam optimiser; ``step()`` trains on one batch of goals through the layer and returns the
    batch's mean loss (the viewer's live trainer and ``train_gradient`` share it)."""

    def __init__(
        self, problem: CounterweightProblem, policy: nn.Module, train_goals: torch.Tensor, cfg: TrainCfg, seed: int
    ) -> None:
        self.problem, self.policy, self.cfg = problem, policy, cfg
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.learning_rate)
        self.generator = torch.Generator().manual_seed(seed)
        self.goals = train_goals.to(problem.tree.joint_lower.dtype)
        self.evaluations, self.seconds = 0, 0.0

    def step(self) -> float:
        start = time.perf_counter()
        cfg = self.cfg
        goals = self.goals[torch.randint(len(self.goals), (cfg.batch_size,), generator=self.generator)]
        outputs = self.policy(goals)
        loss = reach_loss(self.problem, goals, outputs, self.policy.parameterisation, cfg.output_penalty).mean()
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.seconds += time.perf_counter() - start
        self.evaluations += cfg.batch_size
        return float(loss.detach())


def train_gradient(
    problem: CounterweightProblem,
    policy: nn.Module,
    train_goals: torch.Tensor,
    validation_goals: torch.Tensor,
    cfg: TrainCfg,
    seed: int,
    log: Callable[[str], None] = lambda _: None,
) -> Trained:
    """``cfg.steps`` Adam steps through the layer, validating every ``cfg.validate_every``."""
    trainer = GradientTrainer(problem, policy, train_goals, cfg, seed)
    validation, curve = Validator(problem, validation_goals), Curve()
    validation(policy, curve, 0, 0.0, float("nan"))
    for step in range(1, cfg.steps + 1):
        loss = trainer.step()
        if step % cfg.validate_every == 0 or step == cfg.steps:
            validation(policy, curve, trainer.evaluations, trainer.seconds, loss)
            log(f"gradient seed {seed} step {step}: loss {loss:.2e}, validation {curve.validation_success[-1]:.2f}")
    return Trained(validation.best, curve, trainer.evaluations, trainer.seconds, validation.best_success)
