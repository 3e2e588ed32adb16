"""SO(3)/SE(3) helpers: exp/log round trips (near 0 and near pi too), the log's derivative at the identity,
gradchecks, transforms, the tangent perturbation the IK tests use, and target validation."""

from __future__ import annotations

import math

import pytest
import torch

from kinematics import InvalidTargetError, NonFiniteError, ProjectError, ShapeError
from kinematics.ik.layer import pose_error
from kinematics.lie.rotations import (
    make_transform,
    se3_exp_left,
    skew,
    so3_exp,
    so3_log,
    transform_inverse,
    validate_transform,
)

F64 = torch.float64
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])


def _axes(n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(n, 3, generator=gen, dtype=F64), dim=-1)


def _angles(seed: int) -> torch.Tensor:
    """Generic angles in [0, pi), tiny ones (1e-9 .. 1e-3), near pi (within 0.1 rad), and exact 0."""
    gen = torch.Generator().manual_seed(seed)
    generic = torch.rand(200, generator=gen, dtype=F64) * math.pi
    tiny = 10.0 ** (-3.0 - 6.0 * torch.rand(100, generator=gen, dtype=F64))
    near_pi = math.pi - 0.1 * torch.rand(200, generator=gen, dtype=F64).clamp_min(1e-9)
    very_near_pi = math.pi - 10.0 ** (-3.0 - 5.0 * torch.rand(50, generator=gen, dtype=F64))
    return torch.cat((generic, tiny, near_pi, very_near_pi, torch.zeros(2, dtype=F64)))


def _rodrigues_reference(w: torch.Tensor) -> torch.Tensor:
    return torch.linalg.matrix_exp(skew(w))


def test_skew_is_the_cross_product_matrix():
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, 5, 3, generator=gen, dtype=F64)
    torch.testing.assert_close((skew(a) @ b[..., None])[..., 0], torch.linalg.cross(a, b))
    torch.testing.assert_close(skew(a), -skew(a).transpose(-1, -2))


def test_so3_exp_equals_the_matrix_exponential():
    angles = _angles(1)
    w = _axes(angles.numel(), 2) * angles[:, None]
    rot = so3_exp(w)
    torch.testing.assert_close(rot, _rodrigues_reference(w), rtol=0, atol=1e-13)
    eye = torch.eye(3, dtype=F64)
    torch.testing.assert_close(rot.transpose(-1, -2) @ rot, eye.expand_as(rot), rtol=0, atol=1e-14)
    torch.testing.assert_close(torch.linalg.det(rot), torch.ones(angles.numel(), dtype=F64))


@DTYPES
def test_so3_log_inverts_so3_exp(dtype):
    angles = _angles(3)
    w = _axes(angles.numel(), 4) * angles[:, None]
    rot = so3_exp(w).to(dtype)  # exact rotations, rounded to dtype
    log = so3_log(rot)
    assert log.dtype == dtype and log.shape == w.shape
    tol = 1e-12 if dtype == F64 else 2e-6
    # exp(log(R)) == R everywhere, including within 0.1 rad of pi (the symmetric-part branch).
    torch.testing.assert_close(so3_exp(log.to(F64)), rot.to(F64), rtol=0, atol=tol)
    # log(exp(w)) == w for angles below pi; the angle is in [0, pi].
    torch.testing.assert_close(log.to(F64), w, rtol=0, atol=tol * 5)
    assert (log.to(F64).norm(dim=-1) <= math.pi + tol).all()


@DTYPES
def test_so3_log_of_a_half_turn_has_angle_pi(dtype):
    """At exactly pi the axis sign is a branch choice, but the angle must be pi and exp(log(R)) == R."""
    w = _axes(16, 5) * math.pi
    rot = so3_exp(w).to(dtype)
    log = so3_log(rot).to(F64)
    tol = 1e-12 if dtype == F64 else 2e-6
    torch.testing.assert_close(log.norm(dim=-1), torch.full((16,), math.pi, dtype=F64), rtol=0, atol=tol)
    same_or_opposite = torch.minimum((log - w).norm(dim=-1), (log + w).norm(dim=-1))
    assert same_or_opposite.max() < tol * 10
    torch.testing.assert_close(so3_exp(log), rot.to(F64), rtol=0, atol=tol)


def test_so3_log_derivative_at_identity_is_the_identity_map():
    """d log(exp(w)) / dw = I at w = 0, by autograd at an exact zero input, and by central differences."""
    w0 = torch.zeros(3, dtype=F64)
    jac = torch.autograd.functional.jacobian(lambda w: so3_log(so3_exp(w)), w0)
    assert torch.isfinite(jac).all()
    torch.testing.assert_close(jac, torch.eye(3, dtype=F64), rtol=0, atol=1e-15)
    eps = 1e-6
    steps = eps * torch.eye(3, dtype=F64)
    fd = (so3_log(so3_exp(steps)) - so3_log(so3_exp(-steps))).T / (2 * eps)
    torch.testing.assert_close(fd, torch.eye(3, dtype=F64), rtol=0, atol=1e-9)
    torch.testing.assert_close(jac, fd, rtol=0, atol=1e-9)


def test_so3_log_derivative_wrt_the_matrix_at_identity():
    """At R = I the derivative of log w.r.t. R is the vee of the skew part: finite, no NaN, no inf."""
    rot = torch.eye(3, dtype=F64, requires_grad=True)
    jac = torch.autograd.functional.jacobian(so3_log, rot.detach())  # (3, 3, 3)
    expected = torch.zeros(3, 3, 3, dtype=F64)
    for k, (i, j) in enumerate(((2, 1), (0, 2), (1, 0))):
        expected[k, i, j], expected[k, j, i] = 0.5, -0.5
    torch.testing.assert_close(jac, expected, rtol=0, atol=1e-15)
    so3_log(rot).square().sum().backward()
    assert torch.isfinite(rot.grad).all() and rot.grad.abs().max() == 0


@DTYPES
def test_so3_log_gradient_is_finite_at_zero_and_at_pi(dtype):
    """Zero rotation: Taylor branch behind a double where. pi: the documented branch cut, still finite."""
    rot = torch.stack((torch.eye(3, dtype=F64), so3_exp(torch.tensor([0.0, math.pi, 0.0], dtype=F64))))
    rot = rot.to(dtype).requires_grad_()
    (so3_log(rot) * torch.tensor([1.0, 2.0, 3.0], dtype=dtype)).sum().backward()
    assert torch.isfinite(rot.grad).all()


def test_gradcheck_so3_log_away_from_pi():
    angles = torch.tensor([1e-3, 0.3, 1.0, 2.0, 2.9, 3.05], dtype=F64)  # 3.05 rad: symmetric-part branch
    rot = so3_exp(_axes(6, 6) * angles[:, None]).requires_grad_()
    assert torch.autograd.gradcheck(so3_log, (rot,))


def test_gradcheck_so3_exp_and_the_composition():
    w = (_axes(4, 7) * torch.tensor([1e-4, 0.5, 1.5, 2.5], dtype=F64)[:, None]).requires_grad_()
    assert torch.autograd.gradcheck(so3_exp, (w,))
    # log(exp(w)) is the identity map below pi: its Jacobian is I.
    jac = torch.autograd.functional.jacobian(lambda x: so3_log(so3_exp(x)).sum(0), w.detach())
    torch.testing.assert_close(jac, torch.eye(3, dtype=F64)[:, None, :].expand(3, 4, 3), rtol=0, atol=1e-10)


def test_transform_inverse_and_make_transform():
    gen = torch.Generator().manual_seed(8)
    rot = so3_exp(torch.randn(5, 3, generator=gen, dtype=F64))
    trans = torch.randn(5, 3, generator=gen, dtype=F64)
    t = make_transform(rot, trans)
    assert t.shape == (5, 4, 4)
    torch.testing.assert_close(t[:, 3], torch.tensor([0.0, 0, 0, 1], dtype=F64).expand(5, 4), rtol=0, atol=0)
    torch.testing.assert_close(t @ transform_inverse(t), torch.eye(4, dtype=F64).expand(5, 4, 4))
    torch.testing.assert_close(transform_inverse(t), torch.linalg.inv(t))
    # make_transform broadcasts one rotation over a batch of translations.
    assert make_transform(rot[0], trans).shape == (5, 4, 4)


def test_se3_exp_left_stays_on_se3_and_matches_the_ik_error_split():
    gen = torch.Generator().manual_seed(9)
    t0 = make_transform(so3_exp(torch.randn(4, 3, generator=gen, dtype=F64)), torch.randn(4, 3, dtype=F64))
    xi = 0.2 * torch.randn(4, 6, generator=gen, dtype=F64)
    t1 = se3_exp_left(xi, t0)
    validate_transform(t1)
    torch.testing.assert_close(t1[:, :3, 3], t0[:, :3, 3] + xi[:, :3])
    torch.testing.assert_close(t1[:, :3, :3], so3_exp(xi[:, 3:]) @ t0[:, :3, :3])
    # pose_error(target, reached) recovers the increment: position difference and log(R_t R_r^T).
    position, rotation = pose_error(t1, t0)
    torch.testing.assert_close(torch.cat((position, rotation), -1), xi, rtol=0, atol=1e-12)
    torch.testing.assert_close(se3_exp_left(torch.zeros(6, dtype=F64), t0), t0, rtol=0, atol=0)


# --------------------------------------------------------------------------------------------------
# validate_transform
# --------------------------------------------------------------------------------------------------


def _valid(dtype=F64) -> torch.Tensor:
    return make_transform(so3_exp(torch.tensor([0.3, -0.2, 0.9], dtype=F64)), torch.tensor([0.4, 0.1, 0.5])).to(dtype)


@DTYPES
def test_validate_transform_accepts_valid_batches(dtype):
    validate_transform(_valid(dtype))
    validate_transform(_valid(dtype).expand(2, 3, 4, 4))
    validate_transform(torch.zeros(0, 4, 4, dtype=dtype))  # an empty batch is valid


@pytest.mark.parametrize("shape", [(4,), (3, 4), (4, 3), (2, 4, 5), (16,)])
def test_validate_transform_rejects_shapes(shape):
    with pytest.raises(ShapeError, match=r"\(\.\.\., 4, 4\)"):
        validate_transform(torch.zeros(shape, dtype=F64))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_validate_transform_rejects_non_finite(bad):
    t = _valid().expand(3, 4, 4).clone()
    t[1, 0, 3] = bad
    with pytest.raises(NonFiniteError, match="NaN or infinite"):
        validate_transform(t, name="goal")
    with pytest.raises(NonFiniteError, match="goal"):
        validate_transform(t, name="goal")


@pytest.mark.parametrize(("row", "value"), [(0, 0.1), (3, 2.0), (2, -1e-3)])
def test_validate_transform_rejects_a_bad_last_row(row, value):
    t = _valid()
    t[3, row] += value
    with pytest.raises(InvalidTargetError, match="last row"):
        validate_transform(t)


@DTYPES
def test_validate_transform_rejects_non_orthonormal_rotation(dtype):
    t = _valid(dtype)
    t[:3, :3] *= 1.01
    with pytest.raises(InvalidTargetError, match="orthonormal"):
        validate_transform(t)


def test_orthonormality_tolerance_depends_on_dtype():
    noisy = _valid()
    noisy[0, 1] += 1e-5
    validate_transform(noisy.to(torch.float32))  # within float32's tolerance
    with pytest.raises(InvalidTargetError, match="orthonormal"):
        validate_transform(noisy)  # float64 is held to what float32 geometry gives (1e-6)
    rounded = _valid()
    rounded[0, 1] += 5e-7  # a few float32 ulps: a rotation made in float32, cast to float64
    validate_transform(rounded)


def test_validate_transform_rejects_a_reflection():
    t = _valid()
    t[:3, 2] = -t[:3, 2]  # orthonormal, determinant -1
    with pytest.raises(InvalidTargetError, match="determinant"):
        validate_transform(t)


def test_rotation_errors_are_project_errors():
    for error in (ShapeError, NonFiniteError, InvalidTargetError):
        assert issubclass(error, ProjectError) and issubclass(error, ValueError)
