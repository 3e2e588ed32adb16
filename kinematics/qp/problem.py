"""The QP's problem and its answer: the statuses, the solution's fields, the input checks, the batch flattening and
the tolerances' defaults (see ``kinematics.qp.solve`` for the method)."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from kinematics.errors import DtypeDeviceMismatchError, ShapeError

SOLVED = 0


INFEASIBLE = 1


NOT_CONVERGED = 2


DEFAULTS = {
    torch.float64: {"tolerance": 1e-9, "infeasibility_tolerance": 1e-6, "elastic": 1e-9},
    torch.float32: {"tolerance": 1e-4, "infeasibility_tolerance": 1e-3, "elastic": 1e-6},
}


class QPSolution(NamedTuple):
    """The solution of a batch of QPs; every field has the batch's leading dimensions ``(...)``.

    ``x (..., n)``; ``eq_multipliers`` ``y (..., m_eq)``; ``ineq_multipliers`` ``z (..., m_in) >= 0``;
    ``bound_multipliers`` ``w (..., n)`` signed (``> 0`` at the upper bound, ``< 0`` at the lower), so that
    ``P x + q + A^T y + G^T z + w = 0``; ``active_inequalities (..., m_in)`` bool; ``active_bounds (..., n)`` int8
    ``+1`` upper / ``-1`` lower / ``0`` free; ``status (...)`` int8 (``SOLVED``, ``INFEASIBLE``,
    ``NOT_CONVERGED``); ``primal_residual (...)`` the largest constraint violation of ``x`` (inf-norm, equalities,
    inequalities and bounds); ``dual_residual (...)`` the inf-norm of ``P x + q + A^T y + G^T z + w``.
    """

    x: torch.Tensor
    eq_multipliers: torch.Tensor
    ineq_multipliers: torch.Tensor
    bound_multipliers: torch.Tensor
    active_inequalities: torch.Tensor
    active_bounds: torch.Tensor
    status: torch.Tensor
    primal_residual: torch.Tensor
    dual_residual: torch.Tensor


def check_problem(P, q, A, b, G, h, lb, ub):
    """Typed errors for shapes, dtypes and devices; returns the (possibly empty) constraint tensors."""
    for name, t in (("P", P), ("q", q)):
        if not isinstance(t, torch.Tensor):
            raise ShapeError(f"{name} must be a tensor, got {type(t).__name__}")
    if q.ndim < 1 or P.ndim < 2 or P.shape[-2:] != (q.shape[-1], q.shape[-1]):
        raise ShapeError(f"P must be (..., n, n) and q (..., n); got P {tuple(P.shape)}, q {tuple(q.shape)}")
    if q.dtype not in (torch.float32, torch.float64):
        raise DtypeDeviceMismatchError(f"q must be float32 or float64, got {q.dtype}")
    n = q.shape[-1]
    if n == 0:
        raise ShapeError("a QP needs at least one variable")
    dtype, device = q.dtype, q.device
    if (A is None) != (b is None):
        raise ShapeError("A and b come together (both or neither)")
    if (G is None) != (h is None):
        raise ShapeError("G and h come together (both or neither)")
    empty_m = q.new_zeros((0, n))
    A = empty_m if A is None else A
    b = q.new_zeros((0,)) if b is None else b
    G = empty_m if G is None else G
    h = q.new_zeros((0,)) if h is None else h
    lb = torch.full((n,), -torch.inf, dtype=dtype, device=device) if lb is None else lb
    ub = torch.full((n,), torch.inf, dtype=dtype, device=device) if ub is None else ub
    named = {"P": P, "q": q, "A": A, "b": b, "G": G, "h": h, "lb": lb, "ub": ub}
    for name, t in named.items():
        if not isinstance(t, torch.Tensor):
            raise ShapeError(f"{name} must be a tensor, got {type(t).__name__}")
        if t.dtype != dtype or t.device != device:
            raise DtypeDeviceMismatchError(
                f"{name} is {t.dtype} on {t.device}; q is {dtype} on {device}: every input must match"
            )
    for mat, vec, mname, vname in ((A, b, "A", "b"), (G, h, "G", "h")):
        if mat.ndim < 2 or mat.shape[-1] != n or vec.ndim < 1 or vec.shape[-1] != mat.shape[-2]:
            raise ShapeError(
                f"{mname} must be (..., m, {n}) and {vname} (..., m); got {tuple(mat.shape)} and {tuple(vec.shape)}"
            )
    for name in ("lb", "ub"):
        if named[name].ndim < 1 or named[name].shape[-1] != n:
            raise ShapeError(f"{name} must be (..., {n}); got {tuple(named[name].shape)}")
    try:
        batch = torch.broadcast_shapes(
            P.shape[:-2], q.shape[:-1], A.shape[:-2], b.shape[:-1], G.shape[:-2], h.shape[:-1], lb.shape[:-1],
            ub.shape[:-1],
        )  # fmt: skip
    except RuntimeError as error:
        raise ShapeError(f"the batch dimensions do not broadcast: {error}") from error
    return A, b, G, h, lb, ub, batch


def flatten_rows(t: torch.Tensor, batch, event: int) -> torch.Tensor:
    """``t`` broadcast to ``batch`` and its leading dimensions flattened: ``(prod(batch), *event_shape)``."""
    shape = t.shape[t.ndim - event :]
    return t.expand(*batch, *shape).reshape(math.prod(batch), *shape)


class Problem(NamedTuple):
    P: torch.Tensor
    q: torch.Tensor
    A: torch.Tensor
    b: torch.Tensor
    G: torch.Tensor
    h: torch.Tensor
    lb: torch.Tensor
    ub: torch.Tensor


def flatten_problem(batch, P, q, A, b, G, h, lb, ub) -> Problem:
    n = q.shape[-1]
    return Problem(
        flatten_rows(P, batch, 2),
        flatten_rows(q, batch, 1),
        flatten_rows(A, batch, 2),
        flatten_rows(b, batch, 1),
        flatten_rows(G, batch, 2),
        flatten_rows(h, batch, 1),
        flatten_rows(lb, batch, 1).reshape(-1, n),
        flatten_rows(ub, batch, 1).reshape(-1, n),
    )


def settings(dtype, **kw) -> dict:
    cfg = dict(DEFAULTS[torch.float64])  # every problem is solved in float64 (see run)
    cfg.update({k: v for k, v in kw.items() if v is not None})
    return cfg


def check_warm_start(warm, batch, mi: int, n: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    ineq, bounds = getattr(warm, "active_inequalities", None), getattr(warm, "active_bounds", None)
    if not isinstance(ineq, torch.Tensor) or not isinstance(bounds, torch.Tensor):
        raise ShapeError(f"warm_start must be a QPSolution, got {type(warm).__name__}")
    if ineq.device != device or bounds.device != device:
        raise DtypeDeviceMismatchError(f"warm_start is on {ineq.device}; the problem is on {device}")
    try:
        if ineq.shape[-1] != mi or bounds.shape[-1] != n:
            raise RuntimeError
        torch.broadcast_shapes(ineq.shape[:-1], bounds.shape[:-1], batch)
    except (RuntimeError, IndexError):
        raise ShapeError(
            f"warm_start's active sets {tuple(ineq.shape)} and {tuple(bounds.shape)} do not fit this problem: "
            f"(..., {mi}) and (..., {n}) broadcasting to the batch {tuple(batch)}"
        ) from None
    return ineq, bounds
