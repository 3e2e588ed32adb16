"""The closed-form backward passes (FK + Jacobian of a revolute chain, the DLS step) against gradcheck and against
autograd through the plain forward computation."""

import pytest
import torch

from kinematics import native
from kinematics.batch_last import to_batch_last
from kinematics.dls_step import _damped_least_squares, dls_step

F64 = torch.float64


@pytest.fixture(params=["compiled", "torch"])
def kernels(request, monkeypatch):
    """Each closed form both ways: through the compiled CPU kernels and through torch ops (CUDA, no compiler)."""
    if request.param == "torch":
        monkeypatch.setattr(native, "supports", lambda x: False)
    else:
        assert native.library() is not None
    return request.param


def _configs(kin, n, seed):
    gen = torch.Generator().manual_seed(seed)
    lo, hi = kin.lower, kin.upper
    return lo + torch.rand(n, kin.dof, generator=gen, dtype=F64) * (hi - lo)


def test_revolute_chain_backward_passes_gradcheck(panda_layer, kernels):
    kin = panda_layer(F64)
    q = to_batch_last(_configs(kin, 3, 0), 1).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: kin.model.fk_and_jacobian_batch_last(x, kin.tcp), (q,))


def test_revolute_chain_backward_equals_autograd_through_the_pass(panda_layer, kernels):
    kin = panda_layer(F64)
    q = to_batch_last(_configs(kin, 64, 1), 1)
    closed, traced = q.clone().requires_grad_(True), q.clone().requires_grad_(True)
    outputs = kin.model.fk_and_jacobian_batch_last(closed, kin.tcp)
    reference = kin.model._batch_last_pass(traced, kin.tcp, True)
    assert outputs[0].grad_fn is not None and "RevoluteChain" in type(outputs[0].grad_fn).__name__
    cotangents = [torch.randn_like(o) for o in outputs]
    grad = torch.autograd.grad(outputs, closed, cotangents)[0]
    expected = torch.autograd.grad(reference, traced, cotangents)[0]
    torch.testing.assert_close(grad, expected, rtol=1e-10, atol=1e-12)


def test_chains_with_a_prismatic_joint_keep_autograd(pr2_urdf, chain_of):
    pr2 = chain_of(pr2_urdf, "base_link", "r_gripper_tool_frame", F64)
    q = to_batch_last(torch.full((2, pr2.dof), 0.1, dtype=F64), 1).requires_grad_(True)
    outputs = pr2.fk_and_jacobian_batch_last(q)
    assert "RevoluteChain" not in type(outputs[0].grad_fn).__name__
    assert torch.autograd.gradcheck(lambda x: pr2.fk_and_jacobian_batch_last(x), (q,))


@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)])
def test_dls_step_backward_passes_gradcheck_and_equals_autograd(panda_layer, needs, kernels):
    kin = panda_layer(F64)
    q = to_batch_last(_configs(kin, 4, 2), 1)
    _, _, jac_t = kin.model.fk_and_jacobian_batch_last(q, kin.tcp)
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
    from kinematics.rotations import so3_exp

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
    from kinematics.rotations import so3_log_matrix_first, so3_log_matrix_first_vjp

    r = _rotation_batch(400, 4).requires_grad_(True)
    out = so3_log_matrix_first(r)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(5), dtype=F64)
    expected = torch.autograd.grad(out, r, g)[0]
    torch.testing.assert_close(so3_log_matrix_first_vjp(r.detach(), g), expected, rtol=1e-10, atol=1e-12)


def test_pose_error_backward_passes_gradcheck_and_equals_autograd(kernels):
    from kinematics.batch_last import matmul
    from kinematics.pose_error import pose_error_batch_last
    from kinematics.rotations import so3_log_matrix_first

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
