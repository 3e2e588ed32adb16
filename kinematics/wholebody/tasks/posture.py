"""The joints at a reference posture (the floating base is left free), cost per rad."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kinematics.model import KinematicTree, TreeState
from kinematics.wholebody.tasks.task import Task


class PostureTask(Task):
    """Bring the joints to ``target`` ``(..., n_joints)`` (``tree.joint_names`` order); the base columns of its
    Jacobian are zero, so it never moves the base by itself. ``cost``: one number or one per joint (per rad)."""

    def __init__(
        self, tree: KinematicTree, name: str = "posture", cost: float | Sequence[float] = 1.0, gain: float = 1.0
    ) -> None:
        self.size = len(tree.joint_names)
        self.target_shape = (self.size,)
        self._base_nq, self._base_nv = tree.base_nq, tree.base_nv
        super().__init__(name, cost, gain)

    def succeeded(self, error: torch.Tensor, position_tolerance: float, rotation_tolerance: float) -> torch.Tensor:
        """Always: the posture is a preference of the lowest level, not a goal."""
        return torch.ones(error.shape[:-1], dtype=torch.bool, device=error.device)

    def error(self, tree: KinematicTree, state: TreeState, q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return target - q[..., self._base_nq :]

    def jacobian(self, tree: KinematicTree, state: TreeState, q: torch.Tensor) -> torch.Tensor:
        eye = torch.eye(self.size, dtype=q.dtype, device=q.device)
        base = torch.zeros(self.size, self._base_nv, dtype=q.dtype, device=q.device)
        return torch.cat((base, eye), -1).expand(*q.shape[:-1], self.size, tree.nv)

    def compiled_form(self, plan) -> bool:
        if type(self) is not PostureTask:  # a subclass may compute other rows: it declares its own compiled form
            return False
        plan.posture_task(self.name, self.gain, self.cost().tolist())
        return True
