"""The counterweight policy's live trainer, shaped as ``app.trainer_worker.TrainerWorker`` drives a trainer.

``learning.counterweight.training.GradientTrainer`` steps the policy through the whole-body layer; this adds what
the worker reads: the step count, the loss and validation history, validation and frozen snapshots.
"""

from __future__ import annotations

import copy

import torch

from learning.counterweight.config import TrainCfg
from learning.counterweight.policy import CounterweightPolicy
from learning.counterweight.problem import CounterweightProblem
from learning.counterweight.training import GradientTrainer
from learning.training import TrainingHistory


class LiveCounterweightTrainer:
    """A ``GradientTrainer`` on ``train_goals`` ``(n, 3)``, validated on ``validation_goals`` ``(m, 3)`` (success:
    reached and balanced, the experiment's ``Outcome.success``)."""

    def __init__(
        self,
        problem: CounterweightProblem,
        train_goals: torch.Tensor,
        validation_goals: torch.Tensor,
        cfg: TrainCfg,
        seed: int,
    ) -> None:
        self.problem = problem
        self._trainer = GradientTrainer(problem, train_goals, cfg, seed)
        self._validation = validation_goals.to(problem.tree.joint_lower.dtype)
        self.history = TrainingHistory()
        self.step_count = 0

    @property
    def policy(self) -> CounterweightPolicy:
        return self._trainer.policy

    def step(self) -> float:
        loss = self._trainer.step()
        self.step_count += 1
        self.history.steps.append(self.step_count)
        self.history.loss.append(loss)
        return loss

    def validate(self) -> float:
        """Validation success (fraction) of the current weights, recorded in the history."""
        goals = self._validation
        with torch.no_grad():
            outcome = self.problem.outcome(self.problem.solve(goals, self.policy(goals), "body"))
        success = float(outcome.success.double().mean())
        self.history.val_steps.append(self.step_count)
        self.history.val_success.append(success)
        return success

    def snapshot(self) -> CounterweightPolicy:
        """A frozen copy of the current policy (the page's answers read it while training goes on)."""
        return copy.deepcopy(self.policy).eval().requires_grad_(False)
