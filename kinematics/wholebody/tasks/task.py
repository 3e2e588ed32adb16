"""What a whole-body task is: an error in task space and its Jacobian, weighted per row, with a gain.

A task wants the step ``dq`` (a tangent vector, ``(..., nv)``; the configuration moves to
``tree.integrate(q, dq)``) to satisfy ``J dq = gain * e``, where ``e`` is the task-space displacement from where
the robot is to the target (target minus current, in the coordinates ``J`` maps into). In a QP level it enters as
the least-squares term ``|W (J dq - gain e)|^2`` with ``W = diag(cost)``: costs are per row and carry units (a
position row's cost is per metre, an orientation row's per radian), as mink's and pink's tasks do.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kinematics.errors import ConfigError, ShapeError
from kinematics.model import KinematicTree, TreeState


class Task:
    """Base class. Subclasses set ``size`` and implement ``error`` and ``jacobian``; they override ``succeeded``
    where success is not "the error's norm within the position tolerance", and ``frames`` where they read frames.

    Args:
        name: how targets and results refer to the task (``targets[name]``, ``result.residuals[name]``).
        cost: one weight per row (or one for all rows), non-negative.
        gain: the fraction of the error one step removes, in ``(0, 1]``.
    """

    size: int
    target_shape: tuple[int, ...]  # the trailing shape of the task's target

    def __init__(self, name: str, cost: float | Sequence[float], gain: float = 1.0) -> None:
        if not name or not isinstance(name, str):
            raise ConfigError(f"a task needs a non-empty name, got {name!r}")
        if not 0.0 < gain <= 1.0:
            raise ConfigError(f"task {name!r}: gain must be in (0, 1], got {gain}")
        weights = torch.as_tensor(cost, dtype=torch.float64).reshape(-1)
        if weights.numel() == 1:
            weights = weights.expand(self.size).clone()
        if weights.numel() != self.size or bool((weights < 0).any()) or not bool(torch.isfinite(weights).all()):
            raise ConfigError(
                f"task {name!r}: cost must be one non-negative number or {self.size}, got {tuple(weights.tolist())}"
            )
        self.name, self.gain, self._cost = name, gain, weights

    frames: tuple[str, ...] = ()  # the tree's frames the task reads (the layer checks they exist when built)

    def cost(self, like: torch.Tensor | None = None) -> torch.Tensor:
        """``(size,)`` row weights, in ``like``'s dtype and device (float64 on the CPU without it)."""
        return self._cost if like is None else self._cost.to(like.dtype).to(like.device)

    def succeeded(self, error: torch.Tensor, position_tolerance: float, rotation_tolerance: float) -> torch.Tensor:
        """``(...)`` bool: whether the error ``(..., size)`` at a solve's end counts as the task done."""
        return error.norm(dim=-1) <= position_tolerance

    def check_target(self, target: torch.Tensor) -> None:
        if not isinstance(target, torch.Tensor) or tuple(target.shape[-len(self.target_shape) :]) != self.target_shape:
            shape = tuple(target.shape) if isinstance(target, torch.Tensor) else type(target).__name__
            raise ShapeError(f"task {self.name!r}: its target must be (..., {self.target_shape}), got {shape}")

    def error(self, tree: KinematicTree, state: TreeState, q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``(..., size)``: target minus current, in task coordinates."""
        raise NotImplementedError

    def jacobian(self, tree: KinematicTree, state: TreeState, q: torch.Tensor) -> torch.Tensor:
        """``(..., size, nv)``: how a step ``dq`` moves the task's current value (to first order)."""
        raise NotImplementedError

    def compiled_form(self, plan) -> bool:
        """Add this task to the compiled step's ``plan`` (a ``kinematics.wholebody.step_plan.PlanBuilder``) through
        one of its block methods and return True; False where the kernel does not compute this task (its layer then
        runs the torch composition). The base class has none."""
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, gain={self.gain})"
