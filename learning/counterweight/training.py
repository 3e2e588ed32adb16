"""Training a counterweight policy through the whole-body layer (gradients), and the loss every trainer shares.

One *layer evaluation* is one goal's whole-body solve; the gradient trainer spends ``batch_size`` per step (each
with its backward). Its checkpoints, and their selection solves charged to its budget, are
``learning.counterweight.selection``'s, as for every trainer.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import nn

from learning.counterweight.config import TrainCfg
from learning.counterweight.problem import HAND, CounterweightProblem
from learning.counterweight.selection import Checkpoints, Trained, train_with_checkpoints, with_checkpoints


def reach_loss(
    problem: CounterweightProblem, goals: torch.Tensor, outputs: torch.Tensor, parameterisation: str, penalty: float
) -> torch.Tensor:
    """Per goal: the final hand error squared (m^2) through the layer plus ``penalty * |outputs|^2``."""
    result = problem.solve(goals, outputs, "body", parameterisation)
    return result.residuals[HAND].square().sum(-1) + penalty * outputs.square().sum(-1)


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
    checkpoints: Checkpoints,
    cfg: TrainCfg,
    seed: int,
    max_evaluations: int | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> Trained:
    """Adam steps through the layer until ``max_evaluations`` (selection included; default: ``cfg.steps`` steps
    and their checkpoints) are spent."""
    trainer = GradientTrainer(problem, policy, train_goals, cfg, seed)
    if max_evaluations is None:
        max_evaluations = with_checkpoints(cfg.steps * cfg.batch_size, checkpoints.every, checkpoints.cost)
    return train_with_checkpoints(
        policy, trainer.step, cfg.batch_size, checkpoints, max_evaluations, log=log, name=f"gradient seed {seed}"
    )
