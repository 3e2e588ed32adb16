"""The kinematic tree's kernels (``kinematics.native.kernel``): the level pass, frames, frame Jacobians and the centre of
mass with its Jacobian, each a ``Kernel`` whose CPU implementation is the compiled one of ``kinematics.native``
and whose reference is the torch pass below (every other device and dtype, autograd, ``torch.func``).

Layouts as ``KinematicTree`` keeps them: nodes ``(m + 1, 3, 4, B)`` batch-last, slot 0 the base, then the
movable joints' aligned frames in level order (a node's parent is in the level before it); ``levels`` the end
of each level in that order. Frames and Jacobians come batch-first ``(B, ...)`` or batch-last ``(..., B)``.
"""

from __future__ import annotations

import torch

from kinematics import native
from kinematics.batch_last import cross
from kinematics.lie import free_flyer
from kinematics.native.kernel import Kernel


def times_constant(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """``(n, 3, 4, B) @ (n, 4, 4)`` (``x`` with its homogeneous row implied) -> ``(n, 3, 4, B)``."""
    out = x[:, :, 0:1] * m[:, None, 0, :, None]
    for k in (1, 2, 3):
        out = torch.addcmul(out, x[:, :, k : k + 1], m[:, None, k, :, None])
    return out


def _nodes_reference(q, floating, column, multiplier, offset, revolute, origin, parent, levels):
    batch = q.shape[0]
    if floating:
        rows = free_flyer.rotation_entries(*q[:, 3:7].unbind(1))
        entries = [entry for i, row in enumerate(rows) for entry in (*row, q[:, i])]
        root = torch.stack(entries, 0).view(3, 4, batch)
    else:
        root = torch.eye(4, dtype=q.dtype, device=q.device)[:3, :, None].expand(3, 4, batch)
    if not levels:
        return root[None].contiguous()
    # Local frames L = C R_z(q) (C translated by q along its z for a prismatic joint), top rows (m, 3, 4, B):
    # columns 0 and 1 turn by the angle, columns 2 and 3 are C's (column 3 slides along column 2).
    values = torch.addcmul(offset[:, None], q.index_select(1, column).t(), multiplier[:, None])  # (m, B)
    angle, slide = values * revolute[:, None], values * (1.0 - revolute)[:, None]
    c, s = torch.cos(angle)[:, None], torch.sin(angle)[:, None]
    c0, c1, c2, c3 = origin[..., None].unbind(2)  # (m, 3, 1) each
    turned = (torch.addcmul(c0 * c, c1, s), torch.addcmul(c1 * c, c0, -s))
    local = torch.stack((*turned, c2.expand(-1, -1, batch), torch.addcmul(c3, c2, slide[:, None])), 2)
    e3 = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=q.dtype, device=q.device)[:, None]  # L's homogeneous row
    nodes, previous, start, previous_slot = [root[None]], root[None], 0, 0
    for end in levels:
        lo = local[start:end]
        if start == 0 and not floating:  # the base is the identity
            previous = lo
        else:
            p = previous.index_select(0, parent[start:end] - previous_slot)  # parents: the previous level
            out = p[:, :, 0:1] * lo[:, None, 0]
            out = torch.addcmul(out, p[:, :, 1:2], lo[:, None, 1])
            out = torch.addcmul(out, p[:, :, 2:3], lo[:, None, 2])
            previous = torch.addcmul(out, p[:, :, 3:4], e3)
        nodes.append(previous)
        start, previous_slot = end, start + 1
    return torch.cat(nodes, 0)


def _frames_reference(nodes, offset, slot, batch_first):
    frames = times_constant(nodes.index_select(0, slot), offset)  # (nf, 3, 4, B)
    if not batch_first:
        return frames
    nf, batch = frames.shape[0], frames.shape[-1]
    bottom = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=nodes.dtype, device=nodes.device).expand(batch, nf, 1, 4)
    return torch.cat((frames.permute(3, 0, 1, 2), bottom), 2)


def _assemble(root, point, columns, dofs, weights, nv, base_nv, batch_first):
    """``(B, rows, nv)`` (``batch_first``) or ``(rows, nv, B)`` from the node columns ``(k, rows, B)`` driving
    joints ``dofs`` times ``weights`` and, with a floating base (``base_nv``), the base's columns at ``point``
    ``(3, B)``: its linear velocity (base frame) moves the point along the base axes, its angular velocity turns
    it about the base origin."""
    rows, batch = columns.shape[1], point.shape[-1]
    if batch_first:
        out = columns.new_zeros(batch, rows, nv)
        column_dim, base, source = 2, (2, 1, 0), columns.permute(2, 1, 0) * weights
    else:
        out = columns.new_zeros(rows, nv, batch)
        column_dim, base, source = 1, (1, 0, 2), columns.transpose(0, 1) * weights[:, None]
    if base_nv:
        axes = root[:, :3].transpose(0, 1)  # (3 columns, 3, B): base axis k in the world frame
        turned = cross(axes, (point - root[:, 3])[None].expand(3, -1, -1))
        if rows == 3:
            block = torch.cat((axes, turned), 0)
        else:
            block = torch.cat((torch.cat((axes, torch.zeros_like(axes)), 1), torch.cat((turned, axes), 1)), 0)
        out.narrow(column_dim, 0, base_nv).copy_(block.permute(*base))
    out.narrow(column_dim, base_nv, nv - base_nv).index_add_(column_dim, dofs, source)
    return out


def _frame_jacobian_reference(nodes, slot, offset, ancestors, dofs, weights, revolute, nv, base_nv, batch_first):
    point = times_constant(nodes[slot : slot + 1], offset[None])[0, :, 3]  # (3, B)
    chain = nodes.index_select(0, ancestors)  # (k, 3, 4, B)
    z, origin = chain[:, :, 2], chain[:, :, 3]
    rev = revolute[:, None, None]
    columns = torch.cat((torch.lerp(z, cross(z, point - origin), rev), z * rev), 1)  # (k, 6, B)
    return _assemble(nodes[0], point, columns, dofs, weights, nv, base_nv, batch_first)


def _com_reference(nodes, moment, subtree_mass, revolute, weights, total, dof, parent, nv, base_nv, jacobian,
                   batch_first, levels):  # fmt: skip
    moments = nodes[:, :, 0] * moment[:, 0, None, None]  # m c per slot, (m + 1, 3, B)
    for k in (1, 2, 3):
        moments = torch.addcmul(moments, nodes[:, :, k], moment[:, k, None, None])
    com = moments.sum(0) / total
    if not jacobian:
        jac = com.new_empty(0)
    else:  # each node's subtree moment: the levels from the deepest up, each adding its slots into the parents'
        subtree, ends = moments, list(levels)
        for start, end in reversed(list(zip([0, *ends[:-1]], ends, strict=True))):
            subtree = subtree.index_add(0, parent[start:end], subtree[start + 1 : end + 1])
        z, origin = nodes[1:, :, 2], nodes[1:, :, 3]
        mass = subtree_mass[:, None, None]
        linear = torch.lerp(z * mass, cross(z, subtree[1:] - mass * origin), revolute[:, None, None])
        jac = _assemble(nodes[0], com, linear / total, dof, weights, nv, base_nv, batch_first)
    return com.t() if batch_first else com, jac


def _nodes_cpu(q, floating, column, multiplier, offset, revolute, origin, parent, _levels):
    return native.tree_nodes(q, floating, column, multiplier, offset, revolute, origin, parent)


def _com_cpu(nodes, moment, subtree_mass, revolute, weights, total, dof, parent, nv, base_nv, jacobian, batch_first,
             _levels):  # fmt: skip
    done = native.tree_com(nodes, moment, subtree_mass, revolute, weights, total, dof, parent, nv, base_nv,
                           jacobian, batch_first)  # fmt: skip
    return None if done is None else (done[0], done[0].new_empty(0) if done[1] is None else done[1])


TREE_NODES = Kernel(
    "tree_nodes",
    "(Tensor q, bool floating, Tensor column, Tensor multiplier, Tensor offset, Tensor revolute, Tensor origin,"
    " Tensor parent, int[] levels) -> Tensor",
    _nodes_reference,
)
TREE_NODES.implement("cpu", _nodes_cpu)
TREE_FRAMES = Kernel(
    "tree_frames", "(Tensor nodes, Tensor offset, Tensor slot, bool batch_first) -> Tensor", _frames_reference
)
TREE_FRAMES.implement("cpu", native.tree_frames)
TREE_FRAME_JACOBIAN = Kernel(
    "tree_frame_jacobian",
    "(Tensor nodes, int slot, Tensor offset, Tensor ancestors, Tensor dofs, Tensor weights, Tensor revolute, int nv,"
    " int base_nv, bool batch_first) -> Tensor",
    _frame_jacobian_reference,
)
TREE_FRAME_JACOBIAN.implement("cpu", native.tree_frame_jacobian)
# (the centre of mass (B, 3) or (3, B), and with ``jacobian`` its Jacobian, else an empty tensor)
TREE_COM = Kernel(
    "tree_com",
    "(Tensor nodes, Tensor moment, Tensor subtree_mass, Tensor revolute, Tensor weights, Tensor total, Tensor dof,"
    " Tensor parent, int nv, int base_nv, bool jacobian, bool batch_first, int[] levels) -> (Tensor, Tensor)",
    _com_reference,
)
TREE_COM.implement("cpu", _com_cpu)
