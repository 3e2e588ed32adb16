"""The kinematic tree's kernels (``kinematics.model.tree_kernels``): the level-by-level node pass, frames, frame
Jacobians, and the centre of mass with its Jacobian. Nodes are ``(m + 1, 3, 4, B)`` batch-last (slot 0 the base);
index arguments are the tree's own int64 buffers, checked like the real ones.

Each wrapper returns ``None`` (the kernel then runs its torch reference) where ``loader.compiled`` refuses its
tensors."""

from __future__ import annotations

import torch

from kinematics.native import loader

_TREE_TILE = 32  # TREE_TILE in csrc/tree.c: the scratch the Jacobian kernels need per row


def tree_nodes(
    q: torch.Tensor,
    floating: bool,
    column: torch.Tensor,
    multiplier: torch.Tensor,
    offset: torch.Tensor,
    revolute: torch.Tensor,
    origin: torch.Tensor,
    parent: torch.Tensor,
) -> torch.Tensor | None:
    """The level pass: ``q`` ``(B, nq)`` -> nodes ``(m + 1, 3, 4, B)``, or ``None``. Node ``i`` (level order) is
    driven by ``q[:, column[i]] * multiplier[i] + offset[i]``, ``revolute[i]`` 1 (angle) or 0 (slide); ``origin``
    ``(m, 3, 4)``: its constant frame in its parent's; ``parent`` ``(m,)``: its parent's slot. Sine and cosine
    are computed in the kernel (no torch op: torch's would wait for its thread pool)."""
    if q.ndim != 2:
        return None
    n, nq = q.shape
    m = origin.shape[0]
    reals = (q, origin, revolute, multiplier, offset)
    kernel = loader.compiled("tree_nodes", reals, ((n, nq), (m, 3, 4), (m,), (m,), (m,)))
    if kernel is None or not loader.indices(column, parent) or column.shape != (m,) or parent.shape != (m,):
        return None
    nodes = loader.empty(m + 1, 3, 4, n, dtype=q.dtype)
    tensors = [t.contiguous() for t in reals] + [column, parent, nodes]
    kernel(m, n, int(floating), nq, *(t.data_ptr() for t in tensors))
    return nodes


def tree_frames(
    nodes: torch.Tensor, offset: torch.Tensor, slot: torch.Tensor, batch_first: bool = True
) -> torch.Tensor | None:
    """Every frame from nodes ``(m + 1, 3, 4, B)``, ``offset`` ``(nf, 4, 4)`` and owner ``slot`` ``(nf,)``:
    ``(B, nf, 4, 4)`` (``batch_first``) or ``(nf, 3, 4, B)``, or ``None``."""
    if nodes.ndim != 4 or offset.ndim != 3:
        return None
    n, nf = nodes.shape[-1], offset.shape[0]
    kernel = loader.compiled("tree_frames", (nodes, offset), ((nodes.shape[0], 3, 4, n), (nf, 4, 4)))
    if kernel is None or not loader.indices(slot) or slot.shape != (nf,):
        return None
    if batch_first:
        out, strides = loader.empty(n, nf, 4, 4, dtype=nodes.dtype), (nf * 16, 16, 1, 4)
    else:
        out, strides = loader.empty(nf, 3, 4, n, dtype=nodes.dtype), (1, 12 * n, n, 3)
    kernel(nf, n, *strides, *(t.data_ptr() for t in (nodes.contiguous(), offset.contiguous(), slot, out)))
    return out


def tree_frame_jacobian(
    nodes: torch.Tensor,
    slot: int,
    offset: torch.Tensor,
    ancestors: torch.Tensor,
    dofs: torch.Tensor,
    weights: torch.Tensor,
    revolute: torch.Tensor,
    nv: int,
    base_nv: int,
    batch_first: bool = True,
) -> torch.Tensor | None:
    """One frame's Jacobian ``(B, 6, nv)`` (``batch_first``) or ``(6, nv, B)``, or ``None``: the frame is node
    ``slot`` times ``offset`` ``(4, 4)``; its ``k`` ancestor nodes (slots ``ancestors``) drive columns
    ``base_nv + dofs`` with ``weights`` and ``revolute`` 1/0 (all ``(k,)``)."""
    if nodes.ndim != 4:
        return None
    n, k = nodes.shape[-1], ancestors.shape[0]
    shapes = ((nodes.shape[0], 3, 4, n), (4, 4), (k,), (k,))
    kernel = loader.compiled("tree_frame_jacobian", (nodes, offset, weights, revolute), shapes)
    if kernel is None or not loader.indices(ancestors, dofs) or dofs.shape != (k,) or not 0 <= slot < nodes.shape[0]:
        return None
    if batch_first:
        out, strides = loader.empty(n, 6, nv, dtype=nodes.dtype), (6 * nv, 1)
    else:
        out, strides = loader.empty(6, nv, n, dtype=nodes.dtype), (1, n)
    work = loader.empty((6 * nv + 15) * _TREE_TILE, dtype=nodes.dtype)
    tensors = (nodes.contiguous(), offset.contiguous(), ancestors, dofs, weights.contiguous(), revolute.contiguous())
    kernel(k, n, slot, nv, base_nv, *strides, *(t.data_ptr() for t in (*tensors, work, out)))
    return out


def tree_com(
    nodes: torch.Tensor,
    moment: torch.Tensor,
    subtree_mass: torch.Tensor,
    revolute: torch.Tensor,
    weights: torch.Tensor,
    total: torch.Tensor,
    dof: torch.Tensor,
    parent: torch.Tensor,
    nv: int,
    base_nv: int,
    jacobian: bool,
    batch_first: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """The centre of mass ``(B, 3)`` and, with ``jacobian``, its Jacobian ``(B, 3, nv)`` (``batch_first``; else
    ``(3, B)`` and ``(3, nv, B)``), or ``None``. ``moment`` ``(m + 1, 4)``: per slot, ``m [c; 1]`` of the links it
    carries; ``subtree_mass``, ``revolute``, ``weights`` ``(m,)``; ``total`` ``(1,)`` the total mass; ``dof`` and
    ``parent`` ``(m,)``: each node's joint and parent slot."""
    if nodes.ndim != 4:
        return None
    n, m = nodes.shape[-1], nodes.shape[0] - 1
    reals = (nodes, moment, subtree_mass, revolute, weights, total)
    kernel = loader.compiled("tree_com", reals, ((m + 1, 3, 4, n), (m + 1, 4), (m,), (m,), (m,), (1,)))
    if kernel is None or not loader.indices(dof, parent) or dof.shape != (m,) or parent.shape != (m,):
        return None
    dtype = nodes.dtype
    work = loader.empty((3 * nv + 3 * (m + 1) + 15) * _TREE_TILE, dtype=dtype)
    shape, strides = ((n, 3), (3 * nv, 1, 3, 1)) if batch_first else ((3, n), (1, n, 1, n))
    com = loader.empty(*shape, dtype=dtype)
    jac = None if not jacobian else loader.empty(*((n, 3, nv) if batch_first else (3, nv, n)), dtype=dtype)
    tensors = [t.contiguous() for t in reals] + [dof, parent, work, com]
    kernel(m, n, nv, base_nv, *strides, *(t.data_ptr() for t in tensors), None if jac is None else jac.data_ptr())
    return com, jac
