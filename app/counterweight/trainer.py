"""The counterweight policy's live trainers, shaped as ``app.shell.trainer_worker.TrainerWorker`` drives a trainer, and
the goals they train on when no run is loaded.

``learning.counterweight.training.GradientTrainer`` steps the policy through the whole-body layer and
``learning.counterweight.zero_order.ZeroOrderTrainer`` by forward solves only (the race's); this adds what the
worker reads: the step count, the loss and validation history with the layer evaluations and seconds spent at each
validation, and frozen snapshots.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from learning.common.history import TrainingHistory
from learning.counterweight.config import ExperimentCfg, TrainCfg
from learning.counterweight.goals import SPLITS, sample_split
from learning.counterweight.methods import make_policy, zero_order_optimiser
from learning.counterweight.problem import CounterweightProblem
from learning.counterweight.training import GradientTrainer
from learning.counterweight.zero_order import ZeroOrderTrainer

LIVE_TRAIN_GOALS = 64  # without a run: the live trainer's goals (a run's splits hold 256 and 64)
LIVE_VALIDATION_GOALS = 16
GOALS_JOIN_S = 60.0  # how long closing waits for a drawing of live goals to end (about 6 s on one core)


def live_goals(problem: CounterweightProblem, cfg: ExperimentCfg) -> tuple[torch.Tensor, torch.Tensor]:
    """Train and validation goals ``(n, 3)`` for the live trainer when no run's splits are loaded: drawn as the
    experiment draws its splits (the same region, each split's own seed, only goals that need a counterweight,
    half from each sector), but fewer (``LIVE_TRAIN_GOALS``, ``LIVE_VALIDATION_GOALS``): every candidate costs two
    solves (the experiment's full splits take about 13 s), and the live validation runs between the page's
    answers."""
    out = []
    for name, n in (("train", LIVE_TRAIN_GOALS), ("validation", LIVE_VALIDATION_GOALS)):
        out.append(sample_split(problem, split_generator(cfg, name), n, cfg.goals, name).goals)
    return out[0], out[1]


def split_generator(cfg: ExperimentCfg, split: str) -> torch.Generator:
    """The generator a split's live goals are drawn from (the experiment's split seed, one stream per split)."""
    return torch.Generator().manual_seed(cfg.split_seed * 100 + SPLITS.index(split))


class LiveCounterweightTrainer:
    """``trainer`` (a ``GradientTrainer`` or a ``ZeroOrderTrainer``) stepped live, validated on
    ``validation_goals`` ``(m, 3)`` (success: reached and balanced, the experiment's ``Outcome.success``)."""

    def __init__(
        self, problem: CounterweightProblem, trainer: GradientTrainer | ZeroOrderTrainer, validation_goals: torch.Tensor
    ) -> None:
        self.problem = problem
        self._trainer = trainer
        self._validation = validation_goals.to(problem.tree.joint_lower.dtype)
        self.history = TrainingHistory()
        self.step_count = 0

    @property
    def policy(self) -> nn.Module:
        return self._trainer.policy

    @property
    def evaluations_per_step(self) -> int:
        """Layer evaluations one step spends (a gradient step's batch, a generation's population times its batch)."""
        trainer = self._trainer
        return trainer.cfg.batch_size if isinstance(trainer, GradientTrainer) else trainer.evaluations_per_step

    def step(self) -> float:
        loss = self._trainer.step()
        self.step_count += 1
        self.history.steps.append(self.step_count)
        self.history.loss.append(loss)
        return loss

    def validate(self) -> float:
        """Validation success (fraction) of the current weights, recorded in the history with the layer evaluations
        and seconds the training steps spent so far (the validation's own solves are not counted)."""
        goals, policy = self._validation, self.policy
        with torch.no_grad():
            result = self.problem.solve(goals, policy(goals), "body", policy.parameterisation)
        success = float(self.problem.outcome(result).success.double().mean())
        self.history.val_steps.append(self.step_count)
        self.history.val_success.append(success)
        self.history.val_ik_evaluations.append(self._trainer.evaluations)
        self.history.val_seconds.append(self._trainer.seconds)
        return success

    def snapshot(self) -> nn.Module:
        """A frozen copy of the current policy (the page's answers read it while training goes on)."""
        return copy.deepcopy(self.policy).eval().requires_grad_(False)


def live_gradient_trainer(
    problem: CounterweightProblem,
    policy: nn.Module,
    goals: tuple[torch.Tensor, torch.Tensor],
    cfg: TrainCfg,
    seed: int,
) -> LiveCounterweightTrainer:
    """Adam through the layer on ``goals`` (train, validation)."""
    return LiveCounterweightTrainer(problem, GradientTrainer(problem, policy, goals[0], cfg, seed), goals[1])


def live_zero_order_trainer(
    problem: CounterweightProblem,
    cfg: ExperimentCfg,
    method: str,
    settings: dict,
    goals: tuple[torch.Tensor, torch.Tensor],
    seed: int,
) -> LiveCounterweightTrainer:
    """``method`` (one of the study's zero-order methods) with ``settings`` on ``goals`` (train, validation), from
    the seed's initial weights (``make_policy``: zero output)."""
    with torch.random.fork_rng():  # the seed's weights, without touching the process's generator
        torch.manual_seed(seed)
        policy = make_policy(method, problem, cfg)
    optimiser, batch = zero_order_optimiser(method, settings, cfg, policy, seed)
    trainer = ZeroOrderTrainer(problem, policy, optimiser, goals[0], batch, cfg.train.output_penalty, seed)
    return LiveCounterweightTrainer(problem, trainer, goals[1])
