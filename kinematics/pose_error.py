"""The IK residual: root-frame position error and the shortest rotation error ``log(R_target R_reached^T)``."""

from __future__ import annotations

import torch

from kinematics.batch_last import from_batch_last, matmul, to_batch_last
from kinematics.rotations import so3_log_matrix_first


def pose_error(target: torch.Tensor, reached: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Root-frame position error ``(..., 3)`` and shortest rotation error ``log(R_target R_reached^T)`` ``(..., 3)``."""
    batch = torch.broadcast_shapes(target.shape[:-2], reached.shape[:-2])
    target, reached = target.expand(*batch, 4, 4), reached.expand(*batch, 4, 4)
    position, rotation = pose_error_batch_last(
        to_batch_last(target[..., :3, :3], 2),
        to_batch_last(target[..., :3, 3], 1),
        to_batch_last(reached[..., :3, :3], 2),
        to_batch_last(reached[..., :3, 3], 1),
    )
    return from_batch_last(position, batch), from_batch_last(rotation, batch)


def pose_error_batch_last(
    target_rot: torch.Tensor, target_pos: torch.Tensor, rot: torch.Tensor, pos: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``pose_error`` in the batch-last layout: rotations ``(3, 3, B)``, positions ``(3, B)`` -> two ``(3, B)``."""
    return target_pos - pos, so3_log_matrix_first(matmul(target_rot, rot.transpose(0, 1)))
