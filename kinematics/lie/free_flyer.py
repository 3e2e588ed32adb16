"""The free flyer's configuration manifold, SE(3), in Pinocchio's conventions, batched in torch.

A base configuration is ``(..., 7)``: position ``(x, y, z)`` then the orientation as a unit quaternion in
``(x, y, z, w)`` order. A base velocity is ``(..., 6)``: the linear then the angular velocity, both in the base
frame. ``integrate(q, v) = q * exp6(v)`` (the increment acts in the base frame) and
``difference(q0, q1) = log6(q0^-1 * q1)``, as ``pin.integrate`` / ``pin.difference`` on a
``JointModelFreeFlyer``. Their derivatives are in tangent coordinates (6 x 6), as ``pin.dIntegrate`` /
``pin.dDifference``: ``integrate_jacobians`` returns ``(d/dq, d/dv)`` with ``d/dq = Ad(exp6(v))^-1`` and
``d/dv = Jexp6(v)`` (the right Jacobian), ``difference_jacobians`` returns ``(d/dq0, d/dq1)`` with
``d/dq1 = Jlog6(D)`` and ``d/dq0 = -Jlog6(D) Ad(D)^-1`` for ``D = q0^-1 * q1``.

Every function has finite values and derivatives at zero rotation (Taylor branches behind a double ``where``).
Quaternions are normalised where they are read (a rotation matrix is built from ``q / |q|``), so a quaternion
a little off the unit sphere still gives a rotation; the callers check the norm.
"""

from __future__ import annotations

import torch

from kinematics.lie.rotations import skew

__all__ = [
    "difference",
    "difference_jacobians",
    "integrate",
    "integrate_jacobians",
    "quaternion_to_rotation",
    "rotation_entries",
]


def rotation_entries(x, y, z, w) -> list[list[torch.Tensor]]:
    """The nine entries of the rotation of quaternion ``(x, y, z, w)`` (any, equal shapes; not necessarily unit:
    the quaternion is normalised), as ``[[r00, r01, r02], [r10, ...], ...]``."""
    s = 2.0 / (x * x + y * y + z * z + w * w)
    xs, ys, zs = x * s, y * s, z * s
    wx, wy, wz = w * xs, w * ys, w * zs
    xx, xy, xz = x * xs, x * ys, x * zs
    yy, yz, zz = y * ys, y * zs, z * zs
    return [
        [1.0 - (yy + zz), xy - wz, xz + wy],
        [xy + wz, 1.0 - (xx + zz), yz - wx],
        [xz - wy, yz + wx, 1.0 - (xx + yy)],
    ]


def quaternion_to_rotation(quaternion: torch.Tensor) -> torch.Tensor:
    """``(..., 4)`` quaternion ``(x, y, z, w)`` -> ``(..., 3, 3)`` rotation (of the normalised quaternion)."""
    rows = rotation_entries(*quaternion.unbind(-1))
    return torch.stack([torch.stack(row, -1) for row in rows], -2)


def _small(theta: torch.Tensor) -> torch.Tensor:
    return theta < (1e-2 if theta.dtype == torch.float64 else 0.2)


def _angle(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``theta = |w|``, a ``theta`` safe to divide by (1 on the Taylor branch), and the Taylor-branch mask."""
    theta_sq = (w * w).sum(-1)
    small = _small(theta_sq.sqrt().detach()) if theta_sq.requires_grad else _small(theta_sq.sqrt())
    safe = torch.where(small, torch.ones_like(theta_sq), theta_sq).sqrt()
    return theta_sq, safe, small


def _coefficients(w: torch.Tensor):
    """SO(3) series of ``w``: ``a = sin t / t``, ``b = (1 - cos t) / t^2``, ``c = (t - sin t) / t^3`` and the
    quaternion's ``(sin(t/2) / t, cos(t/2))``, each ``(...)``."""
    t2, t, small = _angle(w)
    sin, cos = torch.sin(t), torch.cos(t)
    a = torch.where(small, 1.0 - t2 / 6.0 + t2 * t2 / 120.0, sin / t)
    b = torch.where(small, 0.5 - t2 / 24.0 + t2 * t2 / 720.0, (1.0 - cos) / (t * t))
    c = torch.where(small, 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0, (t - sin) / (t * t * t))
    half_sin = torch.where(small, 0.5 - t2 / 48.0 + t2 * t2 / 3840.0, torch.sin(0.5 * t) / t)
    half_cos = torch.where(small, 1.0 - t2 / 8.0 + t2 * t2 / 384.0, torch.cos(0.5 * t))
    return a, b, c, half_sin, half_cos


def _quaternion_multiply(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    px, py, pz, pw = p.unbind(-1)
    qx, qy, qz, qw = q.unbind(-1)
    return torch.stack(
        (
            pw * qx + px * qw + py * qz - pz * qy,
            pw * qy - px * qz + py * qw + pz * qx,
            pw * qz + px * qy - py * qx + pz * qw,
            pw * qw - px * qx - py * qy - pz * qz,
        ),
        -1,
    )


def integrate(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``(..., 7) x (..., 6) -> (..., 7)``: ``q * exp6(v)``, the result's quaternion normalised and its sign that
    of ``q``'s product with ``exp(w)`` (real part of ``exp(w)`` >= 0 for angles up to pi)."""
    position, quaternion = q[..., :3], q[..., 3:]
    linear, angular = v[..., :3], v[..., 3:]
    _, b, c, half_sin, half_cos = _coefficients(angular)
    # V(w) v = v + b w x v + c w x (w x v)
    wxv = torch.linalg.cross(angular, linear, dim=-1)
    step = linear + b[..., None] * wxv + c[..., None] * torch.linalg.cross(angular, wxv, dim=-1)
    rotation = quaternion_to_rotation(quaternion)
    new_position = position + (rotation @ step[..., None])[..., 0]
    increment = torch.cat((half_sin[..., None] * angular, half_cos[..., None]), -1)
    new_quaternion = _quaternion_multiply(quaternion, increment)
    new_quaternion = new_quaternion / new_quaternion.norm(dim=-1, keepdim=True)
    return torch.cat((new_position, new_quaternion), -1)


def _log3_quaternion(quaternion: torch.Tensor) -> torch.Tensor:
    """Rotation vector ``(..., 3)`` of a quaternion ``(..., 4)``, angle in [0, pi]."""
    sign = torch.where(quaternion[..., 3:] < 0, -1.0, 1.0).to(quaternion.dtype)
    quaternion = quaternion * sign
    vec, real = quaternion[..., :3], quaternion[..., 3]
    s2 = (vec * vec).sum(-1)
    small = s2.detach() < 1e-12 if s2.dtype == torch.float64 else s2.detach() < 1e-6
    s = torch.where(small, torch.ones_like(s2), s2).sqrt()
    # theta = 2 atan2(s, real); theta / s -> 2 / real (1 - s^2 / (3 real^2)) near s = 0 (real > 0 there).
    real_safe = torch.where(small, real, torch.ones_like(real))
    scale = torch.where(small, 2.0 / real_safe - 2.0 * s2 / (3.0 * real_safe**3), 2.0 * torch.atan2(s, real) / s)
    return scale[..., None] * vec


def _v_inverse(angular: torch.Tensor, linear: torch.Tensor) -> torch.Tensor:
    """``V(w)^-1 p`` with ``V^-1 = I - w^/2 + (1 - a / (2 b)) / t^2 w^2``."""
    t2, t, small = _angle(angular)
    half = 0.5 * t
    # (1 - (t/2) cot(t/2)) / t^2 = 1/12 + t^2/720 + t^4/30240
    d = torch.where(
        small, 1.0 / 12.0 + t2 / 720.0 + t2 * t2 / 30240.0, (1.0 - half * torch.cos(half) / torch.sin(half)) / (t * t)
    )
    wxp = torch.linalg.cross(angular, linear, dim=-1)
    return linear - 0.5 * wxp + d[..., None] * torch.linalg.cross(angular, wxp, dim=-1)


def _conjugate(quaternion: torch.Tensor) -> torch.Tensor:
    return torch.cat((-quaternion[..., :3], quaternion[..., 3:]), -1)


def _relative(q0: torch.Tensor, q1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``D = q0^-1 * q1`` as its translation ``(..., 3)`` and unit quaternion ``(..., 4)``."""
    r0 = quaternion_to_rotation(q0[..., 3:])
    translation = (r0.transpose(-1, -2) @ (q1[..., :3] - q0[..., :3])[..., None])[..., 0]
    quat0 = q0[..., 3:] / q0[..., 3:].norm(dim=-1, keepdim=True)
    quat1 = q1[..., 3:] / q1[..., 3:].norm(dim=-1, keepdim=True)
    return translation, _quaternion_multiply(_conjugate(quat0), quat1)


def difference(q0: torch.Tensor, q1: torch.Tensor) -> torch.Tensor:
    """``(..., 7) x (..., 7) -> (..., 6)``: ``log6(q0^-1 * q1)`` (linear then angular part)."""
    translation, quaternion = _relative(q0, q1)
    angular = _log3_quaternion(quaternion)
    return torch.cat((_v_inverse(angular, translation), angular), -1)


def _jr3(w: torch.Tensor) -> torch.Tensor:
    """Right Jacobian of SO(3): ``I - b w^ + c w^2``."""
    _, b, c, _, _ = _coefficients(w)
    k = skew(w)
    eye = torch.eye(3, dtype=w.dtype, device=w.device)
    return eye - b[..., None, None] * k + c[..., None, None] * (k @ k)


def _jr3_inverse(w: torch.Tensor) -> torch.Tensor:
    """``I + w^/2 + d w^2`` with ``d = (1 - (t/2) cot(t/2)) / t^2``."""
    t2, t, small = _angle(w)
    half = 0.5 * t
    d = torch.where(
        small, 1.0 / 12.0 + t2 / 720.0 + t2 * t2 / 30240.0, (1.0 - half * torch.cos(half) / torch.sin(half)) / (t * t)
    )
    k = skew(w)
    eye = torch.eye(3, dtype=w.dtype, device=w.device)
    return eye + 0.5 * k + d[..., None, None] * (k @ k)


def _q_left(rho: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
    """Barfoot's ``Q(rho, phi)``, the off-diagonal block of SE(3)'s left Jacobian (linear part first)."""
    t2, t, small = _angle(phi)
    sin, cos = torch.sin(t), torch.cos(t)
    a = torch.where(small, 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0, (t - sin) / t**3)
    b = torch.where(small, 1.0 / 24.0 - t2 / 720.0 + t2 * t2 / 40320.0, (t2 + 2.0 * cos - 2.0) / (2.0 * t**4))
    c = torch.where(
        small, 1.0 / 120.0 - t2 / 2520.0 + t2 * t2 / 120960.0, (2.0 * t - 3.0 * sin + t * cos) / (2.0 * t**5)
    )
    r, p = skew(rho), skew(phi)
    pr, rp = p @ r, r @ p
    prp = pr @ p
    return (
        0.5 * r
        + a[..., None, None] * (pr + rp + prp)
        + b[..., None, None] * (p @ pr + rp @ p - 3.0 * prp)
        + c[..., None, None] * (prp @ p + p @ prp)
    )


def _block(top_left, top_right, bottom_left, bottom_right) -> torch.Tensor:
    return torch.cat((torch.cat((top_left, top_right), -1), torch.cat((bottom_left, bottom_right), -1)), -2)


def jexp6(v: torch.Tensor) -> torch.Tensor:
    """Right Jacobian of SE(3)'s exponential at ``v`` ``(..., 6)`` (as ``pin.Jexp6``): ``(..., 6, 6)``."""
    linear, angular = v[..., :3], v[..., 3:]
    jr = _jr3(angular)
    q = _q_left(-linear, -angular)
    return _block(jr, q, torch.zeros_like(jr), jr)


def jlog6_of_log(log: torch.Tensor) -> torch.Tensor:
    """``Jlog6(exp6(log))``, the inverse of ``jexp6(log)``, ``(..., 6) -> (..., 6, 6)``."""
    linear, angular = log[..., :3], log[..., 3:]
    inv = _jr3_inverse(angular)
    q = _q_left(-linear, -angular)
    return _block(inv, -inv @ q @ inv, torch.zeros_like(inv), inv)


def _adjoint(rotation: torch.Tensor, translation: torch.Tensor) -> torch.Tensor:
    """Action matrix of ``(R, p)`` on (linear, angular) motions: ``[[R, p^ R], [0, R]]``."""
    return _block(rotation, skew(translation) @ rotation, torch.zeros_like(rotation), rotation)


def _exp6_transform(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    zero = torch.zeros_like(v[..., :3])
    identity = torch.cat((zero, torch.ones_like(v[..., :1])), -1)
    out = integrate(torch.cat((zero, identity), -1), v)
    return quaternion_to_rotation(out[..., 3:]), out[..., :3]


def integrate_jacobians(q: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(d integrate / dq, d integrate / dv)``, each ``(..., 6, 6)`` in tangent coordinates (``pin.dIntegrate``
    ARG0 and ARG1): ``Ad(exp6(v))^-1`` and ``Jexp6(v)``."""
    rotation, translation = _exp6_transform(v)
    rt = rotation.transpose(-1, -2)
    inverse_translation = -(rt @ translation[..., None])[..., 0]
    del q  # the derivatives of a Lie group's integrate do not depend on the point
    return _adjoint(rt, inverse_translation), jexp6(v)


def difference_jacobians(q0: torch.Tensor, q1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(d difference / dq0, d difference / dq1)``, each ``(..., 6, 6)`` in tangent coordinates
    (``pin.dDifference`` ARG0 and ARG1): ``-Jlog6(D) Ad(D)^-1`` and ``Jlog6(D)`` for ``D = q0^-1 * q1``."""
    translation, quaternion = _relative(q0, q1)
    angular = _log3_quaternion(quaternion)
    jlog = jlog6_of_log(torch.cat((_v_inverse(angular, translation), angular), -1))
    rt = quaternion_to_rotation(quaternion).transpose(-1, -2)
    inverse = _adjoint(rt, -(rt @ translation[..., None])[..., 0])
    return -jlog @ inverse, jlog
