"""SO(3) and SE(3) helpers in torch: skew, exp, log (rotation vectors), transforms and their validation.

Rotation vectors are in radians. ``so3_log`` has a finite, correct derivative at zero rotation (Taylor branch
behind a double ``where``). Its branch cut is at an angle of pi: there the axis sign is chosen from the
largest diagonal entry and the map is continuous but not differentiable; rotations within about 0.14 rad of
pi use that symmetric-part formula.
"""

from __future__ import annotations

import torch

from kinematics.errors import InvalidTargetError, NonFiniteError, ShapeError
from kinematics.log_thresholds import NEAR_PI_COS, SMALL_SIN_SQ


def skew(v: torch.Tensor) -> torch.Tensor:
    """``(..., 3) -> (..., 3, 3)`` cross-product matrix: ``skew(a) @ b == a x b``."""
    x, y, z = v.unbind(-1)
    o = torch.zeros_like(x)
    return torch.stack((o, -z, y, z, o, -x, -y, x, o), dim=-1).reshape(*v.shape[:-1], 3, 3)


def so3_exp(omega: torch.Tensor) -> torch.Tensor:
    """Rotation vector ``(..., 3)`` in radians to a rotation matrix ``(..., 3, 3)`` (Rodrigues)."""
    theta_sq = (omega * omega).sum(-1, keepdim=True)[..., None]
    small = theta_sq < SMALL_SIN_SQ
    safe_sq = torch.where(small, torch.ones_like(theta_sq), theta_sq)
    theta = safe_sq.sqrt()
    a = torch.where(small, 1.0 - theta_sq / 6.0, torch.sin(theta) / theta)
    b = torch.where(small, 0.5 - theta_sq / 24.0, (1.0 - torch.cos(theta)) / safe_sq)
    k = skew(omega)
    eye = torch.eye(3, dtype=omega.dtype, device=omega.device)
    return eye + a * k + b * (k @ k)


def so3_log(rotation: torch.Tensor) -> torch.Tensor:
    """Rotation matrix ``(..., 3, 3)`` to its shortest rotation vector ``(..., 3)``, angle in [0, pi].

    Differentiable everywhere except at an angle of exactly pi (the branch cut), with the correct,
    finite derivative at the identity.
    """
    return so3_log_matrix_first(rotation.movedim((-2, -1), (0, 1))).movedim(0, -1)


def so3_log_matrix_first(r: torch.Tensor) -> torch.Tensor:
    """``so3_log`` with the matrix axes first: ``(3, 3, ...) -> (3, ...)`` (the solver's batch-last layout)."""
    (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = (row.unbind(0) for row in r.unbind(0))
    v = 0.5 * torch.stack((r21 - r12, r02 - r20, r10 - r01))
    cos = 0.5 * (r00 + r11 + r22 - 1.0)
    sin_sq = (v * v).sum(0)
    small = sin_sq < SMALL_SIN_SQ
    sin = torch.where(small, 1.0, sin_sq).sqrt()
    theta = torch.atan2(sin, cos)
    # Generic branch: v * theta / sin(theta). At the identity: v * (1 + sin^2 / 6).
    generic = v * torch.where(small, 1.0 + sin_sq / 6.0, theta / sin)
    # Near pi: (R + R^T) / 2 - cos I = (1 - cos) a a^T; take the column of the largest diagonal entry (the first
    # one on ties).
    near_pi = cos < NEAR_PI_COS
    d0, d1, d2 = r00 - cos, r11 - cos, r22 - cos
    s01, s02, s12 = 0.5 * (r01 + r10), 0.5 * (r02 + r20), 0.5 * (r12 + r21)
    column = torch.where(
        (d0 >= d1) & (d0 >= d2),
        torch.stack((d0, s01, s02)),
        torch.where(d1 >= d2, torch.stack((s01, d1, s12)), torch.stack((s02, s12, d2))),
    )
    col_norm_sq = (column * column).sum(0)
    col_norm = torch.where(near_pi, col_norm_sq, 1.0).clamp_min(1e-30).sqrt()
    axis = column / col_norm
    # v = sin(theta) a, so |axis . v| is sin(theta) without the small-sine guard above (which would turn a
    # half turn into atan2(1, -1) = 3 pi / 4); abs has a finite derivative at an exact half turn.
    along = (axis * v).sum(0)
    angle = torch.atan2(along.abs(), cos)
    pi_branch = axis * torch.where(along < 0, -angle, angle)
    return torch.where(near_pi, pi_branch, generic)


def so3_log_matrix_first_vjp(r: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """The vector-Jacobian product of ``so3_log_matrix_first`` at ``r`` ``(3, 3, ...)`` for ``grad`` ``(3, ...)``,
    in closed form: ``(3, 3, ...)``, the values autograd gives through the formula, branch for branch (the
    derivative of any 3x3 matrix argument, not only of rotations)."""
    (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = (row.unbind(0) for row in r.unbind(0))
    v = 0.5 * torch.stack((r21 - r12, r02 - r20, r10 - r01))
    cos = 0.5 * (r00 + r11 + r22 - 1.0)
    sin_sq = (v * v).sum(0)
    small, near_pi = sin_sq < SMALL_SIN_SQ, cos < NEAR_PI_COS
    generic, pi_branch = torch.where(near_pi, 0.0, grad), torch.where(near_pi, grad, 0.0)
    # Generic branch: v g with g = theta / sin, theta = atan2(sin, cos); g = 1 + sin^2 / 6 below the small sine.
    sin = torch.where(small, 1.0, sin_sq).sqrt()
    theta = torch.atan2(sin, cos)
    radius_sq = sin * sin + cos * cos
    lam_v = (generic * v).sum(0)
    dg_dsin = (cos / radius_sq * sin - theta) / (sin * sin)
    grad_v = torch.where(
        small, generic * (1.0 + sin_sq / 6.0) + (lam_v / 3.0) * v, generic * (theta / sin) + (lam_v * dg_dsin / sin) * v
    )
    grad_cos = torch.where(small, 0.0, -lam_v / radius_sq)
    # Near pi: axis * (+-atan2(|axis . v|, cos)), axis = the chosen column of the symmetric part, normalised.
    d0, d1, d2 = r00 - cos, r11 - cos, r22 - cos
    s01, s02, s12 = 0.5 * (r01 + r10), 0.5 * (r02 + r20), 0.5 * (r12 + r21)
    pick0, pick1 = (d0 >= d1) & (d0 >= d2), d1 >= d2
    column = torch.where(
        pick0,
        torch.stack((d0, s01, s02)),
        torch.where(pick1, torch.stack((s01, d1, s12)), torch.stack((s02, s12, d2))),
    )
    col_norm_sq = torch.where(near_pi, (column * column).sum(0), 1.0)
    col_norm = col_norm_sq.clamp_min(1e-30).sqrt()
    axis = column / col_norm
    along = (axis * v).sum(0)
    angle = torch.atan2(along.abs(), cos)
    sign = torch.where(along < 0, -1.0, 1.0)
    mu = sign * (pi_branch * axis).sum(0)
    radius_sq = along * along + cos * cos
    k = mu * cos / radius_sq * torch.sign(along)
    grad_axis = (sign * angle) * pi_branch + k * v
    grad_v = grad_v + k * axis
    grad_cos = grad_cos - mu * along.abs() / radius_sq
    live = near_pi & (col_norm_sq > 1e-30)
    grad_column = grad_axis / col_norm - torch.where(live, (grad_axis * column).sum(0) / col_norm**3, 0.0) * column
    g0, g1, g2 = grad_column.unbind(0)
    zero = torch.zeros_like(g0)
    grad_d0 = torch.where(pick0, g0, zero)
    grad_d1 = torch.where(~pick0 & pick1, g1, zero)
    grad_d2 = torch.where(~pick0 & ~pick1, g2, zero)
    grad_s01 = torch.where(pick0, g1, torch.where(pick1, g0, zero))
    grad_s02 = torch.where(pick0, g2, torch.where(pick1, zero, g0))
    grad_s12 = torch.where(pick0, zero, torch.where(pick1, g2, g1))
    grad_cos = grad_cos - grad_d0 - grad_d1 - grad_d2
    v0, v1, v2 = (0.5 * grad_v).unbind(0)
    c = 0.5 * grad_cos
    return torch.stack(
        (
            torch.stack((c + grad_d0, 0.5 * grad_s01 - v2, 0.5 * grad_s02 + v1)),
            torch.stack((0.5 * grad_s01 + v2, c + grad_d1, 0.5 * grad_s12 - v0)),
            torch.stack((0.5 * grad_s02 - v1, 0.5 * grad_s12 + v0, c + grad_d2)),
        )
    )


def make_transform(rotation: torch.Tensor, translation: torch.Tensor) -> torch.Tensor:
    """``(..., 3, 3)`` and ``(..., 3)`` to a homogeneous transform ``(..., 4, 4)``."""
    batch = torch.broadcast_shapes(rotation.shape[:-2], translation.shape[:-1])
    top = torch.cat((rotation.expand(*batch, 3, 3), translation.expand(*batch, 3)[..., None]), -1)
    bottom = torch.zeros(*batch, 1, 4, dtype=rotation.dtype, device=rotation.device)
    bottom[..., 0, 3] = 1.0
    return torch.cat((top, bottom), -2)


def transform_inverse(transform: torch.Tensor) -> torch.Tensor:
    """Inverse of a rigid transform ``(..., 4, 4)``."""
    rt = transform[..., :3, :3].transpose(-1, -2)
    return make_transform(rt, -(rt @ transform[..., :3, 3:4])[..., 0])


def se3_exp_left(xi: torch.Tensor, transform: torch.Tensor) -> torch.Tensor:
    """Perturb ``transform`` by a root-frame twist-like increment ``xi = (dp, domega)`` of shape ``(..., 6)``.

    Returns ``T'`` with ``p' = p + dp`` and ``R' = exp(domega) R`` (the same split the IK error uses).
    """
    rotation = so3_exp(xi[..., 3:]) @ transform[..., :3, :3]
    return make_transform(rotation, transform[..., :3, 3] + xi[..., :3])


FLOAT32_GEOMETRY_TOLERANCE = 1e-6
"""Allowed ``max |R^T R - I|`` of a float64 input rotation: what float32 geometry gives. A rotation computed in float32
(another library's forward kinematics, geometry parsed in float32) and cast to float64 is orthonormal only to a
few float32 ulps (``eps = 1.2e-7``; ``R^T R`` sums three products, each rounded: up to about ``6 eps = 7e-7``). Such
a target is a rigid transform to the precision it was made in; its deviation moves the rotation error by about
1e-6 rad, far below any success tolerance, so it is accepted, while a clearly invalid one (a scaled, sheared or
reflected block) still fails."""


def rotation_tolerance(dtype: torch.dtype) -> float:
    """Allowed ``max |R^T R - I|`` for an input rotation of this dtype (``FLOAT32_GEOMETRY_TOLERANCE`` for float64)."""
    return 1e-4 if dtype in (torch.float32, torch.float16, torch.bfloat16) else FLOAT32_GEOMETRY_TOLERANCE


def validate_transform(transform: torch.Tensor, name: str = "target") -> None:
    """Raise a typed error naming the failed check unless ``transform`` is a finite SE(3) batch ``(..., 4, 4)``."""
    if transform.ndim < 2 or transform.shape[-2:] != (4, 4):
        raise ShapeError(f"{name} must have shape (..., 4, 4), got {tuple(transform.shape)}")
    if not torch.isfinite(transform).all():
        raise NonFiniteError(f"{name} contains NaN or infinite entries")
    if transform.numel() == 0:
        return  # An empty batch is valid (and max() has nothing to reduce).
    tol = rotation_tolerance(transform.dtype)
    bottom = transform[..., 3, :]
    expected = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=transform.dtype, device=transform.device)
    if (bottom - expected).abs().max() > tol:
        raise InvalidTargetError(
            f"{name}: last row must be [0, 0, 0, 1] (max deviation {float((bottom - expected).abs().max()):.3g})"
        )
    rot = transform[..., :3, :3]
    eye = torch.eye(3, dtype=transform.dtype, device=transform.device)
    ortho = (rot.transpose(-1, -2) @ rot - eye).abs().amax()
    if ortho > tol:
        raise InvalidTargetError(
            f"{name}: rotation block is not orthonormal (max |R^T R - I| = {float(ortho):.3g} > {tol:g})"
        )
    if (torch.linalg.det(rot) <= 0).any():
        raise InvalidTargetError(f"{name}: rotation block has determinant -1 (a reflection, not a rotation)")
