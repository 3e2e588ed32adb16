"""Implicit gradients of ``solve_qp``: differentiate the KKT conditions on the final active set (OptNet).

At the solution, ``F(s, theta) = K s - r = 0`` holds for ``s = [x; y; z]`` and the active set's KKT matrix ``K``
(``kinematics.qp.kernels._kkt``): stationarity rows ``w_i (P x + q + A^T y + G^T z)_i`` (``w_i = 1`` for a free variable;
for a variable at a bound ``w_i = 0`` and the row is ``x_i = c_i``, also in the elastic system of rows that were
not SOLVED), the equalities, the active inequalities, ``z_k = 0`` for inactive ones. With
``lambda = K^{-T} [g; 0; 0]`` for the upstream gradient ``g`` on ``x`` and ``lambda_s = w * lambda_x``,
``dL/dtheta = -lambda^T dF/dtheta``:

    grad_q = -lambda_s,  grad_P = -sym(lambda_s x^T),  grad_A = -(lambda_y x^T + y lambda_s^T),  grad_b = lambda_y,
    grad_G = -(lambda_z x^T + z lambda_s^T) (active rows),  grad_h = lambda_z,  grad_{lb|ub} = lambda_x (fixed)

The adjoint solve is one kernel, ``kinematics.qp.kernels.QP_ADJOINT``: it factors the final active set's elastic KKT
system (``K`` differs from it by ``O(elastic)`` on SOLVED rows, so the solve is refined to ``K`` in two steps); the
torch reference by LU, the compiled CPU kernel in the symmetric form the forward's polish solves, on the free
variables (a Cholesky factor of ``P_FF + elastic I`` and one of the Schur complement, the LU only where those
fail). No host synchronisation. First-order reverse mode only.
"""

from __future__ import annotations

import torch

from kinematics.batch_last import first_order, transforms_active
from kinematics.errors import UnsupportedTransformError
from kinematics.qp.kernels import QP_ADJOINT, run


def refuse_transforms(needs_grad: bool) -> None:
    """The closed-form backward has no forward-mode or batching rule: refuse those with a typed error."""
    if transforms_active():
        raise UnsupportedTransformError(
            "solve_qp supports first-order reverse-mode autograd only (its backward is one linear solve of the "
            "active set's KKT system); forward-mode AD and torch.func transforms are unsupported"
        )


class QPFunction(torch.autograd.Function):
    """``apply(cfg, batch, P, q, A, b, G, h, lb, ub) -> QPSolution`` fields (only ``x`` is differentiable)."""

    @staticmethod
    def forward(ctx, cfg, batch, P, q, A, b, G, h, lb, ub):
        out, pb, (flags, exact) = run(cfg, batch, P, q, A, b, G, h, lb, ub)
        nb, n, me, mi = *pb.q.shape, pb.A.shape[1], pb.G.shape[1]
        ctx.save_for_backward(
            pb.P,
            pb.A,
            pb.G,
            flags,
            exact,
            out.x.reshape(nb, n),
            out.eq_multipliers.reshape(nb, me),  # (nb, 0) without equalities: -1 would be ambiguous
            out.ineq_multipliers.reshape(nb, mi),
        )
        ctx.batch, ctx.n, ctx.refinements = batch, n, max(2, cfg["refinements"])
        ctx.elastic = cfg["elastic"]
        ctx.shapes = tuple(t.shape for t in (P, q, A, b, G, h, lb, ub))
        ctx.dtype = q.dtype
        ctx.mark_non_differentiable(*out[1:])
        return tuple(out)

    @staticmethod
    @first_order
    def backward(ctx, grad_x, *_):
        P, A, G, flags, exact, x, y, z = ctx.saved_tensors
        batch, n, dtype = ctx.batch, ctx.n, ctx.dtype
        nb, mi = x.shape[0], G.shape[1]
        g = grad_x.reshape(nb, n).to(P.dtype)  # the problem is float64 for float32 inputs too
        ls, lx, ly, lz = QP_ADJOINT(P, A, G, flags, exact, g.contiguous(), ctx.refinements, ctx.elastic)
        ls, lx, ly, lz = (t.to(dtype) for t in (ls, lx, ly, lz))  # the gradients in the inputs' dtype, as x, y, z

        def outer_pair(a, b, c, d, scale=1.0):  # -scale (a b^T + c d^T) per row: two passes over the result (a
            # batched product of rank 2 costs 2 to 3 times more on the CPU, per-matrix overhead)
            return torch.mul(a[:, :, None], (-scale * b)[:, None, :]).addcmul_(
                c[:, :, None], d[:, None, :], value=-scale
            )

        def grad_bound(side: int):  # 0: lb, 1: ub; a contradictory pair's midpoint shares lx between them
            upper, lower = flags[:, mi : mi + n] > 0, flags[:, mi + n :] > 0
            share = torch.where(upper & lower, 0.5 * lx, lx)
            return torch.where(upper if side else lower, share, 0.0)

        grads = (  # each built only where its input needs it (a (B, n, n) product is the costliest)
            lambda: outer_pair(ls, x, x, ls, 0.5),  # -sym(ls x^T)
            lambda: -ls,
            lambda: outer_pair(ly, x, y, ls),
            lambda: ly,
            lambda: outer_pair(lz, x, z, ls),
            lambda: lz,
            lambda: grad_bound(0),
            lambda: grad_bound(1),
        )
        out = [None, None]
        for grad, shape, needed in zip(grads, ctx.shapes, ctx.needs_input_grad[2:], strict=True):
            if needed:
                grad = grad()
                out.append(grad.reshape(tuple(batch) + tuple(grad.shape[1:])).sum_to_size(shape))
            else:
                out.append(None)
        return tuple(out)
