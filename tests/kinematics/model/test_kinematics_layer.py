"""``KinematicsLayer``: typed input errors, TCP and joint limits, and module hygiene (buffers, ``.to``)."""

from __future__ import annotations

import math

import pytest
import torch

from kinematics import (
    DtypeDeviceMismatchError,
    InvalidTargetError,
    KinematicsLayer,
    NonFiniteError,
    ProjectError,
    ShapeError,
)
from kinematics.lie.rotations import make_transform, so3_exp

F64 = torch.float64
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _tcp(dtype=F64) -> torch.Tensor:
    return make_transform(so3_exp(torch.tensor([0.0, 0.0, 0.4], dtype=F64)), torch.tensor([0.01, -0.02, 0.05])).to(
        dtype
    )


# --------------------------------------------------------------------------------------------------
# Typed input errors
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["forward", "fk_and_jacobian", "jacobian"])
def test_dtype_mismatch_raises(panda64, ready_pose, method):
    with pytest.raises(DtypeDeviceMismatchError, match=r"torch\.float32.*torch\.float64"):
        getattr(panda64, method)(ready_pose(torch.float32))


def test_device_mismatch_raises(panda64):
    q = torch.zeros(7, dtype=F64, device="meta")
    with pytest.raises(DtypeDeviceMismatchError, match="meta"):
        panda64(q)


@pytest.mark.parametrize("shape", [(), (6,), (8,), (2, 6), (7, 1)])
def test_wrong_q_shape_raises(panda64, shape):
    with pytest.raises(ShapeError, match=r"\(\.\.\., 7\)"):
        panda64(torch.zeros(shape, dtype=F64))


def test_non_tensor_q_raises(panda64):
    with pytest.raises(ShapeError, match="torch.Tensor"):
        panda64([0.0] * 7)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_q_raises(panda64, ready_pose, bad):
    q = ready_pose().expand(3, 7).clone()
    q[2, 4] = bad
    with pytest.raises(NonFiniteError, match="NaN or infinite"):
        panda64.fk_and_jacobian(q)


def test_input_errors_are_project_errors(panda64, ready_pose):
    for bad in (ready_pose(torch.float32), torch.zeros(6, dtype=F64), torch.full((7,), math.nan, dtype=F64)):
        with pytest.raises(ProjectError):
            panda64(bad)
    assert issubclass(DtypeDeviceMismatchError, ProjectError) and issubclass(DtypeDeviceMismatchError, TypeError)
    assert issubclass(ShapeError, ProjectError) and issubclass(NonFiniteError, ProjectError)


def test_constructor_validates_tcp_and_limits(panda64):
    model = panda64.model
    with pytest.raises(DtypeDeviceMismatchError):
        KinematicsLayer(model, tcp=_tcp(torch.float32))
    with pytest.raises(ShapeError):
        KinematicsLayer(model, tcp=_tcp().expand(2, 4, 4))
    bad = _tcp()
    bad[:3, :3] *= 2
    with pytest.raises(InvalidTargetError, match="tcp.*orthonormal"):
        KinematicsLayer(model, tcp=bad)
    limits = torch.stack((model.lower, model.upper), -1)
    with pytest.raises(ShapeError):
        KinematicsLayer(model, joint_limits=limits[:6])
    with pytest.raises(ProjectError):
        KinematicsLayer(model, joint_limits=limits.flip(-1))  # lower > upper
    with pytest.raises(DtypeDeviceMismatchError):
        KinematicsLayer(model, joint_limits=limits.float())


# --------------------------------------------------------------------------------------------------
# TCP and limits
# --------------------------------------------------------------------------------------------------


def test_tcp_is_applied_after_the_end_link(panda64, sample_joints):
    tcp = _tcp()
    layer = KinematicsLayer(panda64.model, tcp=tcp)
    q = sample_joints(panda64.lower, panda64.upper, 4, seed=51)
    torch.testing.assert_close(layer(q), panda64(q) @ tcp, rtol=0, atol=1e-14)
    # The Jacobian is taken at the offset TCP: linear rows change by omega x (p_tcp - p_end), angular rows
    # do not.
    jac, jac0 = layer.jacobian(q), panda64.jacobian(q)
    arm = (layer(q)[:, :3, 3] - panda64(q)[:, :3, 3])[:, None, :].expand(4, 7, 3)
    expected_linear = jac0[:, :3] + torch.linalg.cross(jac0[:, 3:].transpose(1, 2), arm).transpose(1, 2)
    torch.testing.assert_close(jac[:, :3], expected_linear, rtol=0, atol=1e-14)
    torch.testing.assert_close(jac[:, 3:], jac0[:, 3:], rtol=0, atol=0)


def test_custom_joint_limits_drive_clamp_within_limits_and_default_seed(panda64):
    limits = torch.stack((panda64.lower, panda64.upper), -1).clone()
    limits[0] = torch.tensor([-0.5, 1.5], dtype=F64)
    limits[6] = torch.tensor([-math.inf, math.inf], dtype=F64)
    layer = KinematicsLayer(panda64.model, joint_limits=limits)
    seed = layer.default_seed()
    assert seed[0] == pytest.approx(0.5) and seed[6] == 0.0
    torch.testing.assert_close(seed[1:6], panda64.default_seed()[1:6])
    q = seed.clone()
    q[0] = 2.0
    assert not layer.within_limits(q) and panda64.within_limits(q)
    assert layer.clamp(q)[0] == 1.5 and layer.within_limits(layer.clamp(q))
    q[0], q[6] = 0.0, 100.0  # joint 7 unbounded here
    assert layer.within_limits(q) and not panda64.within_limits(q)
    assert layer.within_limits(q.expand(2, 3, 7)).shape == (2, 3)


# --------------------------------------------------------------------------------------------------
# Module hygiene
# --------------------------------------------------------------------------------------------------


def test_geometry_and_tcp_are_buffers_not_parameters(panda64):
    assert list(panda64.parameters()) == []
    names = dict(panda64.named_buffers())
    for name in ("tcp", "lower", "upper", "model.local_constant", "model.local_sine", "model.tail"):
        assert name in names, name
    assert not any(b.requires_grad for b in names.values())


def test_to_moves_every_buffer(make_panda_layer, ready_pose, sample_joints):
    layer = make_panda_layer(torch.float32, tcp=_tcp(torch.float32))
    assert {b.dtype for b in layer.buffers()} == {torch.float32}
    moved = layer.to(F64)
    assert moved is layer
    assert {b.dtype for b in layer.buffers()} == {F64}
    assert layer.dtype == F64 and layer.default_seed().dtype == F64
    # Works on float64 inputs and agrees with a layer built in float64 to float32 rounding of the geometry.
    q = sample_joints(layer.lower, layer.upper, 3, seed=52)
    reference = make_panda_layer(F64, tcp=_tcp())
    torch.testing.assert_close(layer(q), reference(q), rtol=0, atol=1e-6)
    with pytest.raises(DtypeDeviceMismatchError):
        layer(ready_pose(torch.float32))


def test_to_meta_device_moves_every_buffer(make_panda_layer):
    layer = make_panda_layer().to("meta")
    assert {b.device.type for b in layer.buffers()} == {"meta"}
    with pytest.raises(DtypeDeviceMismatchError, match="cpu"):
        layer(torch.zeros(7, dtype=F64))


@CUDA
def test_cuda_layer_matches_cpu(make_panda_layer, sample_joints):
    cpu = make_panda_layer()
    gpu = make_panda_layer().to("cuda")
    assert {b.device.type for b in gpu.buffers()} == {"cuda"}
    q = sample_joints(cpu.lower, cpu.upper, 16, seed=53)
    pose, jac = gpu.fk_and_jacobian(q.cuda())
    torch.testing.assert_close(pose.cpu(), cpu(q), rtol=0, atol=1e-12)
    torch.testing.assert_close(jac.cpu(), cpu.jacobian(q), rtol=0, atol=1e-12)
    with pytest.raises(DtypeDeviceMismatchError, match="cuda"):
        gpu(q)
