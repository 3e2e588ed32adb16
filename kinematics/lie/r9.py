"""The R^9 -> SE(3) parameterisation: a translation and a 6D rotation made orthonormal by Gram-Schmidt.

``x = (t, a1, a2)`` maps to ``T = [R | t]`` with ``b1 = a1/|a1|``, ``b2 = normalise(a2 - (b1.a2) b1)``,
``b3 = b1 x b2`` and ``R = [b1 b2 b3]`` (columns). The map is continuous and onto SO(3), with no periodic
singularity (unlike Euler angles or a wrapped angle). Its Jacobian is written out in ``_GramSchmidt.backward``.

Singular set: ``a1 = 0`` or ``a2`` parallel to ``a1`` (including ``a2 = 0``). There the rotation is undefined;
near it the derivative grows like ``1/|a1|`` and ``1/|a2 - (b1.a2) b1|``. Norms are floored at ``eps`` so values
and gradients stay finite, and ``singularity_margin`` reports the distance to the set so callers can regularise.
"""

from __future__ import annotations

import torch

from kinematics.errors import ShapeError

EPS = 1e-12


def _normalise_backward(u: torch.Tensor, norm: torch.Tensor, grad_b: torch.Tensor) -> torch.Tensor:
    """VJP of ``b = u / |u|``: ``(grad_b - b (b . grad_b)) / |u|``."""
    b = u / norm
    return (grad_b - b * (b * grad_b).sum(-1, keepdim=True)) / norm


class _GramSchmidt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a1: torch.Tensor, a2: torch.Tensor) -> torch.Tensor:
        n1 = a1.norm(dim=-1, keepdim=True).clamp_min(EPS)
        b1 = a1 / n1
        u2 = a2 - b1 * (b1 * a2).sum(-1, keepdim=True)
        n2 = u2.norm(dim=-1, keepdim=True).clamp_min(EPS)
        b2 = u2 / n2
        b3 = torch.linalg.cross(b1, b2)
        ctx.save_for_backward(a1, a2, n1, u2, n2, b1, b2)
        return torch.stack((b1, b2, b3), -1)

    @staticmethod
    def backward(ctx, grad_r: torch.Tensor):
        a1, a2, n1, u2, n2, b1, b2 = ctx.saved_tensors
        g1, g2, g3 = grad_r.unbind(-1)
        # b3 = b1 x b2: d<g3, b1 x b2> = <b2 x g3, db1> + <g3 x b1, db2>
        gb1 = g1 + torch.linalg.cross(b2, g3)
        gb2 = g2 + torch.linalg.cross(g3, b1)
        gu2 = _normalise_backward(u2, n2, gb2)
        # u2 = a2 - b1 (b1 . a2): du2 = da2 - db1 (b1.a2) - b1 (db1.a2 + b1.da2)
        dot = (b1 * a2).sum(-1, keepdim=True)
        ga2 = gu2 - b1 * (b1 * gu2).sum(-1, keepdim=True)
        gb1 = gb1 - gu2 * dot - a2 * (b1 * gu2).sum(-1, keepdim=True)
        ga1 = _normalise_backward(a1, n1, gb1)
        return ga1, ga2


def r9_to_se3(x: torch.Tensor) -> torch.Tensor:
    """``(..., 9) -> (..., 4, 4)``: ``x = (translation (3), a1 (3), a2 (3))``. Differentiable off the singular set."""
    if x.shape[-1] != 9:
        raise ShapeError(f"R^9 parameters must have shape (..., 9), got {tuple(x.shape)}")
    rotation = _GramSchmidt.apply(x[..., 3:6], x[..., 6:9])
    top = torch.cat((rotation, x[..., :3, None]), -1)
    bottom = torch.zeros(*x.shape[:-1], 1, 4, dtype=x.dtype, device=x.device)
    bottom[..., 0, 3] = 1.0
    return torch.cat((top, bottom), -2)


def se3_to_r9(transform: torch.Tensor) -> torch.Tensor:
    """A right inverse: ``(..., 4, 4) -> (..., 9)`` with ``a1, a2`` the first two rotation columns."""
    return torch.cat((transform[..., :3, 3], transform[..., :3, 0], transform[..., :3, 1]), -1)


def singularity_margin(x: torch.Tensor) -> torch.Tensor:
    """``(..., 9) -> (...)``: ``min(|a1|, |a2 - (b1.a2) b1|)``, zero exactly on the singular set."""
    a1, a2 = x[..., 3:6], x[..., 6:9]
    n1 = a1.norm(dim=-1)
    b1 = a1 / n1.clamp_min(EPS)[..., None]
    u2 = a2 - b1 * (b1 * a2).sum(-1, keepdim=True)
    return torch.minimum(n1, u2.norm(dim=-1))
