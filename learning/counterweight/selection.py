"""A training run's checkpoints, charged to its budget: what every counterweight trainer shares.

A *layer evaluation* is one goal's whole-body solve. A run's budget counts all it uses: its training evaluations
and its *selection* solves. A checkpoint is taken at the start, each time the training evaluations since the last
one reach ``every``, and at the end: the current weights are solved on the selection goals, and those solves and
their seconds are charged to the run. The run keeps the weights of its best checkpoint (the *selected* one: the best
selection success, ties the lower median hand error, then the earlier) and its last iterate.

A checkpoint can also solve *probe* goals (the test goals of a study, or the tuning goals while tuning), to measure
the run: those solves are not charged and their seconds are not counted; their per-goal success is kept, so any
budget's selected checkpoint and last iterate can be read back afterwards. With ``probe_dense`` set, only the first
``probe_dense`` checkpoints, every ``probe_every``-th after them, each newly selected one and the last are probed
(the selected checkpoint of any budget is always among them).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from learning.counterweight.problem import CounterweightProblem


@dataclass
class Curve:
    """Per checkpoint: the evaluations spent so far (training and selection), the training evaluations alone, the
    seconds spent (training and selection), the selection goals' success and median hand error (m), the training
    loss (the last step's or generation's), and the probe goals' success and median hand error (empty without
    probe goals)."""

    evaluations: list[int] = field(default_factory=list)
    training_evaluations: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    validation_success: list[float] = field(default_factory=list)
    validation_error: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    probe_success: list[float] = field(default_factory=list)  # nan where a checkpoint was not probed
    probe_error: list[float] = field(default_factory=list)
    probed: list[bool] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {key: list(value) for key, value in self.__dict__.items()}


@dataclass
class Trained:
    """A run: the selected checkpoint's weights (``state``) and the last iterate's (``last_state``), the curve, the
    budget spent (evaluations and seconds, selection included), the selected checkpoint's index in the curve and
    the probe goals' per-goal success at every checkpoint (``(checkpoints, goals)`` bool, all false where
    ``curve.probed`` is false; or ``None``)."""

    state: dict
    last_state: dict
    curve: Curve
    evaluations: int
    seconds: float
    selected: int
    probe: torch.Tensor | None = None

    @property
    def best_validation_success(self) -> float:
        return self.curve.validation_success[self.selected]

    def to_dict(self) -> dict:
        """Tensors and plain values (a grid job's result, read back with ``weights_only=True``)."""
        return {
            "state": self.state,
            "last_state": self.last_state,
            "curve": self.curve.to_dict(),
            "evaluations": self.evaluations,
            "seconds": self.seconds,
            "selected": self.selected,
            "probe": self.probe,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Trained:
        return cls(
            data["state"],
            data["last_state"],
            Curve(**data["curve"]),
            data["evaluations"],
            data["seconds"],
            data["selected"],
            data["probe"],
        )


def with_checkpoints(training_evaluations: int, every: int, cost: int) -> int:
    """The layer evaluations of a run of ``training_evaluations`` with its checkpoints (one at the start, one each
    ``every`` training evaluations, one at the end), each charging ``cost``."""
    return training_evaluations + (1 + -(-training_evaluations // every)) * cost


def selected_index(curve: Curve, within: int) -> int:
    """The selected checkpoint among the first ``within`` ones: the best selection success, ties the lower median
    hand error, then the earlier."""
    keys = [(curve.validation_success[i], -curve.validation_error[i]) for i in range(within)]
    return max(range(within), key=lambda i: (keys[i], -i))


class Checkpoints:
    """A run's spending and its checkpoints (see the module's docstring)."""

    def __init__(
        self,
        problem: CounterweightProblem,
        selection_goals: torch.Tensor,
        every: int,
        probe_goals: torch.Tensor | None = None,
        probe_dense: int | None = None,
        probe_every: int = 4,
    ) -> None:
        if every < 1:
            raise ValueError(f"checkpoints must be at least 1 training evaluation apart, got {every}")
        dtype = problem.tree.joint_lower.dtype
        self.problem, self.every = problem, every
        self.selection_goals = selection_goals.to(dtype)
        self.probe_goals = None if probe_goals is None else probe_goals.to(dtype)
        self.probe_dense, self.probe_every = probe_dense, probe_every
        self.curve = Curve()
        self.evaluations, self.training_evaluations, self.seconds = 0, 0, 0.0
        self._since, self._probe, self._best, self._last = 0, [], None, None

    @property
    def cost(self) -> int:
        """The evaluations one checkpoint charges."""
        return len(self.selection_goals)

    def affords(self, step_cost: int, max_evaluations: int | None, max_seconds: float | None) -> bool:
        """Whether one more step of ``step_cost`` training evaluations fits, with the final checkpoint after it."""
        if max_evaluations is not None:
            return self.evaluations + step_cost + self.cost <= max_evaluations
        return self.seconds < max_seconds

    def trained(self, policy: nn.Module, evaluations: int, seconds: float, loss: float) -> None:
        """Count a training step; take a checkpoint if one is due."""
        self.evaluations += evaluations
        self.training_evaluations += evaluations
        self.seconds += seconds
        self._since += evaluations
        if self._since >= self.every:
            self.take(policy, loss)

    @torch.no_grad()
    def take(self, policy: nn.Module, loss: float) -> None:
        start = time.perf_counter()
        problem = self.problem
        outcome = problem.outcome(
            problem.solve(self.selection_goals, policy(self.selection_goals), "body", policy.parameterisation)
        )
        self.seconds += time.perf_counter() - start
        self.evaluations += self.cost
        self._since = 0
        curve = self.curve
        curve.evaluations.append(self.evaluations)
        curve.training_evaluations.append(self.training_evaluations)
        curve.seconds.append(self.seconds)
        curve.validation_success.append(float(outcome.success.double().mean()))
        curve.validation_error.append(float(outcome.hand_error.median()))
        curve.train_loss.append(loss)
        index = len(curve.evaluations) - 1
        selected = selected_index(curve, index + 1) == index
        dense = self.probe_dense is None or index < self.probe_dense or index % self.probe_every == 0
        self._record_probe(policy, dense or selected)
        self._last = copy.deepcopy(policy.state_dict())
        if selected:
            self._best = self._last

    @torch.no_grad()
    def _record_probe(self, policy: nn.Module, wanted: bool) -> None:
        if self.probe_goals is None:
            return
        curve, goals, problem = self.curve, self.probe_goals, self.problem
        if wanted:
            probed = problem.outcome(problem.solve(goals, policy(goals), "body", policy.parameterisation))
            self._probe.append(probed.success.cpu())
            curve.probe_success.append(float(probed.success.double().mean()))
            curve.probe_error.append(float(probed.hand_error.median()))
        else:
            self._probe.append(torch.zeros(len(goals), dtype=torch.bool))
            curve.probe_success.append(math.nan)
            curve.probe_error.append(math.nan)
        curve.probed.append(wanted)

    def result(self, policy: nn.Module, loss: float) -> Trained:
        """The run, after a final checkpoint if the last step has none."""
        if self._since > 0 or not self.curve.evaluations:
            self.take(policy, loss)
        elif self.probe_goals is not None and not self.curve.probed[-1]:  # the last checkpoint is always probed
            self._probe.pop()
            for values in (self.curve.probe_success, self.curve.probe_error, self.curve.probed):
                values.pop()
            self._record_probe(policy, True)
        probe = torch.stack(self._probe) if self._probe else None
        selected = selected_index(self.curve, len(self.curve.evaluations))
        return Trained(self._best, self._last, self.curve, self.evaluations, self.seconds, selected, probe)


def train_with_checkpoints(
    policy: nn.Module,
    step: Callable[[], float],
    step_cost: int,
    checkpoints: Checkpoints,
    max_evaluations: int | None = None,
    max_seconds: float | None = None,
    log: Callable[[str], None] = lambda _: None,
    name: str = "run",
) -> Trained:
    """``step()`` (one training step or generation, ``step_cost`` layer evaluations, returning its loss; it leaves
    the weights to check in ``policy``) until ``max_evaluations`` (selection included) or ``max_seconds`` are spent
    (give exactly one)."""
    if (max_evaluations is None) == (max_seconds is None):
        raise ValueError("give exactly one budget: max_evaluations or max_seconds")
    if max_evaluations is not None and max_evaluations < 2 * checkpoints.cost:
        raise ValueError(
            f"a budget of {max_evaluations} layer evaluations cannot hold the first and the last checkpoint "
            f"({checkpoints.cost} selection solves each)"
        )
    loss = math.nan
    checkpoints.take(policy, loss)
    while checkpoints.affords(step_cost, max_evaluations, max_seconds):
        start = time.perf_counter()
        loss = step()
        taken = len(checkpoints.curve.evaluations)
        checkpoints.trained(policy, step_cost, time.perf_counter() - start, loss)
        if len(checkpoints.curve.evaluations) > taken:
            log(
                f"{name}: {checkpoints.evaluations} evaluations, selection {checkpoints.curve.validation_success[-1]:.2f}"
            )
    return checkpoints.result(policy, loss)
