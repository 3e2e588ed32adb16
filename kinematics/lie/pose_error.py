"""The IK residual: root-frame position error and the shortest rotation error ``log(R_target R_reached^T)``."""

from __future__ import annotations

import torch

from kinematics import native
from kinematics.batch_last import first_order, from_batch_last, matmul, to_batch_last, transforms_active
from kinematics.errors import DtypeDeviceMismatchError, ShapeError
from kinematics.lie.rotations import so3_log_matrix_first, so3_log_matrix_first_vjp
from kinematics.native.kernel import Kernel


def pose_error(target: torch.Tensor, reached: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Root-frame position error ``(..., 3)`` and shortest rotation error ``log(R_target R_reached^T)`` ``(..., 3)``.

    ``target`` and ``reached``: ``(..., 4, 4)`` transforms of one floating-point dtype and device whose leading
    dimensions broadcast.
    """
    for name, x in (("target", target), ("reached", reached)):
        if not isinstance(x, torch.Tensor):
            raise ShapeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.ndim < 2 or x.shape[-2:] != (4, 4):
            raise ShapeError(f"{name} must have shape (..., 4, 4), got {tuple(x.shape)}")
    if not target.is_floating_point() or target.dtype != reached.dtype or target.device != reached.device:
        raise DtypeDeviceMismatchError(
            f"target is {target.dtype} on {target.device} and reached {reached.dtype} on {reached.device}; "
            "pose_error needs both on one floating-point dtype and device"
        )
    try:
        batch = torch.broadcast_shapes(target.shape[:-2], reached.shape[:-2])
    except RuntimeError as exc:
        raise ShapeError(
            f"the leading dimensions of target {tuple(target.shape)} and reached {tuple(reached.shape)} do not "
            "broadcast"
        ) from exc
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
    """``pose_error`` in the batch-last layout: rotations ``(3, 3, B)``, positions ``(3, B)`` -> two ``(3, B)``;
    a batch axis of 1 broadcasts.

    Its backward is the closed form ``so3_log_matrix_first_vjp`` (equal to autograd through the formula); on the
    CPU the values come from ``kinematics.native`` when every input has the full batch. Under forward-mode AD or a
    ``torch.func`` transform autograd follows the torch formula instead.
    """
    inputs = (target_rot, target_pos, rot, pos)
    if torch.is_grad_enabled() and any(t.requires_grad for t in inputs) and not transforms_active():
        return _PoseError.apply(*inputs)
    return _pose_error(*inputs)


def _pose_error_reference(
    target_rot: torch.Tensor, target_pos: torch.Tensor, rot: torch.Tensor, pos: torch.Tensor
) -> torch.Tensor:
    return torch.cat((target_pos - pos, so3_log_matrix_first(matmul(target_rot, rot.transpose(0, 1)))))


def _pose_error_vjp_reference(
    target_rot: torch.Tensor, rot: torch.Tensor, grad_rotation: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    grad_error = so3_log_matrix_first_vjp(matmul(target_rot, rot.transpose(0, 1)), grad_rotation)
    # log(R_t R^T): d/dR_t = G R, d/dR = G^T R_t (summed over a broadcast batch axis by autograd).
    return matmul(grad_error, rot), matmul(grad_error.transpose(0, 1), target_rot)


# (6, B): the position error then log(R_target R^T), from rotations (3, 3, B) and positions (3, B); and the
# gradients (3, 3, B) of the rotation error to R_target and R for an upstream gradient (3, B).
POSE_ERROR = Kernel(
    "pose_error", "(Tensor target_rot, Tensor target_pos, Tensor rot, Tensor pos) -> Tensor", _pose_error_reference
)
POSE_ERROR.implement("cpu", native.pose_error)
POSE_ERROR_VJP = Kernel(
    "pose_error_vjp", "(Tensor target_rot, Tensor rot, Tensor grad_rotation) -> (Tensor, Tensor)",
    _pose_error_vjp_reference,
)  # fmt: skip
POSE_ERROR_VJP.implement("cpu", native.pose_error_vjp)


def _pose_error(
    target_rot: torch.Tensor, target_pos: torch.Tensor, rot: torch.Tensor, pos: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    computed = POSE_ERROR(target_rot, target_pos, rot, pos)
    return computed[:3], computed[3:]


class _PoseError(torch.autograd.Function):
    @staticmethod
    def forward(target_rot, target_pos, rot, pos):
        return _pose_error(target_rot, target_pos, rot, pos)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(inputs[0], inputs[2])

    @staticmethod
    @first_order
    def backward(ctx, grad_position, grad_rotation):
        target_rot, rot = ctx.saved_tensors
        computed = POSE_ERROR_VJP(target_rot, rot, grad_rotation)
        return computed[0], grad_position, computed[1], -grad_position
