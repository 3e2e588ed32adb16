"""A contact: a frame held at its anchored pose (its twist is zero; drift is corrected every step)."""

from __future__ import annotations

import torch

from kinematics.lie import pose_error
from kinematics.model import KinematicTree, TreeState
from kinematics.wholebody.constraints.constraint import Constraint, Linear


class Contact(Constraint):
    """Hold frame ``frame`` at the anchor ``targets[name]`` ``(..., 4, 4)``: ``J dq = e`` with ``e`` the pose
    error to the anchor, so a held frame has zero twist and any drift is removed in one step. The violation is
    the larger of the position error (m) and the rotation error (rad) to the anchor."""

    needs_target = True
    target_shape = (4, 4)

    def __init__(self, name: str, frame: str) -> None:
        super().__init__(name)
        self.frame = frame
        self.frames = (frame,)

    def _error(self, tree: KinematicTree, state: TreeState, anchor: torch.Tensor) -> torch.Tensor:
        position, rotation = pose_error(anchor, tree.frame_pose(state, self.frame))
        return torch.cat((position, rotation), -1)

    def equality(self, tree: KinematicTree, state: TreeState, q: torch.Tensor, target) -> Linear:
        return tree.frame_jacobian(state, self.frame), self._error(tree, state, target)

    def violation(self, tree: KinematicTree, state: TreeState, q: torch.Tensor, target) -> torch.Tensor:
        error = self._error(tree, state, target)
        return torch.maximum(error[..., :3].norm(dim=-1), error[..., 3:].norm(dim=-1))

    def compiled_form(self, plan) -> bool:
        if type(self) is not Contact:  # a subclass may compute other rows: it declares its own compiled form
            return False
        plan.contact(self.name, self.frame)
        return True
