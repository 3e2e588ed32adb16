"""``DifferentiableIKLayer``: the contract of the DLS solve, one test per promise.

Gradients (gradcheck w.r.t. seed and target), finite gradients at zero error, success near the ready pose at
the defaults, joint-limit projection and its zero derivative, ``enforce_joint_limits=False``, broadcasting,
dtypes, eval/no_grad, statelessness, failed solves (last iterate, differentiable residuals), the loop itself
against an independent reference, configuration errors, invalid targets and checkpoints.
"""

from __future__ import annotations

import dataclasses
import io
import math
import warnings

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from kinematics import (
    CheckpointMismatchError,
    ConfigError,
    DifferentiableIKCfg,
    DifferentiableIKLayer,
    DtypeDeviceMismatchError,
    IKResult,
    InvalidTargetError,
    KinematicsLayer,
    NonFiniteError,
    ProjectError,
    SerialChainKinematics,
    ShapeError,
    native,
)
from kinematics.lie.rotations import make_transform, se3_exp_left, so3_exp
from learning.benchmark.problem import targets_near_seeds_near_joint_centre, targets_near_seeds_near_ready_pose

F64 = torch.float64
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
FIELDS = [f.name for f in dataclasses.fields(IKResult)]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def ik64(panda_layer) -> DifferentiableIKLayer:
    return DifferentiableIKLayer(panda_layer(F64))


def _far_target(kin: KinematicsLayer) -> torch.Tensor:
    """2 m in front of the Panda, pointing down: out of reach (about 0.85 m)."""
    down = torch.tensor([[1.0, 0, 0], [0, -1, 0], [0, 0, -1]], dtype=kin.dtype)
    return make_transform(down, torch.tensor([2.0, 0.0, 0.5], dtype=kin.dtype))


# --------------------------------------------------------------------------------------------------
# Gradients
# --------------------------------------------------------------------------------------------------


def test_gradcheck_wrt_seed(panda64):
    ik = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=4))
    targets, seeds, _ = targets_near_seeds_near_joint_centre(panda64, 2, seed=1, spread=0.1)
    result = ik.solve(targets, seeds)
    margin = torch.minimum(result.q - panda64.lower, panda64.upper - result.q)
    assert margin.min() > 0.05, "the limits must be inactive for this check"

    def solve(s):
        r = ik.solve(targets, s)
        return r.q, r.position_error, r.rotation_error

    assert torch.autograd.gradcheck(solve, (seeds.clone().requires_grad_(),))


def test_gradcheck_wrt_target_through_a_tangent_perturbation(panda64):
    """The target stays on SE(3): T = se3_exp_left(xi, T0), differentiated w.r.t. xi."""
    ik = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=4))
    targets, seeds, _ = targets_near_seeds_near_joint_centre(panda64, 2, seed=2, spread=0.1)
    xi = 1e-3 * torch.randn(2, 6, generator=_gen(3), dtype=F64)

    def solve(x):
        r = ik.solve(se3_exp_left(x, targets), seeds)
        return r.q, r.position_error, r.rotation_error, r.position_error_norm, r.rotation_error_norm

    assert torch.autograd.gradcheck(solve, (xi.requires_grad_(),))
    # And the target's gradient is not trivially zero.
    x = torch.zeros(2, 6, dtype=F64, requires_grad=True)
    ik(se3_exp_left(x, targets), seeds).sum().backward()
    assert x.grad.abs().max() > 1e-2


@DTYPES
def test_target_at_the_current_pose_gives_finite_gradients(dtype, panda_layer, ready_pose):
    kin = panda_layer(dtype)
    ik = DifferentiableIKLayer(kin)
    seed = torch.stack((ready_pose(dtype), kin.default_seed())).requires_grad_()
    target = kin(seed).detach().requires_grad_()
    result = ik.solve(target, seed)
    assert torch.equal(result.position_error_norm, torch.zeros(2, dtype=dtype))
    assert result.rotation_error_norm.max() < 1e-6
    torch.testing.assert_close(result.q, seed.detach(), rtol=0, atol=1e-6)
    loss = (
        result.q.sum()
        + result.position_error.sum()
        + result.rotation_error.sum()
        + result.position_error_norm.sum()
        + result.rotation_error_norm.sum()
    )
    loss.backward()
    for grad in (seed.grad, target.grad):
        assert grad is not None and torch.isfinite(grad).all()
    assert target.grad.abs().max() > 0.1  # moving the target moves the solution


# --------------------------------------------------------------------------------------------------
# Success near the ready pose at the defaults
# --------------------------------------------------------------------------------------------------


@DTYPES
def test_targets_near_the_ready_pose_succeed_at_the_defaults(dtype, panda_layer):
    kin = panda_layer(dtype)
    ik = DifferentiableIKLayer(kin, DifferentiableIKCfg())
    targets, seeds, _ = targets_near_seeds_near_ready_pose(kin, 1000, seed=4)
    result = ik.solve(targets, seeds)
    rate = result.success.double().mean().item()
    assert rate >= 0.99, f"success rate {rate:.3f}"
    assert result.within_limits.all()
    assert result.position_error_norm.median() < 1e-5 and result.rotation_error_norm.median() < 1e-5
    # success is exactly the tolerance test plus the limits.
    cfg = ik.cfg
    expected = (
        (result.position_error_norm <= cfg.position_tolerance)
        & (result.rotation_error_norm <= cfg.rotation_tolerance)
        & result.within_limits
    )
    assert torch.equal(result.success, expected)
    torch.testing.assert_close(result.position_error_norm, result.position_error.norm(dim=-1))
    torch.testing.assert_close(result.rotation_error_norm, result.rotation_error.norm(dim=-1))


# --------------------------------------------------------------------------------------------------
# Joint limits
# --------------------------------------------------------------------------------------------------


def _outside_seed(kin: KinematicsLayer, ready_pose) -> torch.Tensor:
    seed = ready_pose(kin.dtype).clone()
    seed[0] = kin.lower[0] - 1.0
    seed[3] = kin.upper[3] + 0.5
    return seed


def test_a_seed_outside_the_limits_is_clamped(panda64, ready_pose):
    seed = _outside_seed(panda64, ready_pose)
    target = panda64(ready_pose())
    for iterations in (0, 1, 16):
        ik = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=iterations))
        result = ik.solve(target, seed)
        assert panda64.within_limits(result.q) and result.within_limits
        assert ((result.q >= panda64.lower) & (result.q <= panda64.upper)).all()
    zero = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=0)).solve(target, seed)
    assert torch.equal(zero.q, panda64.clamp(seed))
    assert zero.q[0] == panda64.lower[0] and zero.q[3] == panda64.upper[3]


def test_derivative_wrt_a_clamped_seed_coordinate_is_zero(panda64, ready_pose):
    ik = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=4))
    seed = _outside_seed(panda64, ready_pose)
    target = panda64(ready_pose() + 0.05)

    def solve(s):
        r = ik.solve(target, s)
        return torch.cat((r.q, r.position_error, r.rotation_error))

    jac = torch.autograd.functional.jacobian(solve, seed)  # (13, 7)
    assert jac[:, 0].abs().max() == 0 and jac[:, 3].abs().max() == 0
    free = [1, 2, 4, 5, 6]
    assert (jac[:, free].abs().amax(0) > 1e-3).all(), "coordinates inside the limits do carry a derivative"


def _beyond_joint4(kin: KinematicsLayer, ready_pose):
    """A target only reachable with joint 4 above its upper limit (-0.07 rad), and a seed near it inside."""
    goal = ready_pose(kin.dtype).clone()
    goal[3] = 0.3
    seed = goal.clone()
    seed[3] = -0.3
    return kin(goal), seed, goal


def test_a_clamped_update_has_zero_derivative(panda64, ready_pose):
    """Pushed against the limit by every update, joint 4 ends on it and does not depend on the target."""
    target, seed, _ = _beyond_joint4(panda64, ready_pose)
    ik = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=8))
    xi = torch.zeros(6, dtype=F64, requires_grad=True)
    qpos = ik(se3_exp_left(xi, target), seed)
    assert qpos[3] == panda64.upper[3]
    (d_joint4,) = torch.autograd.grad(qpos[3], xi, retain_graph=True)
    assert d_joint4.abs().max() == 0
    (d_joint2,) = torch.autograd.grad(qpos[1], xi)
    assert d_joint2.abs().max() > 1e-3


def test_enforce_joint_limits_false_lets_qpos_leave_the_limits(panda64, ready_pose):
    target, seed, goal = _beyond_joint4(panda64, ready_pose)
    limited = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=32)).solve(target, seed)
    assert limited.within_limits and not limited.success
    assert limited.q[3] == panda64.upper[3]
    free_cfg = DifferentiableIKCfg(iterations=32, enforce_joint_limits=False)
    free = DifferentiableIKLayer(panda64, free_cfg).solve(target.expand(3, 4, 4), seed)
    # It reaches the target (residuals under the tolerances) beyond joint 4's upper limit ...
    assert (free.q[:, 3] > panda64.upper[3] + 0.2).all()
    assert (free.position_error_norm < free_cfg.position_tolerance).all()
    assert (free.rotation_error_norm < free_cfg.rotation_tolerance).all()
    torch.testing.assert_close(free.q, goal.expand(3, 7), rtol=0, atol=1e-3)
    # ... but success still checks the physical limits.
    assert not free.within_limits.any() and not free.success.any()
    # Without projection the seed is not clamped either.
    zero = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=0, enforce_joint_limits=False))
    outside = _outside_seed(panda64, ready_pose)
    assert torch.equal(zero(target, outside), outside)


# --------------------------------------------------------------------------------------------------
# Shapes, dtypes, modes
# --------------------------------------------------------------------------------------------------


@DTYPES
@pytest.mark.parametrize(
    ("target_batch", "seed_batch", "expected"),
    [((5,), (), (5,)), ((), (3,), (3,)), ((2, 1), (1, 3), (2, 3)), ((2, 3), (2, 3), (2, 3)), ((), (), ())],
    ids=["targets5-seed", "target-seeds3", "2x1-1x3", "2x3-2x3", "single"],
)
def test_leading_dimensions_broadcast_into_every_field(dtype, panda_layer, target_batch, seed_batch, expected):
    kin = panda_layer(dtype)
    ik = DifferentiableIKLayer(kin, DifferentiableIKCfg(iterations=3))
    n_t, n_s = math.prod(target_batch), math.prod(seed_batch)
    targets, seeds, _ = targets_near_seeds_near_ready_pose(kin, max(n_t, n_s), seed=5)
    target = targets[:n_t].reshape(*target_batch, 4, 4)
    seed = seeds[:n_s].reshape(*seed_batch, 7)
    result = ik.solve(target, seed)
    trailing = {"q": (7,), "position_error": (3,), "rotation_error": (3,)}
    for name in FIELDS:
        value = getattr(result, name)
        assert value.shape == (*expected, *trailing.get(name, ())), name
        assert value.dtype == (torch.bool if name in ("success", "within_limits") else dtype), name
    # Broadcasting equals solving the explicitly expanded inputs.
    explicit = ik.solve(target.expand(*expected, 4, 4).clone(), seed.expand(*expected, 7).clone())
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(result.q, explicit.q, rtol=0, atol=tol)


def test_seed_defaults_to_default_seed(ik64, panda64, ready_pose):
    target = panda64(ready_pose()).expand(2, 4, 4)
    torch.testing.assert_close(ik64.solve(target).q, ik64.solve(target, panda64.default_seed()).q)


def test_empty_batch(ik64, panda64):
    result = ik64.solve(torch.eye(4, dtype=F64).expand(0, 4, 4), panda64.default_seed())
    assert result.q.shape == (0, 7) and result.success.shape == (0,)


def test_eval_keeps_gradients_and_no_grad_drops_them(panda64, ready_pose):
    ik = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=2)).eval()
    assert not ik.training
    target = panda64(ready_pose() + 0.05).requires_grad_()
    result = ik.solve(target, ready_pose())
    assert result.q.requires_grad and result.position_error.requires_grad
    (grad,) = torch.autograd.grad(result.q.sum(), target)
    assert torch.isfinite(grad).all() and grad.abs().max() > 0
    with torch.no_grad():
        quiet = ik.solve(target, ready_pose())
    assert not quiet.q.requires_grad and not quiet.position_error.requires_grad
    torch.testing.assert_close(quiet.q, result.q.detach(), rtol=0, atol=0)


def test_no_state_is_kept_between_calls(panda64):
    ik = DifferentiableIKLayer(panda64)
    state = {k: v.clone() if torch.is_tensor(v) else v for k, v in ik.state_dict().items()}
    targets, seeds, _ = targets_near_seeds_near_ready_pose(panda64, 6, seed=6)
    a_target, a_seed, b_target, b_seed = targets[:3], seeds[:3], targets[3:], seeds[3:]
    b_alone = ik.solve(b_target, b_seed)
    again = ik.solve(b_target, b_seed)
    for name in FIELDS:
        assert torch.equal(getattr(b_alone, name), getattr(again, name)), name
    ik.solve(a_target, a_seed)
    after_a = ik.solve(b_target, b_seed)
    fresh = DifferentiableIKLayer(panda64).solve(b_target, b_seed)
    for name in FIELDS:
        assert torch.equal(getattr(b_alone, name), getattr(after_a, name)), name
        assert torch.equal(getattr(b_alone, name), getattr(fresh, name)), name
    for key, value in ik.state_dict().items():
        assert torch.equal(value, state[key]) if torch.is_tensor(value) else value == state[key], key


def test_a_failed_solve_returns_the_last_iterate(panda64, ready_pose):
    seed = ready_pose()
    target = _far_target(panda64).requires_grad_()
    result = DifferentiableIKLayer(panda64).solve(target, seed)
    assert not result.success
    assert (result.q - seed).abs().max() > 0.1, "the seed must not be substituted"
    assert result.position_error_norm > 1.0
    for residual in (result.position_error, result.rotation_error, result.position_error_norm):
        assert residual.requires_grad
    (grad,) = torch.autograd.grad(result.position_error_norm, target)
    assert torch.isfinite(grad).all() and grad.abs().max() > 0
    # It is the 16th iterate: 8 steps, then 8 more from there, give the same joints.
    eight = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=8))
    torch.testing.assert_close(eight(target, eight(target, seed)), result.q, rtol=0, atol=1e-12)
    # The residuals are those of the returned joints.
    reached = panda64(result.q)
    torch.testing.assert_close(result.position_error, target[:3, 3] - reached[:3, 3], rtol=0, atol=0)


# --------------------------------------------------------------------------------------------------
# The loop itself
# --------------------------------------------------------------------------------------------------


def test_default_settings(panda64):
    cfg = DifferentiableIKCfg()
    assert cfg.iterations == 16
    assert cfg.damping == 0.05 and cfg.step_size == 0.5
    assert cfg.position_tolerance == 5e-4 and cfg.rotation_tolerance == 5e-4
    assert cfg.enforce_joint_limits is True
    assert DifferentiableIKLayer(panda64).cfg == cfg


def _reference_dls(kin: KinematicsLayer, target: np.ndarray, seed: np.ndarray, cfg: DifferentiableIKCfg):
    """The update rule written out in numpy, with scipy's rotation vector for the rotation error."""
    lo, hi = kin.lower.numpy(), kin.upper.numpy()
    q = np.clip(seed, lo, hi) if cfg.enforce_joint_limits else seed
    for _ in range(cfg.iterations):
        pose, jac = (t.numpy() for t in kin.fk_and_jacobian(torch.from_numpy(q)))
        err_p = target[:3, 3] - pose[:3, 3]
        err_r = Rotation.from_matrix(target[:3, :3] @ pose[:3, :3].T).as_rotvec()
        e = np.concatenate((err_p, err_r))
        q = q + cfg.step_size * jac.T @ np.linalg.solve(jac @ jac.T + cfg.damping**2 * np.eye(6), e)
        if cfg.enforce_joint_limits:
            q = np.clip(q, lo, hi)
    return q


@pytest.mark.parametrize(
    "cfg",
    [
        DifferentiableIKCfg(),
        DifferentiableIKCfg(iterations=3, damping=0.2, step_size=0.9),
        DifferentiableIKCfg(iterations=5, damping=0.0, step_size=1.0),
        DifferentiableIKCfg(iterations=6, enforce_joint_limits=False),
    ],
    ids=["defaults", "damped", "undamped-full-step", "unprojected"],
)
def test_iterations_follow_the_dls_update(panda64, ready_pose, cfg):
    targets, seeds, _ = targets_near_seeds_near_ready_pose(panda64, 3, seed=7, target_noise=0.3)
    # A seed outside the limits, and a far-off target (limits become active) last.
    targets = torch.cat((targets, targets[:1], _far_target(panda64)[None]))
    seeds = torch.cat((seeds, _outside_seed(panda64, ready_pose)[None], seeds[:1]))
    result = DifferentiableIKLayer(panda64, cfg).solve(targets, seeds)
    for i in range(targets.shape[0]):
        expected = _reference_dls(panda64, targets[i].numpy(), seeds[i].numpy(), cfg)
        # The far row is ill-conditioned (stretched arm, joints on their limits): rounding grows to ~1e-8.
        tol = 1e-6 if i == targets.shape[0] - 1 else 1e-9
        np.testing.assert_allclose(result.q[i].numpy(), expected, rtol=0, atol=tol, err_msg=f"row {i}")


def test_each_iteration_computes_fk_and_jacobian_once(panda64, monkeypatch):
    """Counted at the chain pass's kernel (``FK_JACOBIAN``), whichever implementation answers it."""
    from kinematics.model.chain import FK_JACOBIAN

    targets, seeds, _ = targets_near_seeds_near_ready_pose(panda64, 4, seed=8)
    calls = []
    for name, function in (("reference", FK_JACOBIAN.reference), ("cpu", FK_JACOBIAN.implementations["cpu"])):

        def counting(*args, _function=function):
            out = _function(*args)
            calls.extend([] if out is None else [args[5]])  # with_jacobian
            return out

        if name == "reference":
            monkeypatch.setattr(FK_JACOBIAN, "reference", counting)
        else:
            monkeypatch.setitem(FK_JACOBIAN.implementations, "cpu", counting)
    ik = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=5))
    with native.disabled():  # the torch ops
        ik.solve(targets, seeds)
    assert calls.count(True) == 5  # one FK + Jacobian per step (the final evaluation needs FK only)
    assert calls.count(False) <= 1
    if native.library() is not None:  # the fused solve: the kernel does every step's pass itself
        calls.clear()
        ik.solve(targets, seeds)
        assert calls.count(True) == 0 and calls.count(False) <= 1


def test_the_loop_does_not_synchronise_with_the_host(panda64, monkeypatch):
    """No .item(), no bool() of a tensor, no data-dependent Python control flow once inputs are validated."""
    targets, seeds, _ = targets_near_seeds_near_ready_pose(panda64, 4, seed=9)
    ik = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=4, validate_inputs=False))

    def forbidden(*args, **kwargs):
        raise AssertionError("host synchronisation inside the solve")

    for name in ("item", "tolist", "__bool__", "__float__", "__int__", "__index__", "nonzero", "numpy"):
        monkeypatch.setattr(torch.Tensor, name, forbidden)
    result = ik.solve(targets, seeds)
    monkeypatch.undo()
    assert result.q.shape == (4, 7)


def test_zero_iterations_return_the_clamped_seed(panda64, ready_pose):
    ik = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=0))
    seeds = torch.stack((ready_pose(), _outside_seed(panda64, ready_pose)))
    target = panda64(ready_pose() + 0.1)
    result = ik.solve(target, seeds)
    assert torch.equal(result.q, panda64.clamp(seeds))
    torch.testing.assert_close(result.position_error, target[:3, 3] - panda64(result.q)[:, :3, 3])


def test_position_error_decreases_with_iterations(panda64):
    targets, seeds, _ = targets_near_seeds_near_ready_pose(panda64, 200, seed=10)
    errors = []
    for iterations in (0, 1, 2, 4, 8, 16):
        ik = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=iterations))
        result = ik.solve(targets, seeds)
        errors.append((result.position_error_norm, result.rotation_error_norm))
    medians = [p.median().item() for p, _ in errors]
    assert all(b < 0.75 * a for a, b in zip(medians, medians[1:], strict=False)), medians
    assert medians[-1] < 1e-5 < medians[0]
    # Per target, almost always monotone from 1 to 16 iterations, rotation included.
    pos = torch.stack([p for p, _ in errors[1:]])
    rot = torch.stack([r for _, r in errors[1:]])
    assert (pos[1:] <= pos[:-1] + 1e-9).all(0).double().mean() >= 0.97
    assert (rot[-1] < rot[0]).double().mean() >= 0.99


# --------------------------------------------------------------------------------------------------
# Configuration and input errors
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"iterations": -1},
        {"iterations": 2.5},
        {"iterations": "16"},
        {"damping": -0.1},
        {"damping": math.nan},
        {"step_size": 0.0},
        {"step_size": -0.5},
        {"step_size": math.nan},
        {"position_tolerance": -1e-4},
        {"rotation_tolerance": math.nan},
    ],
    ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()),
)
def test_cfg_rejects_bad_values(kwargs):
    name = next(iter(kwargs))
    with pytest.raises(ConfigError, match=name):
        DifferentiableIKCfg(**kwargs)
    assert issubclass(ConfigError, ProjectError)


def test_cfg_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DifferentiableIKCfg().damping = 0.1


def _valid_target() -> torch.Tensor:
    return make_transform(so3_exp(torch.tensor([math.pi, 0.0, 0.0], dtype=F64)), torch.tensor([0.4, 0.0, 0.4]))


def _bad_targets():
    shape = torch.eye(4, dtype=F64)[:3]
    nan = _valid_target().clone()
    nan[0, 3] = math.nan
    row = _valid_target().clone()
    row[3, 0] = 0.5
    scaled = _valid_target().clone()
    scaled[:3, :3] *= 1.1
    mirrored = _valid_target().clone()
    mirrored[:3, 0] *= -1
    return [
        ("shape", shape, ShapeError, r"\(\.\.\., 4, 4\)"),
        ("nan", nan, NonFiniteError, "NaN"),
        ("last-row", row, InvalidTargetError, "last row"),
        ("not-orthonormal", scaled, InvalidTargetError, "orthonormal"),
        ("reflection", mirrored, InvalidTargetError, "determinant"),
        ("dtype", _valid_target().float(), DtypeDeviceMismatchError, "float32"),
        ("device", _valid_target().to("meta"), DtypeDeviceMismatchError, "meta"),
    ]


@pytest.mark.parametrize(("case", "target", "error", "match"), _bad_targets(), ids=[c[0] for c in _bad_targets()])
def test_invalid_targets_raise(ik64, case, target, error, match):
    with pytest.raises(error, match=match):
        ik64.solve(target)
    with pytest.raises(ProjectError):
        ik64(target)


@pytest.mark.parametrize(
    ("seed", "error"),
    [
        (torch.zeros(6, dtype=F64), ShapeError),
        (torch.zeros(2, 8, dtype=F64), ShapeError),
        (torch.full((7,), math.nan, dtype=F64), NonFiniteError),
        (torch.zeros(7, dtype=torch.float32), DtypeDeviceMismatchError),
    ],
    ids=["dof6", "dof8", "nan", "float32"],
)
def test_invalid_seeds_raise(ik64, seed, error):
    with pytest.raises(error):
        ik64.solve(_valid_target(), seed)


def test_incompatible_batches_raise(ik64):
    with pytest.raises(ShapeError, match="do not broadcast"):
        ik64.solve(_valid_target().expand(2, 4, 4), torch.zeros(3, 7, dtype=F64))


def test_validate_inputs_false_still_checks_shape_dtype_and_device(panda64):
    ik = DifferentiableIKLayer(panda64, DifferentiableIKCfg(validate_inputs=False, iterations=1))
    with pytest.raises(ShapeError):
        ik.solve(torch.eye(4, dtype=F64)[:3])
    with pytest.raises(ShapeError):
        ik.solve(torch.eye(4, dtype=F64), torch.zeros(6, dtype=F64))
    with pytest.raises(DtypeDeviceMismatchError):
        ik.solve(torch.eye(4, dtype=torch.float32))
    with pytest.raises(DtypeDeviceMismatchError):
        ik.solve(torch.eye(4, dtype=F64), torch.zeros(7, dtype=torch.float32))


# --------------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------------

CUSTOM_CFG = DifferentiableIKCfg(iterations=5, damping=0.1, step_size=0.7, position_tolerance=1e-3)


def _tcp() -> torch.Tensor:
    return make_transform(so3_exp(torch.tensor([0.0, 0.0, 0.3], dtype=F64)), torch.tensor([0.0, 0.0, 0.02]))


def _saved(layer: DifferentiableIKLayer) -> dict:
    buffer = io.BytesIO()
    torch.save(layer.state_dict(), buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


def test_state_dict_holds_settings_tcp_limits_and_fingerprint(make_panda_layer):
    kin = make_panda_layer(tcp=_tcp())
    state = DifferentiableIKLayer(kin, CUSTOM_CFG).state_dict()
    assert torch.equal(state["kinematics.tcp"], _tcp())
    assert torch.equal(state["kinematics.lower"], kin.lower) and torch.equal(state["kinematics.upper"], kin.upper)
    extra = state["kinematics._extra_state"]
    assert extra["geometry_fingerprint"] == kin.model.fingerprint and len(extra["geometry_fingerprint"]) == 64
    assert state["_extra_state"]["cfg"] == dataclasses.asdict(CUSTOM_CFG)
    assert not any(torch.is_tensor(v) and v.requires_grad for v in state.values())


def test_state_dict_round_trip(make_panda_layer):
    limits = torch.stack((make_panda_layer().lower, make_panda_layer().upper), -1)
    limits[0] = torch.tensor([-1.0, 1.0], dtype=F64)
    source = DifferentiableIKLayer(make_panda_layer(tcp=_tcp(), joint_limits=limits), CUSTOM_CFG)
    saved = _saved(source)
    # A fresh layer on the same chain and TCP, default settings and URDF limits.
    restored = DifferentiableIKLayer(make_panda_layer(tcp=_tcp()))
    assert restored.cfg != CUSTOM_CFG
    restored.load_state_dict(saved)
    assert restored.cfg == CUSTOM_CFG
    assert torch.equal(restored.kinematics.lower, source.kinematics.lower)
    assert torch.equal(restored.kinematics.upper, source.kinematics.upper)
    targets, seeds, _ = targets_near_seeds_near_ready_pose(source.kinematics, 4, seed=11)
    expected, got = source.solve(targets, seeds), restored.solve(targets, seeds)
    for name in FIELDS:
        assert torch.equal(getattr(expected, name), getattr(got, name)), name


@pytest.mark.parametrize("other", ["ur5", "panda_link8", "pr2"])
def test_loading_into_another_chain_fails_clearly(make_panda_layer, ur5_urdf, pr2_urdf, other):
    saved = _saved(DifferentiableIKLayer(make_panda_layer(), CUSTOM_CFG))
    if other == "ur5":
        chain = SerialChainKinematics.from_urdf(ur5_urdf, end_link_name="tool0", root_link_name="base_link", dtype=F64)
        kin = KinematicsLayer(chain)
    elif other == "pr2":
        chain = SerialChainKinematics.from_urdf(
            pr2_urdf, end_link_name="r_gripper_tool_frame", root_link_name="base_link", dtype=F64
        )
        kin = KinematicsLayer(chain)
    else:
        kin = make_panda_layer(end="panda_link8")
    target = DifferentiableIKLayer(kin)
    before = {k: v.clone() for k, v in target.state_dict().items() if torch.is_tensor(v)}
    with pytest.raises(CheckpointMismatchError, match="another chain") as info:
        target.load_state_dict(saved)
    message = str(info.value)
    assert "panda_hand_tcp" in message and kin.model.end_link_name in message
    # Nothing was loaded: neither the settings nor any buffer.
    assert target.cfg == DifferentiableIKCfg()
    for key, value in target.state_dict().items():
        if torch.is_tensor(value):
            assert torch.equal(value, before[key]), key


def test_loading_with_another_tcp_fails_clearly(make_panda_layer):
    saved = _saved(DifferentiableIKLayer(make_panda_layer(), CUSTOM_CFG))
    target = DifferentiableIKLayer(make_panda_layer(tcp=_tcp()))
    with pytest.raises(CheckpointMismatchError, match="TCP"):
        target.load_state_dict(saved)
    assert target.cfg == DifferentiableIKCfg()
    assert torch.equal(target.kinematics.tcp, _tcp())


def test_loading_a_state_dict_without_fingerprint_fails(make_panda_layer):
    saved = _saved(DifferentiableIKLayer(make_panda_layer(), CUSTOM_CFG))
    del saved["kinematics._extra_state"]
    with pytest.raises(CheckpointMismatchError, match="fingerprint"):
        DifferentiableIKLayer(make_panda_layer()).load_state_dict(saved)


def test_loading_unknown_settings_fails(make_panda_layer):
    saved = _saved(DifferentiableIKLayer(make_panda_layer(), CUSTOM_CFG))
    saved["_extra_state"] = {"cfg": {**dataclasses.asdict(CUSTOM_CFG), "momentum": 0.9}}
    with pytest.raises(CheckpointMismatchError, match="momentum"):
        DifferentiableIKLayer(make_panda_layer()).load_state_dict(saved)


def test_ik_layer_to_moves_everything_and_has_no_parameters(make_panda_layer, ready_pose):
    ik = DifferentiableIKLayer(make_panda_layer(torch.float32), CUSTOM_CFG)
    assert list(ik.parameters()) == []
    ik.to(F64)
    assert {b.dtype for b in ik.buffers()} == {F64}
    result = ik.solve(make_panda_layer()(ready_pose()), ready_pose())
    assert result.q.dtype == F64 and result.success


@CUDA
def test_cuda_solve_matches_cpu(make_panda_layer):
    cpu = DifferentiableIKLayer(make_panda_layer())
    gpu = DifferentiableIKLayer(make_panda_layer()).to("cuda")
    targets, seeds, _ = targets_near_seeds_near_ready_pose(cpu.kinematics, 64, seed=12)
    result = gpu.solve(targets.cuda(), seeds.cuda())
    expected = cpu.solve(targets, seeds)
    torch.testing.assert_close(result.q.cpu(), expected.q, rtol=0, atol=1e-9)
    assert torch.equal(result.success.cpu(), expected.success)
    with pytest.raises(DtypeDeviceMismatchError):
        gpu.solve(targets, seeds)


@CUDA
def test_cuda_solve_runs_without_host_sync(make_panda_layer):
    """With validated-elsewhere inputs, the solve issues no synchronising CUDA operation."""
    gpu = DifferentiableIKLayer(make_panda_layer(), DifferentiableIKCfg(validate_inputs=False)).to("cuda")
    targets, seeds, _ = targets_near_seeds_near_ready_pose(make_panda_layer(), 64, seed=12)
    targets, seeds = targets.cuda(), seeds.cuda()
    gpu.solve(targets, seeds)  # warm-up
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            gpu.solve(targets, seeds)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = sorted({f"{w.filename}:{w.lineno}" for w in caught if "synchronizing CUDA" in str(w.message)})
    assert not syncs, "synchronising CUDA operations at " + ", ".join(syncs)


# --------------------------------------------------------------------------------------------------
# One vocabulary with the whole-body layer: iterations, a frozen result with q, forward and solve, former names
# --------------------------------------------------------------------------------------------------


def test_iterations_can_be_overridden_per_call(panda64, ready_pose):
    targets, seeds, _ = targets_near_seeds_near_ready_pose(panda64, 6, seed=3)
    ik = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=16))
    three = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=3)).solve(targets, seeds)
    for validate in (True, False):  # the fused path and, through the QP step, the general one
        overridden = ik.solve(targets, seeds, iterations=3)
        assert torch.equal(overridden.q, three.q)
        ik.cfg = dataclasses.replace(ik.cfg, validate_inputs=validate)
    assert torch.equal(ik(targets, seeds, iterations=3), three.q)
    assert ik.cfg.iterations == 16
    qp = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=16, step="qp"))
    qp3 = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=3, step="qp"))
    assert torch.equal(qp.solve(targets, seeds, iterations=3).q, qp3.solve(targets, seeds).q)
    target = targets.clone().requires_grad_(True)
    implicit = DifferentiableIKLayer(panda64, DifferentiableIKCfg(iterations=16, gradient="implicit"))
    q = implicit(target, seeds, iterations=3)
    torch.testing.assert_close(q.detach(), three.q)
    q.sum().backward()
    assert torch.isfinite(target.grad).all()
    for bad in (-1, 2.5, True):
        with pytest.raises(ConfigError, match="iterations"):
            ik.solve(targets, seeds, iterations=bad)


def test_the_result_is_frozen_and_the_former_names_are_gone(panda64, ready_pose, make_panda_layer):
    result = DifferentiableIKLayer(panda64).solve(panda64(ready_pose()), ready_pose())
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.q = result.q
    assert not hasattr(result, "qpos")
    with pytest.raises(TypeError, match="max_iterations"):
        DifferentiableIKCfg(max_iterations=5)
    with pytest.raises(AttributeError):
        DifferentiableIKCfg().max_iterations  # noqa: B018
    assert not hasattr(panda64.model, "fk_and_jacobian_batch_last")
    saved = _saved(DifferentiableIKLayer(make_panda_layer(), CUSTOM_CFG))
    former = {("max_iterations" if k == "iterations" else k): v for k, v in saved["_extra_state"]["cfg"].items()}
    saved["_extra_state"] = {"cfg": former}  # a checkpoint with the former name: refused, nothing changed
    restored = DifferentiableIKLayer(make_panda_layer())
    with pytest.raises(CheckpointMismatchError, match="max_iterations"):
        restored.load_state_dict(saved)
    assert restored.cfg == DifferentiableIKCfg()
