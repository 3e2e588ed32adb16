"""The chain's kernels: FK and the Jacobian in one pass, the DLS step's products (``J J^T + C``, ``J^T x``), the
pose error, and the closed-form backward passes of both.

Each wrapper returns ``None`` (the kernel then runs its torch reference) where ``loader.compiled`` refuses its
tensors."""

from __future__ import annotations

import torch

from kinematics.log_thresholds import NEAR_PI_COS, SMALL_SIN_SQ
from kinematics.native import loader


def fk_jacobian(
    q: torch.Tensor,
    local: torch.Tensor,
    revolute: torch.Tensor,
    end: torch.Tensor,
    revolute_only: bool,
    with_jacobian: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """``q`` ``(dof, B)``; ``local`` ``(dof, 4, 3, 4)``: each joint's constant, sine, versine and slide blocks;
    ``revolute`` ``(dof,)`` 1/0; ``end`` ``(3, 4)`` -> TCP rotation ``(3, 3, B)``, position ``(3, B)`` and the
    transposed Jacobian ``(dof, 6, B)`` (``(0, 6, B)`` without ``with_jacobian``), or ``None``
    (``kinematics.model.chain.FK_JACOBIAN``; the kernel reads ``revolute`` itself)."""
    if q.ndim != 2:
        return None
    dof, n = q.shape
    kernel = loader.compiled("fk_jacobian", (q, local, revolute, end), ((dof, n), (dof, 4, 3, 4), (dof,), (3, 4)))
    if kernel is None:
        return None
    q = q.contiguous()
    sine, versine = torch.sin(q), 1.0 - torch.cos(q)
    rot, pos, jac_t = (
        loader.empty(3, 3, n, dtype=q.dtype),
        loader.empty(3, n, dtype=q.dtype),
        loader.empty(dof, 6, n, dtype=q.dtype),
    )
    args = (sine, versine, q, local.contiguous(), revolute.contiguous(), end.contiguous(), rot, pos, jac_t)
    kernel(dof, n, *(t.data_ptr() for t in args))
    return rot, pos, jac_t if with_jacobian else jac_t[:0]


def gram(jac_t: torch.Tensor, constant: torch.Tensor) -> torch.Tensor | None:
    """``J J^T + C`` as contiguous ``(B, 6, 6)`` matrices from ``jac_t`` ``(dof, 6, B)`` and ``C`` ``(6, 6, 1)``,
    or ``None``."""
    if jac_t.ndim != 3:
        return None
    dof, _, n = jac_t.shape
    kernel = loader.compiled("gram", (jac_t, constant), ((dof, 6, n), (6, 6, 1)))
    if kernel is None:
        return None
    jac_t, constant = jac_t.contiguous(), constant.contiguous()
    work, out = loader.empty(21, n, dtype=jac_t.dtype), loader.empty(n, 6, 6, dtype=jac_t.dtype)
    kernel(dof, n, *(t.data_ptr() for t in (jac_t, constant, work, out)))
    return out


def jt_x(jac_t: torch.Tensor, x: torch.Tensor) -> torch.Tensor | None:
    """``J^T x`` ``(dof, B)`` from ``jac_t`` ``(dof, 6, B)`` and ``x`` ``(B, 6)``, or ``None``."""
    if jac_t.ndim != 3:
        return None
    dof, _, n = jac_t.shape
    kernel = loader.compiled("jt_x", (jac_t, x), ((dof, 6, n), (n, 6)))
    if kernel is None:
        return None
    jac_t, x = jac_t.contiguous(), x.contiguous()
    out = loader.empty(dof, n, dtype=jac_t.dtype)
    kernel(dof, n, *(t.data_ptr() for t in (jac_t, x, out)))
    return out


def pose_error(
    target_rot: torch.Tensor, target_pos: torch.Tensor, rot: torch.Tensor, pos: torch.Tensor
) -> torch.Tensor | None:
    """``(6, B)``: position error then ``log(R_target R^T)`` from rotations ``(3, 3, B)`` and positions ``(3, B)``
    (all four with the same ``B``), or ``None``."""
    n = rot.shape[-1] if rot.ndim == 3 else -1
    shapes = ((3, 3, n), (3, 3, n), (3, n), (3, n))
    kernel = loader.compiled("pose_error", (rot, target_rot, target_pos, pos), shapes)
    if kernel is None:
        return None
    tensors = [t.contiguous() for t in (target_rot, target_pos, rot, pos)]
    out = loader.empty(6, n, dtype=rot.dtype)
    kernel(n, *(t.data_ptr() for t in (*tensors, out)), SMALL_SIN_SQ, NEAR_PI_COS)
    return out


def pose_error_vjp(
    target_rot: torch.Tensor, rot: torch.Tensor, grad_rotation: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Gradients ``(3, 3, B)`` of the rotation error to ``target_rot`` and ``rot`` (both ``(3, 3, B)``) for
    ``grad_rotation`` ``(3, B)``, or ``None``."""
    n = rot.shape[-1] if rot.ndim == 3 else -1
    kernel = loader.compiled("pose_error_vjp", (rot, target_rot, grad_rotation), ((3, 3, n), (3, 3, n), (3, n)))
    if kernel is None:
        return None
    tensors = [t.contiguous() for t in (target_rot, rot, grad_rotation)]
    grad_target, grad_rot = loader.empty(3, 3, n, dtype=rot.dtype), loader.empty(3, 3, n, dtype=rot.dtype)
    kernel(n, *(t.data_ptr() for t in (*tensors, grad_target, grad_rot)), SMALL_SIN_SQ, NEAR_PI_COS)
    return grad_target, grad_rot


def chain_vjp(
    rot: torch.Tensor, jac_t: torch.Tensor, grad_rot: torch.Tensor, grad_pos: torch.Tensor, grad_jac: torch.Tensor
) -> torch.Tensor | None:
    """``(dof, B)``: the revolute chain's closed-form backward (``kinematics.model.chain_gradient``), or ``None``."""
    if jac_t.ndim != 3:
        return None
    dof, _, n = jac_t.shape
    shapes = ((3, 3, n), (dof, 6, n), (3, 3, n), (3, n), (dof, 6, n))
    kernel = loader.compiled("chain_vjp", (rot, jac_t, grad_rot, grad_pos, grad_jac), shapes)
    if kernel is None:
        return None
    tensors = [t.contiguous() for t in (rot, jac_t, grad_rot, grad_pos, grad_jac)]
    work, grad_q = loader.empty(12, n, dtype=rot.dtype), loader.empty(dof, n, dtype=rot.dtype)
    kernel(dof, n, *(t.data_ptr() for t in (*tensors, work, grad_q)))
    return grad_q
