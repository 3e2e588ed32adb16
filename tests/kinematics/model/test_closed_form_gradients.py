"""The closed-form backward passes (FK + Jacobian of a revolute chain, the DLS step, the pose error) against gradcheck
and against autograd through the plain forward computation, and forward-mode AD through the public functions."""

import pytest
import torch

from kinematics import native
from kinematics.batch_last import to_batch_last
from kinematics.ik.dls_step import _damped_least_squares, dls_step

F64 = torch.float64


@pytest.fixture(params=["compiled", "torch"])
def kernels(request):
    """Each closed form both ways: through the compiled CPU kernels and through torch ops (CUDA, no compiler)."""
    if request.param == "torch":
        with native.disabled():
            yield request.param
    else:
        assert native.library() is not None
        yield request.param


def _configs(kin, n, seed):
    gen = torch.Generator().manual_seed(seed)
    lo, hi = kin.lower, kin.upper
    return lo + torch.rand(n, kin.dof, generator=gen, dtype=F64) * (hi - lo)


def test_revolute_chain_backward_passes_gradcheck(panda_layer, kernels):
    kin = panda_layer(F64)
    q = to_batch_last(_configs(kin, 3, 0), 1).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: kin.model.fk_and_jacobian(x, kin.tcp, batch_last=True), (q,))


def test_revolute_chain_backward_equals_autograd_through_the_pass(panda_layer, kernels):
    kin = panda_layer(F64)
    q = to_batch_last(_configs(kin, 64, 1), 1)
    closed, traced = q.clone().requires_grad_(True), q.clone().requires_grad_(True)
    outputs = kin.model.fk_and_jacobian(closed, kin.tcp, batch_last=True)
    reference = kin.model._batch_last_pass(traced, kin.tcp, True)
    assert outputs[0].grad_fn is not None and "RevoluteChain" in type(outputs[0].grad_fn).__name__
    cotangents = [torch.randn_like(o) for o in outputs]
    grad = torch.autograd.grad(outputs, closed, cotangents)[0]
    expected = torch.autograd.grad(reference, traced, cotangents)[0]
    torch.testing.assert_close(grad, expected, rtol=1e-10, atol=1e-12)


def test_chains_with_a_prismatic_joint_keep_autograd(pr2_urdf, chain_of):
    pr2 = chain_of(pr2_urdf, "base_link", "r_gripper_tool_frame", F64)
    q = to_batch_last(torch.full((2, pr2.dof), 0.1, dtype=F64), 1).requires_grad_(True)
    outputs = pr2.fk_and_jacobian(q, batch_last=True)
    assert "RevoluteChain" not in type(outputs[0].grad_fn).__name__
    assert torch.autograd.gradcheck(lambda x: pr2.fk_and_jacobian(x, batch_last=True), (q,))


@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)])
def test_dls_step_backward_passes_gradcheck_and_equals_autograd(panda_layer, needs, kernels):
    kin = panda_layer(F64)
    q = to_batch_last(_configs(kin, 4, 2), 1)
    _, _, jac_t = kin.model.fk_and_jacobian(q, kin.tcp, batch_last=True)
    err = torch.randn(6, 4, dtype=F64, generator=torch.Generator().manual_seed(3)) * 0.05
    damping_sq = 0.05**2 * torch.eye(6, dtype=F64)[..., None]
    jac_t, err = jac_t.clone().requires_grad_(needs[0]), err.clone().requires_grad_(needs[1])
    inputs = tuple(x for x in (jac_t, err) if x.requires_grad)

    def step(*args):
        it = iter(args)
        j = next(it) if needs[0] else jac_t
        e = next(it) if needs[1] else err
        return dls_step(q, j, e, damping_sq, 0.5)

    assert torch.autograd.gradcheck(step, inputs)
    g = torch.randn(kin.dof, 4, dtype=F64)
    grads = torch.autograd.grad(step(*inputs), inputs, g)
    expected = torch.autograd.grad(q + 0.5 * _damped_least_squares(jac_t, err, damping_sq)[0], inputs, g)
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def _rotation_batch(n: int, seed: int) -> torch.Tensor:
    """``(3, 3, n)`` float64 matrices covering every branch of the log: generic, below the small-sine threshold,
    near and exactly at pi, the identity, and rotations perturbed off SO(3) (an ambient derivative)."""
    from kinematics.lie.rotations import so3_exp

    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(n, 3, generator=gen, dtype=F64)
    unit = w / w.norm(dim=-1, keepdim=True)
    w[: n // 8] *= 1e-7
    w[n // 8 : n // 3] = unit[n // 8 : n // 3] * (
        torch.pi - 0.12 * torch.rand(n // 3 - n // 8, 1, generator=gen, dtype=F64)
    )
    w[n // 3 : n // 3 + 4] = unit[n // 3 : n // 3 + 4] * torch.pi
    w[n // 3 + 4 : n // 3 + 6] = 0.0
    r = so3_exp(w).permute(1, 2, 0).contiguous()
    r[:, :, n // 2 :] += 1e-4 * torch.randn(3, 3, n - n // 2, generator=gen, dtype=F64)
    return r


def test_log_vjp_equals_autograd_through_the_formula_on_every_branch():
    from kinematics.lie.rotations import so3_log_matrix_first, so3_log_matrix_first_vjp

    r = _rotation_batch(400, 4).requires_grad_(True)
    out = so3_log_matrix_first(r)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(5), dtype=F64)
    expected = torch.autograd.grad(out, r, g)[0]
    torch.testing.assert_close(so3_log_matrix_first_vjp(r.detach(), g), expected, rtol=1e-10, atol=1e-12)


def test_pose_error_backward_passes_gradcheck_and_equals_autograd(kernels):
    from kinematics.batch_last import matmul
    from kinematics.lie.pose_error import pose_error_batch_last
    from kinematics.lie.rotations import so3_log_matrix_first

    gen = torch.Generator().manual_seed(6)
    reached = _rotation_batch(48, 7)
    target = matmul(_rotation_batch(48, 8), reached)
    target_pos, pos = torch.randn(3, 48, generator=gen, dtype=F64), torch.randn(3, 48, generator=gen, dtype=F64)
    # gradcheck on small, near-pi and generic rows; not on exact half turns, where the axis sign jumps.
    rows = torch.tensor([0, 3, 6, 9, 12, 15, 40, 44, 47])
    picked = [t[..., rows].clone().requires_grad_(True) for t in (target, target_pos, reached, pos)]
    assert torch.autograd.gradcheck(pose_error_batch_last, picked)
    closed = [t.clone().requires_grad_(True) for t in (target, target_pos, reached, pos)]
    traced = [t.clone().requires_grad_(True) for t in (target, target_pos, reached, pos)]
    position, rotation = pose_error_batch_last(*closed)
    expected = (traced[1] - traced[3], so3_log_matrix_first(matmul(traced[0], traced[2].transpose(0, 1))))
    cot = [torch.randn(3, 48, generator=gen, dtype=F64) for _ in range(2)]
    got = torch.autograd.grad((position, rotation), closed, cot)
    want = torch.autograd.grad(expected, traced, cot)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def _forward_ad_cases(kin, pr2):
    """Each public function with float64 inputs inside its smooth region: ``(function, inputs)``."""
    from kinematics import DifferentiableIKCfg, DifferentiableIKLayer, pose_error
    from kinematics.lie.pose_error import pose_error_batch_last

    q = _configs(kin, 3, 9).requires_grad_(True)
    q_pr2 = torch.full((2, pr2.dof), 0.1, dtype=F64).requires_grad_(True)
    with torch.no_grad():
        target, reached = kin(_configs(kin, 3, 10)), kin(_configs(kin, 3, 11))
        seed = _configs(kin, 3, 12)
    bl = [to_batch_last(t, k) for t, k in ((target[:, :3, :3], 2), (target[:, :3, 3], 1))]
    bl += [to_batch_last(t, k) for t, k in ((reached[:, :3, :3], 2), (reached[:, :3, 3], 1))]
    # validate_inputs=False: gradcheck's finite differences step off SO(3), which the validation rejects.
    clamp = DifferentiableIKLayer(kin, DifferentiableIKCfg(iterations=3, validate_inputs=False))
    qp = DifferentiableIKLayer(kin, DifferentiableIKCfg(iterations=2, step="qp", validate_inputs=False))
    leaf = lambda x: x.detach().clone().requires_grad_(True)  # noqa: E731
    damping_sq = 0.05**2 * torch.eye(6, dtype=F64)[..., None]
    with torch.no_grad():
        jac_t = kin.model.fk_and_jacobian(to_batch_last(seed, 1), kin.tcp, batch_last=True)[2]
    return {
        "KinematicsLayer.forward": (kin, (q,)),
        "KinematicsLayer.fk_and_jacobian": (kin.fk_and_jacobian, (q,)),
        "SerialChainKinematics.fk_and_jacobian (prismatic joint)": (pr2.fk_and_jacobian, (q_pr2,)),
        "fk_and_jacobian(batch_last=True)": (
            lambda x: kin.model.fk_and_jacobian(x, kin.tcp, batch_last=True),
            (leaf(to_batch_last(q, 1)),),
        ),
        "pose_error": (pose_error, (leaf(target), leaf(reached))),
        "pose_error_batch_last": (pose_error_batch_last, tuple(leaf(t) for t in bl)),
        "dls_step": (
            lambda j, e: dls_step(to_batch_last(seed, 1), j, e, damping_sq, 0.5),
            (leaf(jac_t), leaf(0.05 * torch.randn(6, 3, dtype=F64, generator=torch.Generator().manual_seed(13)))),
        ),
        "DifferentiableIKLayer.solve (clamp)": (lambda t, s: clamp.solve(t, s).q, (leaf(target), leaf(seed))),
        "DifferentiableIKLayer.solve (qp)": (lambda t, s: qp.solve(t, s).q, (leaf(target), leaf(seed))),
    }


@pytest.mark.parametrize(
    "name",
    [
        "KinematicsLayer.forward",
        "KinematicsLayer.fk_and_jacobian",
        "SerialChainKinematics.fk_and_jacobian (prismatic joint)",
        "fk_and_jacobian(batch_last=True)",
        "pose_error",
        "pose_error_batch_last",
        "dls_step",
        pytest.param("DifferentiableIKLayer.solve (clamp)", marks=pytest.mark.slow),
        pytest.param("DifferentiableIKLayer.solve (qp)", marks=pytest.mark.slow),
    ],
)
def test_forward_mode_ad_passes_gradcheck(name, panda_layer, pr2_urdf, chain_of):
    """Forward-mode tangents (torch.autograd.forward_ad) equal finite differences and the backward pass."""
    pr2 = chain_of(pr2_urdf, "base_link", "r_gripper_tool_frame", F64)
    function, inputs = _forward_ad_cases(panda_layer(F64), pr2)[name]
    assert torch.autograd.gradcheck(function, inputs, check_forward_ad=True)


def test_torch_func_transforms_equal_autograd(panda_layer):
    """jvp, jacfwd, jacrev and vmap through FK + Jacobian give what reverse-mode autograd and a batched call give."""
    kin = panda_layer(F64)
    q = _configs(kin, 4, 14)
    tangent = torch.randn(q.shape, dtype=F64, generator=torch.Generator().manual_seed(15))
    pose, jac = kin.fk_and_jacobian(q)
    pose_dot, _ = torch.func.jvp(kin.fk_and_jacobian, (q,), (tangent,))[1]
    # The pose's derivative along the tangent from the geometric Jacobian: [J_v t, [J_w t]x R].
    twist = (jac @ tangent[..., None])[..., 0]
    torch.testing.assert_close(pose_dot[:, :3, 3], twist[:, :3], rtol=1e-10, atol=1e-12)
    from kinematics import skew

    torch.testing.assert_close(pose_dot[:, :3, :3], skew(twist[:, 3:]) @ pose[:, :3, :3], rtol=1e-10, atol=1e-12)
    forward, reverse = torch.func.jacfwd(kin)(q[0]), torch.func.jacrev(kin)(q[0])
    expected = torch.autograd.functional.jacobian(kin, q[0])
    torch.testing.assert_close(forward, expected, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(reverse, expected, rtol=1e-10, atol=1e-12)
    mapped = torch.func.vmap(kin.model.fk_and_jacobian, in_dims=(0, None))(q, kin.tcp)
    for got, want in zip(mapped, (pose, jac), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_second_order_through_the_closed_forms_raises_and_torch_func_gives_it(panda_layer):
    """The closed-form backward passes are first-order: building a graph of them (create_graph, the double-backward
    trick of torch.autograd.functional.jvp) used to drop the second-order terms silently (a zero jvp)."""
    from kinematics import UnsupportedTransformError, pose_error

    kin = panda_layer(F64)
    q = _configs(kin, 1, 16)[0]
    with pytest.raises(UnsupportedTransformError, match="second-order"):
        torch.autograd.functional.jvp(kin, q, torch.ones_like(q))
    with torch.no_grad():
        target = kin(_configs(kin, 1, 17)[0])

    def loss(x):
        position, rotation = pose_error(target, kin(x))
        return (position**2).sum() + (rotation**2).sum()

    x = q.clone().requires_grad_(True)
    with pytest.raises(UnsupportedTransformError, match="second-order"):
        torch.autograd.grad(loss(x), x, create_graph=True)
    hessian = torch.func.hessian(loss)(q)
    h = 1e-5
    steps = h * torch.eye(kin.dof, dtype=F64)
    central = torch.stack([(torch.func.grad(loss)(q + e) - torch.func.grad(loss)(q - e)) / (2 * h) for e in steps])
    torch.testing.assert_close(hessian, central, rtol=1e-6, atol=1e-7)
