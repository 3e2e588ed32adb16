"""Training one yaw predictor for one seed: through the IK layer (no labels) or regressed to teacher labels.

``Trainer`` is step-wise so that the experiment runs it to completion and the viewer runs it in a background
thread, publishing frozen snapshots. Independent validation (64-step IK on the validation split, mean cost with
failures penalised) selects the checkpoint.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from kinematics import KinematicsLayer
from kinematics.errors import ConfigError
from learning.baselines import ik_layer
from learning.checkpoints import save_checkpoint
from learning.config import ExperimentCfg
from learning.evolution import es_gradient
from learning.predictors import YawPolicy, build_predictor
from learning.scoring import score_yaws
from learning.splits import GoalSet
from learning.task import failure_penalty, grasp_pose, smooth_cost

TRAINED_METHODS = ("shared_constant", "ik_trained", "teacher_supervised", "zero_order")


@dataclass
class TrainingHistory:
    """Loss per step and validation metrics at each validation step."""

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    val_steps: list[int] = field(default_factory=list)
    val_ik_evaluations: list[int] = field(default_factory=list)  # training IK evaluations spent at each validation
    val_success: list[float] = field(default_factory=list)
    val_cost: list[float] = field(default_factory=list)
    val_displacement: list[float] = field(default_factory=list)
    best_step: int = 0
    best_val_cost: float = math.inf
    ik_evaluations: int = 0  # IK solves spent on training steps (validation excluded)
    seconds: float = 0.0  # wall time spent in training steps (validation excluded)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class Trainer:
    """One method, one seed. ``step()`` takes one optimiser step; ``validate()`` scores the validation split."""

    def __init__(
        self,
        method: str,
        cfg: ExperimentCfg,
        kinematics: KinematicsLayer,
        train: GoalSet,
        validation: GoalSet,
        seed: int,
        labels: torch.Tensor | None = None,
    ) -> None:
        if method not in TRAINED_METHODS:
            raise ConfigError(f"unknown trained method {method!r}; choose one of {TRAINED_METHODS}")
        if method == "teacher_supervised" and labels is None:
            raise ConfigError("teacher_supervised training needs teacher labels (N, 2)")
        self.method, self.cfg, self.kinematics, self.seed = method, cfg, kinematics, seed
        self.train_set, self.validation_set, self.labels = train, validation, labels
        torch.manual_seed(seed)
        self.generator = torch.Generator().manual_seed(seed)
        predictor = build_predictor(method, kinematics.dof, cfg.train.hidden).to(kinematics.device, kinematics.dtype)
        self.policy = YawPolicy(predictor, kinematics, cfg.workspace)
        self.total_steps = self.steps_for(method, cfg)
        lr = {"shared_constant": 10 * cfg.train.learning_rate, "zero_order": cfg.train.es_learning_rate}.get(
            method, cfg.train.learning_rate
        )
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=lr)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            lambda k: 0.5 * (1 + math.cos(math.pi * min(k, self.total_steps) / max(self.total_steps, 1))),
        )
        self.train_ik = ik_layer(kinematics, cfg.train.ik_iterations)
        self.eval_ik = ik_layer(kinematics, cfg.eval_ik_iterations)
        self.penalty = failure_penalty(kinematics)
        self.history = TrainingHistory()
        self.best_state = copy.deepcopy(self.policy.predictor.state_dict())
        self.step_count = 0

    @staticmethod
    def steps_for(method: str, cfg: ExperimentCfg) -> int:
        """Optimiser steps; the zero-order trainer gets the IK-trained predictor's IK-evaluation budget."""
        t = cfg.train
        return {
            "shared_constant": t.constant_steps,
            "ik_trained": t.steps,
            "teacher_supervised": t.supervised_steps,
            "zero_order": math.ceil(t.steps * t.batch_size / (2 * t.es_pairs * t.es_batch_size)),
        }[method]

    @property
    def validation_interval(self) -> int:
        """Steps between validations; for the zero-order trainer, the same IK-evaluation spacing as the IK one."""
        t = self.cfg.train
        if self.method == "zero_order":
            return max(1, round(t.validate_every * t.batch_size / (2 * t.es_pairs * t.es_batch_size)))
        return t.validate_every

    @property
    def done(self) -> bool:
        return self.step_count >= self.total_steps

    def loss(self, batch: GoalSet, index: torch.Tensor) -> torch.Tensor:
        yaw = self.policy(batch.p, batch.q0)
        if self.method == "teacher_supervised":
            return (1.0 - (yaw * self.labels[index]).sum(-1)).mean()
        result = self.train_ik.solve(grasp_pose(batch.p, yaw), batch.q0)
        return smooth_cost(result, batch.q0, self.cfg.weights).mean()

    def step(self) -> float:
        """One optimiser step on a random training batch; returns the batch loss."""
        started = time.perf_counter()
        self.policy.train()
        n, t = len(self.train_set), self.cfg.train
        size = t.es_batch_size if self.method == "zero_order" else t.batch_size
        index = torch.randint(n, (min(size, n),), generator=self.generator)
        batch = self.train_set.subset(index)
        self.optimizer.zero_grad(set_to_none=True)
        if self.method == "zero_order":
            gradient, value, evaluations = es_gradient(
                self.policy, self.train_ik, batch, self.cfg.weights, t.es_pairs, t.es_sigma, self.generator
            )
            offset = 0
            for param in self.policy.parameters():
                param.grad = gradient[offset : offset + param.numel()].view_as(param).clone()
                offset += param.numel()
        else:
            loss = self.loss(batch, index)
            loss.backward()
            value, evaluations = float(loss.detach()), (0 if self.method == "teacher_supervised" else len(batch))
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), t.grad_clip)
        self.optimizer.step()
        self.schedule.step()
        self.step_count += 1
        self.history.ik_evaluations += evaluations
        self.history.seconds += time.perf_counter() - started
        self.history.steps.append(self.step_count)
        self.history.loss.append(value)
        return value

    @torch.no_grad()
    def validate(self) -> dict[str, float]:
        """Score the validation split; keep the predictor if its mean cost is the best so far."""
        self.policy.eval()
        yaw = self.policy(self.validation_set.p, self.validation_set.q0)
        metrics = score_yaws(self.eval_ik, self.validation_set, yaw, self.cfg.weights, self.penalty).means()
        h = self.history
        h.val_steps.append(self.step_count)
        h.val_ik_evaluations.append(h.ik_evaluations)
        h.val_success.append(metrics["success"])
        h.val_cost.append(metrics["cost"])
        h.val_displacement.append(metrics["displacement"])
        if metrics["cost"] < h.best_val_cost:
            h.best_val_cost, h.best_step = metrics["cost"], self.step_count
            self.best_state = copy.deepcopy(self.policy.predictor.state_dict())
        return metrics

    def snapshot(self) -> YawPolicy:
        """A frozen copy of the current policy, safe to use from another thread."""
        frozen = copy.deepcopy(self.policy.predictor).eval().requires_grad_(False)
        return YawPolicy(frozen, self.kinematics, self.cfg.workspace)

    def best_policy(self) -> YawPolicy:
        predictor = build_predictor(self.method, self.kinematics.dof, self.cfg.train.hidden)
        predictor.load_state_dict(self.best_state)
        predictor.to(self.kinematics.device, self.kinematics.dtype).eval().requires_grad_(False)
        return YawPolicy(predictor, self.kinematics, self.cfg.workspace)

    def run(self, checkpoint: Path | None = None, progress=None) -> TrainingHistory:
        """Train to ``total_steps``, validating every ``validate_every`` steps and at the end."""
        self.validate()
        while not self.done:
            self.step()
            if self.step_count % self.validation_interval == 0 or self.done:
                self.validate()
            if progress is not None:
                progress(self)
        if checkpoint is not None:
            save_checkpoint(
                checkpoint, self.method, self.seed, self.cfg, self.kinematics, self.best_state, self.history
            )
        return self.history
