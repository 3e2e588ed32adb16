"""The centre of mass at a world position, per-axis costs (zero on z keeps only its ground projection)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kinematics.model import KinematicTree, TreeState
from kinematics.wholebody.tasks.task import Task


class ComTask(Task):
    """Bring the centre of mass to ``target`` ``(..., 3)`` (world frame, m); cost per m, per axis."""

    size = 3
    target_shape = (3,)

    def __init__(self, name: str = "com", cost: float | Sequence[float] = 1.0, gain: float = 1.0) -> None:
        super().__init__(name, cost, gain)

    def error(self, tree: KinematicTree, state: TreeState, q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return target - tree.center_of_mass(state)

    def jacobian(self, tree: KinematicTree, state: TreeState, q: torch.Tensor) -> torch.Tensor:
        return tree.com_jacobian(state)

    def compiled_form(self, plan) -> bool:
        if type(self) is not ComTask:  # a subclass may compute other rows: it declares its own compiled form
            return False
        plan.com_task(self.name, self.gain, self.cost().tolist())
        return True
