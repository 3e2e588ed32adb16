"""The paper's extensions of the IK layer: box-QP steps, the posture cascade, implicit gradients, R^9 -> SE(3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize
import torch

from kinematics import DifferentiableIKCfg, DifferentiableIKLayer
from kinematics.errors import ConfigError, ShapeError
from kinematics.ik.box_qp import solve_box_qp
from kinematics.lie.r9 import r9_to_se3, se3_to_r9, singularity_margin
from kinematics.lie.rotations import se3_exp_left, so3_exp
from learning.benchmark.problem import targets_away_from_seeds_near_limits, targets_near_seeds_near_joint_centre
from learning.common.panda import franka_kinematics

F64 = torch.float64


@pytest.fixture(scope="module")
def kin():
    return franka_kinematics(dtype=F64)


# ---------------------------------------------------------------- box QP


def test_box_qp_matches_scipy_on_random_problems():
    gen = torch.Generator().manual_seed(0)
    n, dim = 64, 7
    a = torch.randn(n, dim, dim, generator=gen, dtype=F64)
    hessian = a @ a.transpose(-1, -2) + 0.1 * torch.eye(dim, dtype=F64)
    gradient = 3 * torch.randn(n, dim, generator=gen, dtype=F64)
    lower = -torch.rand(n, dim, generator=gen, dtype=F64)
    upper = torch.rand(n, dim, generator=gen, dtype=F64)
    upper[:, 0] = torch.inf  # unbounded variables are allowed
    x, free = solve_box_qp(hessian, gradient, lower, upper, iterations=12)
    assert ((x >= lower - 1e-12) & (x <= upper + 1e-12)).all()
    for i in range(n):
        h, g = hessian[i].numpy(), gradient[i].numpy()
        ref = scipy.optimize.minimize(
            lambda z, h=h, g=g: 0.5 * z @ h @ z + g @ z,
            np.zeros(dim),
            jac=lambda z, h=h, g=g: h @ z + g,
            bounds=list(
                zip(lower[i].numpy(), np.where(np.isinf(upper[i].numpy()), None, upper[i].numpy()), strict=True)
            ),
            method="L-BFGS-B",
            options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10000},
        )
        np.testing.assert_allclose(x[i].numpy(), ref.x, atol=1e-5)
    # KKT: the gradient vanishes on free variables.
    residual = (hessian @ x[..., None])[..., 0] + gradient
    assert residual[free].abs().max() < 1e-9


def test_box_qp_without_active_bounds_is_the_unconstrained_solution():
    h = torch.diag(torch.tensor([2.0, 4.0], dtype=F64))
    g = torch.tensor([-2.0, 4.0], dtype=F64)
    x, free = solve_box_qp(h, g, torch.full((2,), -10.0, dtype=F64), torch.full((2,), 10.0, dtype=F64), 3)
    torch.testing.assert_close(x, torch.tensor([1.0, -1.0], dtype=F64))
    assert free.all()
    x, free = solve_box_qp(h, g, torch.tensor([-10.0, -0.5], dtype=F64), torch.tensor([0.25, 10.0], dtype=F64), 3)
    torch.testing.assert_close(x, torch.tensor([0.25, -0.5], dtype=F64))
    assert not free.any()


# ---------------------------------------------------------------- QP step


def test_qp_step_never_leaves_the_limits_and_beats_the_clamp_near_them(kin):
    target, q0, _ = targets_away_from_seeds_near_limits(kin, 400, seed=1)
    results = {s: DifferentiableIKLayer(kin, DifferentiableIKCfg(step=s)).solve(target, q0) for s in ("clamp", "qp")}
    qp = results["qp"]
    assert ((qp.q >= kin.lower) & (qp.q <= kin.upper)).all()
    assert qp.success.double().mean() > results["clamp"].success.double().mean() + 0.05
    assert qp.position_error_norm.mean() < 0.75 * results["clamp"].position_error_norm.mean()


def test_qp_step_success_near_the_joint_centre_at_least_the_clamps(kin):
    target, q0, _ = targets_near_seeds_near_joint_centre(kin, 500, seed=2)
    clamp = DifferentiableIKLayer(kin).solve(target, q0)
    qp = DifferentiableIKLayer(kin, DifferentiableIKCfg(step="qp")).solve(target, q0)
    assert qp.success.double().mean() >= clamp.success.double().mean() >= 0.99


def test_qp_gives_target_gradients_to_joints_the_clamp_freezes(kin):
    target, q0, _ = targets_away_from_seeds_near_limits(kin, 200, seed=3)
    norms = {}
    for step in ("clamp", "qp"):
        xi = torch.zeros(len(q0), 6, dtype=F64, requires_grad=True)
        qpos = DifferentiableIKLayer(kin, DifferentiableIKCfg(step=step)).solve(se3_exp_left(xi, target), q0).q
        norms[step] = torch.stack(
            [torch.autograd.grad(qpos[:, j].sum(), xi, retain_graph=True)[0].norm(dim=-1) for j in range(7)], -1
        )
    frozen = norms["clamp"] == 0
    assert frozen.sum() > 50
    assert (frozen & (norms["qp"] > 0)).sum() > 20


def test_qp_step_gradcheck_with_an_active_limit(kin):
    """float64 gradcheck through QP steps while a joint sits at its limit (the active set does not switch)."""
    q0 = kin.default_seed().clone()
    q0[3] = kin.upper[3] - 1e-3
    target = kin(q0 + torch.tensor([0.05, -0.05, 0.05, 0.1, 0.05, -0.05, 0.05], dtype=F64)).detach()
    ik = DifferentiableIKLayer(kin, DifferentiableIKCfg(step="qp", iterations=3))
    assert ik.solve(target, q0).q[3] == kin.upper[3]
    xi = torch.zeros(6, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: ik(se3_exp_left(x, target), q0), (xi,), eps=1e-7, atol=1e-6)


def test_posture_cascade_centres_joints_while_solving(kin):
    target, q0, _ = targets_near_seeds_near_joint_centre(kin, 300, seed=4)
    cfg = dict(step="qp", iterations=48)
    plain = DifferentiableIKLayer(kin, DifferentiableIKCfg(**cfg)).solve(target, q0)
    centred = DifferentiableIKLayer(kin, DifferentiableIKCfg(**cfg, posture_gain=0.05)).solve(target, q0)
    middle = kin.default_seed()
    assert (centred.q - middle).square().sum(-1).mean() < 0.97 * (plain.q - middle).square().sum(-1).mean()
    assert centred.success.double().mean() >= plain.success.double().mean() - 0.02


def test_the_posture_level_keeps_the_first_levels_task_motion_exactly(kin):
    # a strict cascade, not a penalty: one step with and without the posture level moves the TCP alike (J dq)
    target, q0, _ = targets_near_seeds_near_joint_centre(kin, 64, seed=5)
    cfg = dict(step="qp", iterations=1)
    plain = DifferentiableIKLayer(kin, DifferentiableIKCfg(**cfg)).solve(target, q0).q
    centred = DifferentiableIKLayer(kin, DifferentiableIKCfg(**cfg, posture_gain=0.05)).solve(target, q0).q
    jac = torch.autograd.functional.jacobian(lambda q: kin(q)[:, :3, 3].sum(0), q0).permute(1, 0, 2)  # (B, 3, dof)
    motion = lambda q: (jac @ (q - q0)[..., None])[..., 0]  # noqa: E731
    torch.testing.assert_close(motion(centred), motion(plain), atol=1e-9, rtol=0)
    assert (centred - plain).abs().amax() > 1e-4  # the posture level did move the joints


def test_new_config_values_are_checked():
    for bad in (dict(step="lbfgs"), dict(gradient="adjoint"), dict(qp_iterations=0), dict(posture_gain=0.1)):
        with pytest.raises(ConfigError):
            DifferentiableIKCfg(**bad)


# ---------------------------------------------------------------- implicit gradients


def _gradients(kin, target, q0, **cfg):
    ik = DifferentiableIKLayer(kin, DifferentiableIKCfg(**cfg))
    xi = torch.zeros(len(q0), 6, dtype=F64, requires_grad=True)
    seed = q0.clone().requires_grad_(True)
    result = ik.solve(se3_exp_left(xi, target), seed)
    weights = torch.randn(result.q.shape, dtype=F64, generator=torch.Generator().manual_seed(5))
    (result.q * weights).sum().backward()
    return xi.grad, seed.grad, result


@pytest.mark.parametrize("iterations", [16, 48])
def test_implicit_gradient_matches_unrolled_on_converged_rows(kin, iterations):
    target, q0, _ = targets_near_seeds_near_joint_centre(kin, 300, seed=6)
    t_unrolled, s_unrolled, r_unrolled = _gradients(kin, target, q0, iterations=iterations)
    t_implicit, s_implicit, r_implicit = _gradients(kin, target, q0, iterations=iterations, gradient="implicit")
    torch.testing.assert_close(r_implicit.q, r_unrolled.q)  # same forward
    ok = r_unrolled.success
    assert ok.double().mean() > 0.95

    def cosine(a, b):
        return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))

    assert cosine(t_unrolled[ok], t_implicit[ok]).mean() >= 0.99
    assert cosine(t_unrolled[ok], t_implicit[ok]).median() >= 0.999
    assert cosine(s_unrolled[ok], s_implicit[ok]).mean() >= 0.95


def test_implicit_mode_saves_the_same_memory_for_any_iteration_count(kin):
    target, q0, _ = targets_near_seeds_near_joint_centre(kin, 64, seed=7)

    def saved_bytes(**cfg):
        total = 0

        def pack(t):
            nonlocal total
            total += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            _gradients(kin, target, q0, **cfg)
        return total

    implicit = [saved_bytes(iterations=k, gradient="implicit") for k in (16, 128)]
    unrolled = [saved_bytes(iterations=k) for k in (16, 128)]
    assert implicit[0] == implicit[1]
    # unrolled keeps at least one iterate per step (the fused solve keeps exactly that: its backward recomputes
    # each step at its iterate; the torch ops keep every step's graph)
    assert unrolled[1] - unrolled[0] >= (128 - 16) * q0.numel() * q0.element_size()


def test_implicit_mode_keeps_failed_rows_in_place_with_their_own_residuals(kin):
    target, q0, _ = targets_near_seeds_near_joint_centre(kin, 8, seed=8)
    unreachable = torch.tensor([2, 5])
    target = target.clone()
    target[unreachable, 0, 3] += 1.0  # 1 m farther out: beyond the Panda's reach
    cfg = {"iterations": 16}
    with torch.no_grad():
        unrolled = DifferentiableIKLayer(kin, DifferentiableIKCfg(**cfg)).solve(target, q0)
    xi = torch.zeros(8, 6, dtype=F64, requires_grad=True)
    ik = DifferentiableIKLayer(kin, DifferentiableIKCfg(**cfg, gradient="implicit"))
    implicit = ik.solve(se3_exp_left(xi, target), q0.clone().requires_grad_(True))
    assert implicit.q.requires_grad and implicit.q.shape == (8, 7)
    # Failed rows stay in the batch, in their place, and count as failures.
    expected_failed = torch.zeros(8, dtype=torch.bool)
    expected_failed[unreachable] = True
    assert torch.equal(~implicit.success, expected_failed)
    # Their joints and residuals are the solve's last iterate, the same as without implicit gradients ...
    torch.testing.assert_close(implicit.q.detach(), unrolled.q, rtol=0, atol=1e-12)
    torch.testing.assert_close(implicit.position_error_norm.detach(), unrolled.position_error_norm, rtol=0, atol=1e-12)
    torch.testing.assert_close(implicit.rotation_error_norm.detach(), unrolled.rotation_error_norm, rtol=0, atol=1e-12)
    # ... and the residual is the real distance from FK of those joints to the target (about 1 m for the far rows).
    reached = kin(implicit.q.detach())[..., :3, 3]
    distance = (target[..., :3, 3] - reached).norm(dim=-1)
    torch.testing.assert_close(implicit.position_error_norm.detach(), distance, rtol=1e-9, atol=1e-12)
    assert float(distance[unreachable].min()) > 0.1
    # Backward reaches every row, failed ones included, with finite values.
    implicit.q.sum().backward()
    assert torch.isfinite(xi.grad).all()
    assert (xi.grad.abs().sum(-1) > 0).all()
    # Under no_grad the implicit function is not used at all: no graph.
    with torch.no_grad():
        assert not ik.solve(target, q0.clone().requires_grad_(True)).q.requires_grad


# ---------------------------------------------------------------- R^9 -> SE(3)


def test_r9_gives_rigid_transforms_and_inverts_se3_to_r9():
    x = torch.randn(50, 9, dtype=F64, generator=torch.Generator().manual_seed(9))
    t = r9_to_se3(x)
    rot = t[..., :3, :3]
    torch.testing.assert_close(rot.transpose(-1, -2) @ rot, torch.eye(3, dtype=F64).expand(50, 3, 3))
    torch.testing.assert_close(torch.linalg.det(rot), torch.ones(50, dtype=F64))
    torch.testing.assert_close(t[..., :3, 3], x[..., :3])
    torch.testing.assert_close(r9_to_se3(se3_to_r9(t)), t)
    with pytest.raises(ShapeError):
        r9_to_se3(torch.zeros(3, 6))


def test_r9_analytic_jacobian_gradcheck():
    x = torch.randn(6, 9, dtype=F64, generator=torch.Generator().manual_seed(10), requires_grad=True)
    assert torch.autograd.gradcheck(r9_to_se3, (x,))


def test_r9_jacobian_has_no_periodic_singularity():
    """Sweep a full turn of rotation: the Jacobian's conditioning stays the same everywhere on the circle."""
    angles = torch.linspace(-math.pi, math.pi, 73, dtype=F64)
    axis = torch.tensor([0.3, -0.5, 0.8], dtype=F64)
    rot = so3_exp(angles[:, None] * axis / axis.norm())
    x = torch.cat((torch.zeros(73, 3, dtype=F64), rot[..., :, 0], rot[..., :, 1]), -1)
    jac = torch.autograd.functional.jacobian(lambda v: r9_to_se3(v).reshape(-1), x[0])
    spread = []
    for row in x:
        jac = torch.autograd.functional.jacobian(lambda v: r9_to_se3(v).reshape(-1), row)
        s = torch.linalg.svdvals(jac)
        spread.append(float(s[0] / s[s > 1e-9][-1]))
    assert max(spread) / min(spread) < 1.0 + 1e-6


def test_r9_singular_set_is_detected_and_gradients_grow_toward_it():
    base = torch.tensor([0.1, 0.2, 0.3, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0], dtype=F64)
    assert float(singularity_margin(base)) == pytest.approx(1.0)
    norms = []
    for distance in (1e-1, 1e-2, 1e-3):
        x = base.clone()
        x[6:9] = torch.tensor([1.0, distance, 0.0], dtype=F64)  # a2 nearly parallel to a1
        assert float(singularity_margin(x)) == pytest.approx(distance, rel=1e-6)
        x.requires_grad_(True)
        (r9_to_se3(x)[:3, :3] * torch.arange(9, dtype=F64).reshape(3, 3)).sum().backward()
        norms.append(float(x.grad.norm()))
    assert norms[1] > 5 * norms[0] and norms[2] > 5 * norms[1]
    on_set = base.clone()
    on_set[6:9] = on_set[3:6]
    assert float(singularity_margin(on_set)) == 0.0
    on_set.requires_grad_(True)
    out = r9_to_se3(on_set)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(on_set.grad).all()
