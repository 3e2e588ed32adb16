"""Training one yaw predictor for one seed: through the IK layer (no labels) or regressed to teacher labels.

``Trainer`` is step-wise so that the experiment runs it to completion and the viewer runs it in a background
thread, publishing frozen snapshots. Independent validation (64-step IK on the validation split, mean cost with
failures penalised) selects the checkpoint.
"""

from __future__ import annotations

import copy
import math
import time

import torch

from kinematics import KinematicsLayer
from kinematics.errors import ConfigError
from learning.common.history import TrainingHistory
from learning.grasp_yaw.baselines import ik_layer
from learning.grasp_yaw.config import ExperimentCfg
from learning.grasp_yaw.evolution import es_gradient
from learning.grasp_yaw.predictors import YawPolicy, build_predictor
from learning.grasp_yaw.scoring import score_yaws
from learning.grasp_yaw.splits import GoalSet
from learning.grasp_yaw.task import CostWeights, failure_penalty, grasp_pose, smooth_cost

TRAINED_METHODS = (
    "shared_constant",
    "ik_trained",
    "ik_trained_one_yaw",
    "teacher_supervised",
    "zero_order",
    "zero_order_wall_time",
)
ZERO_ORDER = ("zero_order", "zero_order_wall_time")


def hypotheses_loss(policy: YawPolicy, ik, batch: GoalSet, weights: CostWeights, penalty: float) -> torch.Tensor:
    """Winner-takes-all over the network's ``K`` yaw hypotheses, all solved in one IK batch: per goal, only the
    cheapest (failed solves penalised by ``penalty``) takes the cost gradient; returns the winners' mean cost."""
    yaw = policy.predictor(policy.features(batch.p, batch.q0), batch.p)
    n, k = yaw.shape[:2]
    p = batch.p[:, None, :].expand(n, k, 3).reshape(-1, 3)
    q0 = batch.q0[:, None, :].expand(n, k, batch.q0.shape[-1]).reshape(n * k, -1)
    result = ik.solve(grasp_pose(p, yaw.reshape(-1, 2)), q0)
    smooth = smooth_cost(result, q0, weights).reshape(n, k)
    best = (smooth.detach() + penalty * (~result.success).reshape(n, k).to(smooth.dtype)).argmin(-1)
    return smooth.gather(1, best[:, None]).mean()


class Trainer:
    """One method, one seed. ``step()`` takes one optimiser step; ``validate()`` scores the validation split.

    Every method trains for a number of steps except ``zero_order_wall_time``, which trains for ``time_budget``
    seconds of training steps (its learning-rate schedule runs on the fraction of them spent).
    """

    def __init__(
        self,
        method: str,
        cfg: ExperimentCfg,
        kinematics: KinematicsLayer,
        train: GoalSet,
        validation: GoalSet,
        seed: int,
        labels: torch.Tensor | None = None,
        time_budget: float | None = None,
    ) -> None:
        if method not in TRAINED_METHODS:
            raise ConfigError(f"unknown trained method {method!r}; choose one of {TRAINED_METHODS}")
        if method == "teacher_supervised" and labels is None:
            raise ConfigError("teacher_supervised training needs teacher labels (N, 2)")
        if (method == "zero_order_wall_time") != (time_budget is not None):
            raise ConfigError("zero_order_wall_time, and only it, trains for a time budget (seconds)")
        self.time_budget = time_budget
        self.method, self.cfg, self.kinematics, self.seed = method, cfg, kinematics, seed
        self.train_set, self.validation_set, self.labels = train, validation, labels
        torch.manual_seed(seed)
        self.generator = torch.Generator().manual_seed(seed)
        predictor = build_predictor(method, kinematics, cfg).to(kinematics.device, kinematics.dtype)
        self.policy = YawPolicy(predictor, kinematics, cfg)
        self.total_steps = self.steps_for(method, cfg)
        self.history = TrainingHistory()
        lr = {
            "shared_constant": cfg.train.constant_learning_rate,
            **dict.fromkeys(ZERO_ORDER, cfg.train.es_learning_rate),
        }
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=lr.get(method, cfg.train.learning_rate))
        cosine = cfg.train.lr_schedule == "cosine"
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda k: 0.5 * (1 + math.cos(math.pi * self.budget_spent(k))) if cosine else 1.0
        )
        self.train_ik = ik_layer(kinematics, cfg.train.ik_iterations)
        self.eval_ik = ik_layer(kinematics, cfg.eval_ik_iterations)
        self.penalty = failure_penalty(kinematics)
        self.best_state = copy.deepcopy(self.policy.predictor.state_dict())
        self.step_count = 0

    @staticmethod
    def steps_for(method: str, cfg: ExperimentCfg) -> int | None:
        """Optimiser steps (None for the time-budgeted trainer); the zero-order trainer gets the one-yaw
        IK-trained predictor's IK-evaluation budget: the same network, trained with gradients through IK."""
        t = cfg.train
        return {
            "shared_constant": t.constant_steps,
            "ik_trained": t.steps,
            "ik_trained_one_yaw": t.steps,
            "teacher_supervised": t.supervised_steps,
            "zero_order": math.ceil(t.steps * t.batch_size / (2 * t.es_pairs * t.es_batch_size)),
            "zero_order_wall_time": None,
        }[method]

    def budget_spent(self, k: int) -> float:
        """Fraction of the training budget spent after ``k`` steps: steps, or seconds for a time budget."""
        if self.time_budget is not None:
            return min(self.history.seconds / self.time_budget, 1.0)
        return min(k, self.total_steps) / max(self.total_steps, 1)

    @property
    def validation_interval(self) -> int:
        """Steps between validations; for the zero-order trainers, the same IK-evaluation spacing as the IK one."""
        t = self.cfg.train
        if self.method in ZERO_ORDER:
            return max(1, round(t.validate_every * t.batch_size / (2 * t.es_pairs * t.es_batch_size)))
        return t.validate_every

    @property
    def done(self) -> bool:
        if self.time_budget is not None:
            return self.history.seconds >= self.time_budget
        return self.step_count >= self.total_steps

    def loss(self, batch: GoalSet, index: torch.Tensor) -> tuple[torch.Tensor, float, int]:
        """The batch loss, the value the history records, and the IK evaluations spent."""
        if self.method == "ik_trained" and self.cfg.train.hypotheses > 1:
            loss = hypotheses_loss(self.policy, self.train_ik, batch, self.cfg.weights, self.penalty)
            return loss, float(loss.detach()), len(batch) * self.cfg.train.hypotheses
        yaw = self.policy(batch.p, batch.q0)
        if self.method == "teacher_supervised":
            loss = (1.0 - (yaw * self.labels[index]).sum(-1)).mean()
            return loss, float(loss.detach()), 0
        result = self.train_ik.solve(grasp_pose(batch.p, yaw), batch.q0)
        loss = smooth_cost(result, batch.q0, self.cfg.weights).mean()
        return loss, float(loss.detach()), len(batch)

    def step(self) -> float:
        """One optimiser step on a random training batch; returns the batch loss."""
        started = time.perf_counter()
        self.policy.train()
        n, t = len(self.train_set), self.cfg.train
        size = t.es_batch_size if self.method in ZERO_ORDER else t.batch_size
        index = torch.randint(n, (min(size, n),), generator=self.generator)
        batch = self.train_set.subset(index)
        self.optimizer.zero_grad(set_to_none=True)
        if self.method in ZERO_ORDER:
            gradient, value, evaluations = es_gradient(
                self.policy, self.train_ik, batch, self.cfg.weights, t.es_pairs, t.es_sigma, self.generator
            )
            offset = 0
            for param in self.policy.parameters():
                param.grad = gradient[offset : offset + param.numel()].view_as(param).clone()
                offset += param.numel()
        else:
            loss, value, evaluations = self.loss(batch, index)
            loss.backward()
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
        h.val_seconds.append(h.seconds)
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
        return YawPolicy(frozen, self.kinematics, self.cfg)

    def best_policy(self) -> YawPolicy:
        predictor = build_predictor(self.method, self.kinematics, self.cfg)
        predictor.load_state_dict(self.best_state)
        predictor.to(self.kinematics.device, self.kinematics.dtype).eval().requires_grad_(False)
        return YawPolicy(predictor, self.kinematics, self.cfg)

    def run(self, progress=None) -> TrainingHistory:
        """Train to ``total_steps``, validating every ``validate_every`` steps and at the end; the predictor at
        every validation is kept in ``validation_states`` (for per-split learning curves)."""
        self.validation_states = []

        def validate() -> None:
            self.validate()
            self.validation_states.append(copy.deepcopy(self.policy.predictor.state_dict()))

        validate()
        while not self.done:
            self.step()
            if self.step_count % self.validation_interval == 0 or self.done:
                validate()
            if progress is not None:
                progress(self)
        return self.history

    def result(self) -> dict:
        """After ``run``: what its checkpoint keeps (``save_checkpoint``), on the CPU, as a grid job's result."""

        def cpu(state: dict) -> dict:
            return {name: tensor.detach().cpu() for name, tensor in state.items()}

        return {
            "state_dict": cpu(self.best_state),
            "history": self.history.to_dict(),
            "validation_states": [cpu(state) for state in self.validation_states],
        }
