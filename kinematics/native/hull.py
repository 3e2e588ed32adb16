"""The support polygon's hull: the edges of the convex hull of the soles' corners.

Each wrapper returns ``None`` (the kernel then runs its torch reference) where ``loader.compiled`` refuses its
tensors."""

from __future__ import annotations

import torch

from kinematics.native import loader


def hull_edges(
    xy: torch.Tensor, first: torch.Tensor, second: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """The support polygon's hull edges of the ground points ``xy`` ``(n, k, 2)`` among the corner pairs
    ``first``, ``second`` ``(p,)``: outward normals ``(n, k, 2)``, offsets ``(n, k)`` and which rows are edges
    ``(n, k)`` bool (the edges first), or ``None``."""
    if xy.ndim != 3 or xy.shape[-1] != 2:
        return None
    n, k = xy.shape[:2]
    p = first.shape[0] if first.ndim == 1 else -1
    kernel = loader.compiled("hull_edges", (xy,), ((n, k, 2),))
    if kernel is None or not loader.indices(first, second) or second.shape != (p,) or p < k or n == 0:
        return None
    normal, offset, edge = (
        loader.empty(n, k, 2, dtype=xy.dtype),
        loader.empty(n, k, dtype=xy.dtype),
        loader.empty(n, k, dtype=xy.dtype),
    )
    tensors = (xy.contiguous(), first, second, normal, offset, edge)  # held: a copy lives while the kernel runs
    kernel(n, k, p, *(t.data_ptr() for t in tensors))
    return normal, offset, edge > 0
