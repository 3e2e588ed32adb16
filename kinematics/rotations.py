"""SO(3) and SE(3) helpers in torch: skew, exp, log (rotation vectors), transforms and their validation.

Rotation vectors are in radians. ``so3_log`` has a finite, correct derivative at zero rotation (Taylor branch
behind a double ``where``). Its branch cut is at an angle of pi: there the axis sign is chosen from the
largest diagonal entry and the map is continuous but not differentiable; rotations within about 0.14 rad of
pi use that symmetric-part formula.
"""

from __future__ import annotations

import torch

from kinematics.errors import InvalidTargetError, NonFiniteError, ShapeError

# Below this squared sine the log uses its Taylor expansion (theta / sin(theta) ~ 1 + theta^2 / 6).
_SMALL_SIN_SQ = 1e-12
# Cosine below which the log reads the axis from the symmetric part (angle above ~3.0 rad).
_NEAR_PI_COS = -0.99


def skew(v: torch.Tensor) -> torch.Tensor:
    """``(..., 3) -> (..., 3, 3)`` cross-product matrix: ``skew(a) @ b == a x b``."""
    x, y, z = v.unbind(-1)
    o = torch.zeros_like(x)
    return torch.stack((o, -z, y, z, o, -x, -y, x, o), dim=-1).reshape(*v.shape[:-1], 3, 3)


def so3_exp(omega: torch.Tensor) -> torch.Tensor:
    """Rotation vector ``(..., 3)`` in radians to a rotation matrix ``(..., 3, 3)`` (Rodrigues)."""
    theta_sq = (omega * omega).sum(-1, keepdim=True)[..., None]
    small = theta_sq < _SMALL_SIN_SQ
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
    r = rotation
    v = 0.5 * torch.stack((r[..., 2, 1] - r[..., 1, 2], r[..., 0, 2] - r[..., 2, 0], r[..., 1, 0] - r[..., 0, 1]), -1)
    cos = 0.5 * (r[..., 0, 0] + r[..., 1, 1] + r[..., 2, 2] - 1.0)
    sin_sq = (v * v).sum(-1)
    small = sin_sq < _SMALL_SIN_SQ
    sin = torch.where(small, torch.ones_like(sin_sq), sin_sq).sqrt()
    theta = torch.atan2(sin, cos)
    # Generic branch: v * theta / sin(theta). At the identity: v * (1 + sin^2 / 6).
    scale = torch.where(small, 1.0 + sin_sq / 6.0, theta / sin)
    generic = v * scale[..., None]
    # Near pi: (R + R^T) / 2 - cos I = (1 - cos) a a^T; take the column of the largest diagonal entry.
    near_pi = cos < _NEAR_PI_COS
    eye = torch.eye(3, dtype=r.dtype, device=r.device)
    sym = 0.5 * (r + r.transpose(-1, -2)) - cos[..., None, None] * eye
    diag = torch.diagonal(sym, dim1=-2, dim2=-1)
    column = torch.gather(sym, -1, diag.argmax(-1)[..., None, None].expand(*sym.shape[:-1], 1))[..., 0]
    col_norm_sq = (column * column).sum(-1, keepdim=True)
    col_norm = torch.where(near_pi[..., None], col_norm_sq, torch.ones_like(col_norm_sq)).clamp_min(1e-30).sqrt()
    axis = column / col_norm
    # v = sin(theta) a, so |axis . v| is sin(theta) without the small-sine guard above (which would turn a
    # half turn into atan2(1, -1) = 3 pi / 4); abs has a finite derivative at an exact half turn.
    along = (axis * v).sum(-1, keepdim=True)
    sign = torch.where(along < 0, -1.0, 1.0).to(r.dtype)
    pi_branch = axis * sign * torch.atan2(along.abs(), cos[..., None])
    return torch.where(near_pi[..., None], pi_branch, generic)


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


def rotation_tolerance(dtype: torch.dtype) -> float:
    """Allowed ``max |R^T R - I|`` for an input rotation of this dtype."""
    return 1e-4 if dtype in (torch.float32, torch.float16, torch.bfloat16) else 1e-8


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
