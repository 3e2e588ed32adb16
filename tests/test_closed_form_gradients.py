"""The closed-form backward passes (FK + Jacobian of a revolute chain, the DLS step) against gradcheck and against
autograd through the plain forward computation."""

import pytest
import torch

from kinematics.batch_last import to_batch_last
from kinematics.dls_step import _damped_least_squares, dls_step

F64 = torch.float64


def _configs(kin, n, seed):
    gen = torch.Generator().manual_seed(seed)
    lo, hi = kin.lower, kin.upper
    return lo + torch.rand(n, kin.dof, generator=gen, dtype=F64) * (hi - lo)


def test_revolute_chain_backward_passes_gradcheck(panda_layer):
    kin = panda_layer(F64)
    q = to_batch_last(_configs(kin, 3, 0), 1).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: kin.model.fk_and_jacobian_batch_last(x, kin.tcp), (q,))


def test_revolute_chain_backward_equals_autograd_through_the_pass(panda_layer):
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
def test_dls_step_backward_passes_gradcheck_and_equals_autograd(panda_layer, needs):
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
