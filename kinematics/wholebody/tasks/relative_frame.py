"""One frame's pose in another's (a hand relative to the torso, one hand relative to the other)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kinematics.lie import pose_error, skew
from kinematics.model import KinematicTree, TreeState
from kinematics.wholebody.tasks.task import Task


class RelativeFrameTask(Task):
    """Bring ``T_root_frame = T_world_root^-1 T_world_frame`` to the target ``(..., 4, 4)``.

    The error is ``[p_target - p; log(R_target R^T)]`` with ``p``, ``R`` the relative pose, both expressed in
    ``root``'s axes. With world-aligned Jacobians ``J_f``, ``J_r`` and ``d = p_frame - p_root`` (world), the
    relative twist in ``root``'s axes is ``R_root^T (v_f - v_r + d x w_r)`` and ``R_root^T (w_f - w_r)``.
    """

    size = 6
    target_shape = (4, 4)

    def __init__(
        self,
        name: str,
        frame: str,
        root: str,
        position_cost: float | Sequence[float] = 1.0,
        orientation_cost: float | Sequence[float] = 1.0,
        gain: float = 1.0,
    ) -> None:
        self.frame, self.root = frame, root
        self.frames = (frame, root)
        position = torch.as_tensor(position_cost, dtype=torch.float64).reshape(-1).expand(3)
        orientation = torch.as_tensor(orientation_cost, dtype=torch.float64).reshape(-1).expand(3)
        super().__init__(name, torch.cat((position, orientation)), gain)

    @staticmethod
    def relative_pose(tree: KinematicTree, state: TreeState, frame: str, root: str) -> torch.Tensor:
        """``T_root_frame`` ``(..., 4, 4)``."""
        T_world_root, T_world_frame = tree.frame_pose(state, root), tree.frame_pose(state, frame)
        R_root_t = T_world_root[..., :3, :3].transpose(-1, -2)
        rotation = R_root_t @ T_world_frame[..., :3, :3]
        position = (R_root_t @ (T_world_frame[..., :3, 3] - T_world_root[..., :3, 3])[..., None])[..., 0]
        top = torch.cat((rotation, position[..., None]), -1)
        bottom = torch.zeros_like(top[..., :1, :])
        bottom[..., 0, 3] = 1.0
        return torch.cat((top, bottom), -2)

    def succeeded(self, error: torch.Tensor, position_tolerance: float, rotation_tolerance: float) -> torch.Tensor:
        """The relative position within ``position_tolerance`` (m) and the relative rotation within
        ``rotation_tolerance`` (rad)."""
        return (error[..., :3].norm(dim=-1) <= position_tolerance) & (error[..., 3:].norm(dim=-1) <= rotation_tolerance)

    def error(self, tree: KinematicTree, state: TreeState, q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        position, rotation = pose_error(target, self.relative_pose(tree, state, self.frame, self.root))
        return torch.cat((position, rotation), -1)

    def jacobian(self, tree: KinematicTree, state: TreeState, q: torch.Tensor) -> torch.Tensor:
        T_world_root, T_world_frame = tree.frame_pose(state, self.root), tree.frame_pose(state, self.frame)
        J_root, J_frame = tree.frame_jacobian(state, self.root), tree.frame_jacobian(state, self.frame)
        d = T_world_frame[..., :3, 3] - T_world_root[..., :3, 3]
        R_root_t = T_world_root[..., :3, :3].transpose(-1, -2)
        linear = J_frame[..., :3, :] - J_root[..., :3, :] + skew(d) @ J_root[..., 3:, :]
        angular = J_frame[..., 3:, :] - J_root[..., 3:, :]
        return torch.cat((R_root_t @ linear, R_root_t @ angular), -2)

    def compiled_form(self, plan) -> bool:
        if type(self) is not RelativeFrameTask:  # a subclass may compute other rows: it declares its own compiled form
            return False
        plan.relative_frame_task(self.name, self.frame, self.root, self.gain, self.cost().tolist())
        return True
