"""A batched box-constrained QP solver in torch: fixed-count primal-dual active-set iterations, no host sync.

Solves ``min_x 0.5 x^T H x + g^T x  subject to  lower <= x <= upper`` for symmetric positive-definite ``H``
``(..., n, n)``. Each iteration guesses the active set from the primal-dual pair (Hintermueller, Ito and
Kunisch's semismooth Newton method), fixes active variables at their bounds and solves for the free ones with
one masked linear solve. Variables only move between free and active (never straight from one bound to the
other, which cycles on coupled problems). For the small problems of IK (n = dof) it settles in a few iterations; the count is
fixed so the solve runs without data-dependent control flow. Gradients flow through the final solve: free
variables are differentiable functions of ``H``, ``g`` and the bounds, active ones equal their bound.
"""

from __future__ import annotations

import torch


def solve_box_qp(
    hessian: torch.Tensor, gradient: torch.Tensor, lower: torch.Tensor, upper: torch.Tensor, iterations: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the minimiser ``x`` ``(..., n)`` and the final free-variable mask ``(..., n)`` (bool).

    ``lower``/``upper`` broadcast against ``gradient`` and may hold ``-inf``/``inf`` for unbounded variables.
    """
    eye = torch.eye(hessian.shape[-1], dtype=hessian.dtype, device=hessian.device)
    lower, upper = torch.broadcast_tensors(lower, upper, gradient)[:2]
    x, _ = torch.linalg.solve_ex(hessian, -gradient[..., None], check_errors=False)
    x = x[..., 0]
    multiplier = torch.zeros_like(x)
    free = torch.ones_like(x, dtype=torch.bool)
    at_upper = at_lower = torch.zeros_like(free)
    for _ in range(iterations):
        # The semismooth-Newton rule with a large constant: a free variable that crosses a bound becomes active; an
        # active one is released when its multiplier changes sign (never moved straight to the opposite bound,
        # which makes small constants cycle on coupled problems).
        at_upper = torch.where(at_upper, multiplier > 0, free & (x > upper))
        at_lower = torch.where(at_lower, multiplier < 0, free & (x < lower))
        free = ~(at_upper | at_lower)
        fixed = torch.where(at_upper, upper, torch.where(at_lower, lower, torch.zeros_like(x)))
        both_free = free[..., :, None] & free[..., None, :]
        reduced = torch.where(both_free, hessian, eye)
        rhs = torch.where(free, -gradient - (hessian @ fixed[..., None])[..., 0], fixed)
        x, _ = torch.linalg.solve_ex(reduced, rhs[..., None], check_errors=False)
        x = x[..., 0]
        multiplier = torch.where(free, torch.zeros_like(x), -((hessian @ x[..., None])[..., 0] + gradient))
    return x, free
