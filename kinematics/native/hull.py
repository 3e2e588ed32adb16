"""The support polygon's hull: the edges of the convex hull of the soles' corners.

Each wrapper returns ``None`` (the kernel then runs its torch reference) where ``loader.compiled`` refuses its
tensors."""

from __future__ import annotations

import torch

from kinematics.native import loader


def support_edges(
    T: torch.Tensor, corners: torch.Tensor, owner: torch.Tensor, first: torch.Tensor, second: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """The support polygon's hull edges of the soles' corners ``corners`` ``(k, 4)`` (homogeneous, in their sole's
    frame; ``owner`` ``(k,)`` each one's sole, a row of NaN where one is not in ``[0, s)``) where the soles are posed,
    ``T`` ``(n, s, 4, 4)``: outward normals ``(n, k, 2)``, offsets ``(n, k)`` and which rows are edges ``(n, k)`` bool
    (the edges first, then the other candidate pairs among ``first``, ``second`` ``(p,)``); or ``None``."""
    if T.ndim != 4 or T.shape[-2:] != (4, 4) or corners.ndim != 2 or corners.shape[1] != 4:
        return None
    n, s, k = T.shape[0], T.shape[1], corners.shape[0]
    p = first.shape[0] if first.ndim == 1 else -1
    kernel = loader.compiled("support_edges", (T, corners), ((n, s, 4, 4), (k, 4)))
    if (
        kernel is None
        or not loader.indices(owner, first, second)
        or owner.shape != (k,)
        or second.shape != (p,)
        or p < k
        or n == 0
    ):
        return None
    normal, offset = loader.empty(n, k, 2, dtype=T.dtype), loader.empty(n, k, dtype=T.dtype)
    edge = loader.empty(n, k, dtype=torch.bool)
    tensors = (T.contiguous(), corners.contiguous(), owner, first, second, normal, offset, edge)  # held
    kernel(n, s, k, p, *(t.data_ptr() for t in tensors))
    return normal, offset, edge


def support_edges_vjp(
    T: torch.Tensor,
    corners: torch.Tensor,
    owner: torch.Tensor,
    first: torch.Tensor,
    second: torch.Tensor,
    grad_normal: torch.Tensor,
    grad_offset: torch.Tensor,
) -> torch.Tensor | None:
    """``support_edges``' gradient w.r.t. ``T`` ``(n, s, 4, 4)`` for the upstream gradients on its normals ``(n, k,
    2)`` and offsets ``(n, k)``, or ``None`` where the kernel does not take these tensors."""
    if T.ndim != 4 or T.shape[-2:] != (4, 4) or corners.ndim != 2 or corners.shape[1] != 4:
        return None
    n, s, k = T.shape[0], T.shape[1], corners.shape[0]
    p = first.shape[0] if first.ndim == 1 else -1
    shapes = ((n, s, 4, 4), (k, 4), (n, k, 2), (n, k))
    kernel = loader.compiled("support_edges_vjp", (T, corners, grad_normal, grad_offset), shapes)
    if kernel is None or not loader.indices(owner, first, second) or owner.shape != (k,) or second.shape != (p,):
        return None
    if p < k or n == 0:
        return None
    grad_T = loader.empty(n, s, 4, 4, dtype=T.dtype)
    tensors = (T.contiguous(), corners.contiguous(), owner, first, second, grad_normal.contiguous(),
               grad_offset.contiguous(), grad_T)  # fmt: skip
    code = kernel(n, s, k, p, *(t.data_ptr() for t in tensors))
    return None if code < 0 else grad_T
