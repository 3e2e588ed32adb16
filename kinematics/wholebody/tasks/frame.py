"""A frame's pose in the world: full pose, position only or orientation only, per-axis costs in m and rad."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kinematics.errors import ConfigError
from kinematics.lie import pose_error
from kinematics.model import KinematicTree, TreeState
from kinematics.wholebody.tasks.task import Task

_ROWS = {"pose": slice(0, 6), "position": slice(0, 3), "orientation": slice(3, 6)}


class FrameTask(Task):
    """Bring frame ``frame`` to the target pose ``T_world_target`` ``(..., 4, 4)``.

    The error is the world-frame position error ``p_target - p`` and the world-frame rotation error
    ``log(R_target R^T)``; the Jacobian is the frame's LOCAL_WORLD_ALIGNED Jacobian (linear rows first), so
    ``J dq = e`` removes the error to first order. ``kind`` keeps the position rows, the orientation rows or all
    six. ``position_cost`` (per m) and ``orientation_cost`` (per rad) are one number or one per axis.
    """

    target_shape = (4, 4)

    def __init__(
        self,
        name: str,
        frame: str,
        position_cost: float | Sequence[float] = 1.0,
        orientation_cost: float | Sequence[float] = 1.0,
        kind: str = "pose",
        gain: float = 1.0,
    ) -> None:
        if kind not in _ROWS:
            raise ConfigError(f"task {name!r}: kind must be one of {sorted(_ROWS)}, got {kind!r}")
        self.frame, self.kind, self._rows = frame, kind, _ROWS[kind]
        self.frames = (frame,)
        self.size = 6 if kind == "pose" else 3
        position = torch.as_tensor(position_cost, dtype=torch.float64).reshape(-1).expand(3)
        orientation = torch.as_tensor(orientation_cost, dtype=torch.float64).reshape(-1).expand(3)
        super().__init__(name, torch.cat((position, orientation))[self._rows], gain)

    def succeeded(self, error: torch.Tensor, position_tolerance: float, rotation_tolerance: float) -> torch.Tensor:
        """Position rows within ``position_tolerance`` (m), orientation rows within ``rotation_tolerance`` (rad)."""
        if self.kind == "position":
            return error.norm(dim=-1) <= position_tolerance
        if self.kind == "orientation":
            return error.norm(dim=-1) <= rotation_tolerance
        return (error[..., :3].norm(dim=-1) <= position_tolerance) & (error[..., 3:].norm(dim=-1) <= rotation_tolerance)

    def error(self, tree: KinematicTree, state: TreeState, q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        position, rotation = pose_error(target, tree.frame_pose(state, self.frame))
        return torch.cat((position, rotation), -1)[..., self._rows]

    def jacobian(self, tree: KinematicTree, state: TreeState, q: torch.Tensor) -> torch.Tensor:
        return tree.frame_jacobian(state, self.frame)[..., self._rows, :]

    def compiled_form(self, plan) -> bool:
        if type(self) is not FrameTask:  # a subclass may compute other rows: it declares its own compiled form
            return False
        plan.frame_task(self.name, self.frame, self.gain, self.cost().tolist(), self._rows.start)
        return True
