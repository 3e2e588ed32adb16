"""Implicit gradients of the IK solution: differentiate the converged joints instead of the unrolled iterations.

At a converged solve the error ``e(q*, T)`` vanishes. Linearising the DLS iteration there, a target change moves
the joints by the minimum-norm solution ``dq = J_F^+ de`` over the free joints ``F`` (inside their limits), and a
seed change survives only in the null space of ``J_F`` (DLS steps lie in the row space of ``J``). So backward is
one linear solve ``(J_F J_F^T + eps I) w = J_F g`` per row, then the target gradient is the transpose of
``de/dT`` applied to ``w``, and the seed gradient is ``g - J_F^T w`` on free joints.

The forward iterations run without building a graph, so memory does not grow with the iteration count. The
gradient is exact for the unrolled solve's limit on converged rows; on rows that did not converge (or whose
seed dependence is far from linear) it is an approximation, which the tests and benchmark quantify.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


class ImplicitIKSolve(torch.autograd.Function):
    """``apply(target, seed, iterate, jacobian_at, error, free_at, regularization) -> q*``."""

    @staticmethod
    def forward(
        ctx,
        target,
        seed,
        iterate: Callable,
        jacobian_at: Callable,
        error: Callable,
        free_at: Callable,
        regularization: float,
    ):
        with torch.no_grad():
            q = iterate(target, seed)
        ctx.save_for_backward(target, seed, q)
        ctx.jacobian_at, ctx.error, ctx.free_at, ctx.regularization = jacobian_at, error, free_at, regularization
        return q

    @staticmethod
    def backward(ctx, grad_q):
        target, seed, q = ctx.saved_tensors
        with torch.no_grad():
            reached, jac = ctx.jacobian_at(q)
            free = ctx.free_at(q).to(q.dtype)  # (..., dof)
            jac_free = jac * free[..., None, :]
            eye = torch.eye(jac.shape[-2], dtype=q.dtype, device=q.device)
            gram = jac_free @ jac_free.transpose(-1, -2) + ctx.regularization * eye
            rhs = (jac_free @ (grad_q * free)[..., None])[..., 0]
            w, _ = torch.linalg.solve_ex(gram, rhs[..., None], check_errors=False)
            w = w[..., 0]  # (..., 6): gradient with respect to the pose error
        grad_target = grad_seed = None
        if ctx.needs_input_grad[0]:
            with torch.enable_grad():
                t = target.detach().requires_grad_(True)
                e = ctx.error(t, reached.detach())
                (grad_target,) = torch.autograd.grad(e, t, w)
        if ctx.needs_input_grad[1]:
            inside_seed = ctx.free_at(seed).to(q.dtype)  # a clamped seed coordinate has zero derivative
            grad_seed = inside_seed * free * (grad_q - (jac_free.transpose(-1, -2) @ w[..., None])[..., 0])
        return grad_target, grad_seed, None, None, None, None, None
