"""One damped-least-squares step in the batch-last layout, with its first-order gradient in closed form.

``u = J^T x`` with ``x = solve(A, e)`` and ``A = J J^T + damping^2 I`` (``torch.linalg.solve_ex`` with
``check_errors=False``: no host synchronisation, a singular row gives non-finite values instead of an
exception). For an upstream gradient ``g`` on ``u``, with ``y = A^{-1} J g`` and ``w = J^T y``:

    dL/de = y,    dL/dJ[a, k] = x_a (g_k - w_k) - y_a u_k

one more solve and a few products instead of autograd's path through the LU factors. Under forward-mode AD or a
``torch.func`` transform autograd follows the torch ops instead.
"""

from __future__ import annotations

import torch

from kinematics import native
from kinematics.batch_last import first_order, gram, transforms_active
from kinematics.native.kernel import Kernel


def _solve(damped: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """``(B, 6, 6)`` systems, ``(6, B)`` right-hand sides -> ``(6, B)``."""
    x, _ = torch.linalg.solve_ex(damped, rhs.T[..., None], check_errors=False)
    return x[..., 0].T


def _damped_gram_reference(jac_t: torch.Tensor, damping_sq: torch.Tensor) -> torch.Tensor:
    return gram(jac_t, damping_sq).reshape(36, -1).T.reshape(-1, 6, 6)


def _transposed_product_reference(jac_t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return (jac_t * x.T).sum(1)


# J J^T + C as contiguous (B, 6, 6) matrices from jac_t (dof, 6, B) and C (6, 6, 1); J^T x (dof, B) for x (B, 6)
# as the batched solve returns it.
DAMPED_GRAM = Kernel("gram", "(Tensor jac_t, Tensor damping_sq) -> Tensor", _damped_gram_reference)
DAMPED_GRAM.implement("cpu", native.gram)
TRANSPOSED_PRODUCT = Kernel("jt_x", "(Tensor jac_t, Tensor x) -> Tensor", _transposed_product_reference)
TRANSPOSED_PRODUCT.implement("cpu", native.jt_x)


def _damped_least_squares(jac_t: torch.Tensor, err: torch.Tensor, damping_sq: torch.Tensor):
    """``(J^T x, x, A)``."""
    # The symmetric matrices as contiguous (B, 6, 6) rows, handed over column-major (.mT) as LAPACK stores them.
    damped = DAMPED_GRAM(jac_t, damping_sq).mT
    x, _ = torch.linalg.solve_ex(damped, err.T[..., None], check_errors=False)
    x = x[..., 0]  # (B, 6)
    return TRANSPOSED_PRODUCT(jac_t, x), x.T, damped


class _DampedLeastSquares(torch.autograd.Function):
    @staticmethod
    def forward(jac_t: torch.Tensor, err: torch.Tensor, damping_sq: torch.Tensor):
        return _damped_least_squares(jac_t, err, damping_sq)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        u, x, damped = output
        ctx.mark_non_differentiable(x, damped)
        ctx.save_for_backward(inputs[0], u, x, damped)

    @staticmethod
    @first_order
    def backward(ctx, grad_u, _grad_x, _grad_damped):
        jac_t, u, x, damped = ctx.saved_tensors
        y = _solve(damped, (jac_t * grad_u[:, None]).sum(0))
        w = (jac_t * y).sum(1)
        grad_jac = x * (grad_u - w)[:, None] - y * u[:, None]
        return grad_jac, y, None


def dls_step(
    q: torch.Tensor, jac_t: torch.Tensor, err: torch.Tensor, damping_sq: torch.Tensor, step_size: float
) -> torch.Tensor:
    """``q + step_size * J^T solve(J J^T + damping^2 I, e)`` in the batch-last layout, before any projection.

    ``q`` ``(dof, B)``, ``jac_t`` (``J^T``) ``(dof, 6, B)``, ``err`` ``(6, B)``, ``damping_sq`` ``(6, 6, 1)``
    without a gradient.
    """
    if torch.is_grad_enabled() and (jac_t.requires_grad or err.requires_grad) and not transforms_active():
        step = _DampedLeastSquares.apply(jac_t, err, damping_sq)[0]
    else:
        step = _damped_least_squares(jac_t, err, damping_sq)[0]
    return q + step_size * step


def adaptive_dls_step(
    q: torch.Tensor,
    jac_t: torch.Tensor,
    err: torch.Tensor,
    damping: float,
    residual_damping: float,
    error_weights,
    hold_joint_box: bool,
    step_size: float,
    lower: torch.Tensor,
    upper: torch.Tensor,
) -> torch.Tensor:
    """The opt-in DLS step of ``DifferentiableIKCfg`` (``residual_damping``, ``error_weights``, ``hold_joint_box``)
    in plain torch ops (autograd follows them, through the damping's dependence on ``e`` too), batch-last:
    ``q + step_size J_h^T solve(J_h J_h^T + lambda W^-1, e)`` with ``lambda = damping^2 + c |e|_w^2`` per row and
    ``J_h`` the Jacobian with the columns of held joints zeroed (none unless ``hold_joint_box``)."""
    weights = torch.tensor(error_weights, dtype=q.dtype, device=q.device)
    lam = damping**2 + residual_damping * (weights[:, None] * err * err).sum(0)  # (B,)
    inverse_weights = torch.diag(1.0 / weights)

    def step(jac: torch.Tensor) -> torch.Tensor:
        system = torch.einsum("ikb,ilb->bkl", jac, jac) + lam[:, None, None] * inverse_weights
        x, _ = torch.linalg.solve_ex(system, err.T[..., None], check_errors=False)
        return (jac * x[..., 0].T[None]).sum(1)

    u = step(jac_t)
    if hold_joint_box:
        reached = q + step_size * u
        held = (reached < lower) | (reached > upper)
        u = step(jac_t * (~held)[:, None, :])
    return q + step_size * u
