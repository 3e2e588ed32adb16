"""Joint position limits (on ``q + dq``) and step limits (on ``dq``), as bounds on the step."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kinematics.errors import ConfigError
from kinematics.model import KinematicTree, TreeState
from kinematics.wholebody.constraints.constraint import Constraint, Linear


class ConfigurationLimit(Constraint):
    """``lower <= q_joints + dq_joints <= upper`` (the URDF's limits; the base is free). ``gain`` in ``(0, 1]``
    lets one step use only that fraction of the room left, as mink's limit does."""

    def __init__(self, name: str = "joint_limits", gain: float = 1.0) -> None:
        super().__init__(name)
        if not 0.0 < gain <= 1.0:
            raise ConfigError(f"{name}: gain must be in (0, 1], got {gain}")
        self.gain = gain

    def bounds(self, tree: KinematicTree, state: TreeState, q: torch.Tensor) -> Linear:
        joints = q[..., tree.base_nq :]
        lower = self.gain * (tree.joint_lower - joints)
        upper = self.gain * (tree.joint_upper - joints)
        free = torch.full((*q.shape[:-1], tree.base_nv), float("inf"), dtype=q.dtype, device=q.device)
        return torch.cat((-free, lower), -1), torch.cat((free, upper), -1)

    def violation(self, tree: KinematicTree, state: TreeState, q: torch.Tensor, target) -> torch.Tensor:
        joints = q[..., tree.base_nq :]
        below, above = tree.joint_lower - joints, joints - tree.joint_upper
        return torch.clamp(torch.maximum(below, above), min=0.0).amax(-1)

    def compiled_form(self, plan) -> bool:
        if type(self) is not ConfigurationLimit:  # a subclass may compute other rows: it declares its own
            return False
        plan.configuration_limit(self.gain)
        return True


class StepLimit(Constraint):
    """``|dq_i| <= max_step_i`` (a velocity limit times the step's duration): one number, or one per tangent
    coordinate (``nv``: the base's linear m, angular rad, then each joint's rad)."""

    def __init__(self, max_step: float | Sequence[float], name: str = "step_limit") -> None:
        super().__init__(name)
        self._max = torch.as_tensor(max_step, dtype=torch.float64).reshape(-1)
        if bool((self._max <= 0).any()):
            raise ConfigError(f"{name}: max_step must be positive, got {self._max.tolist()}")

    def bounds(self, tree: KinematicTree, state: TreeState, q: torch.Tensor) -> Linear:
        if self._max.numel() not in (1, tree.nv):
            raise ConfigError(f"{self.name}: max_step needs 1 or nv = {tree.nv} values, got {self._max.numel()}")
        limit = self._max.to(q.dtype).to(q.device).expand(tree.nv).expand(*q.shape[:-1], tree.nv)
        return -limit, limit

    def compiled_form(self, plan) -> bool:
        if type(self) is not StepLimit:  # a subclass may compute other rows: it declares its own compiled form
            return False
        if self._max.numel() not in (1, plan.nv):
            plan.decline()  # the torch composition raises the error that says so
        else:
            plan.step_limit(self._max.expand(plan.nv).tolist())
        return True
