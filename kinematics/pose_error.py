"""The IK residual: root-frame position error and the shortest rotation error ``log(R_target R_reached^T)``."""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from kinematics import native
from kinematics.batch_last import from_batch_last, matmul, to_batch_last
from kinematics.rotations import so3_log_matrix_first, so3_log_matrix_first_vjp


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
    """``pose_error`` in the batch-last layout: rotations ``(3, 3, B)``, positions ``(3, B)`` -> two ``(3, B)``.

    Its backward is the closed form ``so3_log_matrix_first_vjp`` (equal to autograd through the formula); on the
    CPU the values come from ``kinematics.native`` when it is available.
    """
    inputs = (target_rot, target_pos, rot, pos)
    if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
        return _PoseError.apply(*inputs)
    return _pose_error(*inputs)


def _pose_error(
    target_rot: torch.Tensor, target_pos: torch.Tensor, rot: torch.Tensor, pos: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    if native.supports(rot):
        computed = native.pose_error(target_rot, target_pos, rot, pos)
        if computed is not None:
            return computed[:3], computed[3:]
    return target_pos - pos, so3_log_matrix_first(matmul(target_rot, rot.transpose(0, 1)))


class _PoseError(torch.autograd.Function):
    @staticmethod
    def forward(target_rot, target_pos, rot, pos):
        return _pose_error(target_rot, target_pos, rot, pos)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(inputs[0], inputs[2])

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_position, grad_rotation):
        target_rot, rot = ctx.saved_tensors
        computed = native.pose_error_vjp(target_rot, rot, grad_rotation) if native.supports(rot) else None
        if computed is None:
            grad_error = so3_log_matrix_first_vjp(matmul(target_rot, rot.transpose(0, 1)), grad_rotation)
            # log(R_t R^T): d/dR_t = G R, d/dR = G^T R_t.
            computed = matmul(grad_error, rot), matmul(grad_error.transpose(0, 1), target_rot)
        return computed[0], grad_position, computed[1], -grad_position
