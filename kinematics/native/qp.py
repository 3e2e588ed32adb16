"""The QP's kernels: the interior point, the active-set polish and status tests, and the backward's adjoint solve.

Each wrapper returns ``None`` (the kernel then runs its torch reference) where ``loader.compiled`` refuses its
tensors."""

from __future__ import annotations

import torch

from kinematics.native import loader

_QP_MAX_N = 256  # qp_ipm allocates one tile's factors, QP_LANES rows of about 2 n^2 + 2 (m_eq + m_in) n values


def _hessian(P: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``P (nb, n, n)`` as the QP kernels read it, and its row stride: one matrix broadcast over the batch (batch
    stride 0, a constant Hessian) is read in place, once, not copied per row; any other ``P`` contiguously."""
    n = P.shape[-1]
    if P.stride(0) == 0 and P.stride(1) == n and P.stride(2) == 1:
        return P, 0
    return P.contiguous(), n * n


def qp_ipm(
    P: torch.Tensor,
    q: torch.Tensor,
    A: torch.Tensor,
    b: torch.Tensor,
    G: torch.Tensor,
    h: torch.Tensor,
    lb: torch.Tensor,
    ub: torch.Tensor,
    iterations: int,
    elastic: float,
    prox: float,
) -> tuple[torch.Tensor, ...] | None:
    """``kinematics.qp.kernels._ipm_reference`` on flat batch-first ``(nb, ...)`` tensors: ``(x, y, z, s, zu, su, zl, sl)``, or
    ``None``. The batch is split over ``torch.get_num_threads()`` OpenMP threads (ctypes releases the GIL), each solving
    its rows a tile of ``QP_LANES`` at a time."""
    if q.ndim != 2 or A.ndim != 3 or G.ndim != 3:
        return None
    nb, n = q.shape
    me, mi = A.shape[1], G.shape[1]
    if n > _QP_MAX_N or nb == 0:
        return None
    shapes = ((nb, n, n), (nb, n), (nb, me, n), (nb, me), (nb, mi, n), (nb, mi), (nb, n), (nb, n))
    kernel = loader.compiled("qp_ipm", (P, q, A, b, G, h, lb, ub), shapes)
    if kernel is None:
        return None
    dtype = q.dtype
    P, p_stride = _hessian(P)
    inputs = [P, *(t.contiguous() for t in (q, A, b, G, h, lb, ub))]
    params = torch.tensor([elastic, prox], dtype=dtype, device=loader.CPU)
    outs = [loader.empty(nb, k, dtype=dtype) for k in (n, me, mi, mi, n, n, n, n)]
    pointers = [t.data_ptr() for t in (params, *inputs, *outs)]
    kernel(nb, torch.get_num_threads(), n, me, mi, iterations, p_stride, *pointers)
    return tuple(outs)


def qp_polish(
    problem: tuple[torch.Tensor, ...],
    interior: tuple[torch.Tensor, ...],
    steps: int,
    refinements: int,
    elastic: float,
    tolerance: float,
    infeasibility_tolerance: float,
) -> tuple[torch.Tensor, ...] | None:
    """``kinematics.qp.kernels._solve``'s active-set polish and status tests on flat batch-first tensors: ``problem`` =
    ``(P, q, A, b, G, h, lb, ub)``, ``interior`` = the interior point's ``(z, s, zu, su, zl, sl)``. Returns
    ``(sol, w, flags, rows)``: ``sol (nb, n + m_eq + m_in)`` = ``[x; y; z]``, the signed bound multipliers
    ``w (nb, n)``, ``flags (nb, m_in + 2 n)`` = active inequalities, fixed at ``ub``, fixed at ``lb`` (0 / 1),
    ``rows (nb, 4)`` = status, primal and dual residual, whether the original system's point was kept (1) or the
    elastic one (0); or ``None``."""
    P, q, A, b, G, h, lb, ub = problem
    nb, n = q.shape
    me, mi = A.shape[1], G.shape[1]
    if nb == 0:
        return None
    shapes = ((nb, n, n), (nb, n), (nb, me, n), (nb, me), (nb, mi, n), (nb, mi), (nb, n), (nb, n))
    shapes += ((nb, mi), (nb, mi), (nb, n), (nb, n), (nb, n), (nb, n))
    kernel = loader.compiled("qp_polish", (*problem, *interior), shapes)
    if kernel is None:
        return None
    dtype = q.dtype
    P, p_stride = _hessian(P)
    inputs = [P, *(t.contiguous() for t in (*problem[1:], *interior))]
    params = torch.tensor([elastic, tolerance, infeasibility_tolerance], dtype=dtype, device=loader.CPU)
    outs = [loader.empty(nb, k, dtype=dtype) for k in (n + me + mi, n, mi + 2 * n, 4)]
    pointers = [t.data_ptr() for t in (params, *inputs, *outs)]
    kernel(nb, torch.get_num_threads(), n, me, mi, steps, refinements, p_stride, *pointers)
    if bool((outs[3][:, 0] < 0).any()):
        raise MemoryError("qp_polish could not allocate its scratch")
    return tuple(outs)


def qp_adjoint(
    P: torch.Tensor,
    A: torch.Tensor,
    G: torch.Tensor,
    flags: torch.Tensor,
    exact: torch.Tensor,
    g: torch.Tensor,
    refinements: int,
    elastic: float,
) -> tuple[torch.Tensor, ...] | None:
    """``kinematics.qp.solve``'s adjoint solve on flat batch-first tensors: the final active set ``flags (nb, m_in + 2 n)``
    (as ``qp_polish`` writes it), ``exact (nb,)`` (1 where the original system's point was kept), the upstream
    gradient ``g (nb, n)``. Returns ``(ls, lx, ly, lz)`` (``(nb, n)``, ``(nb, n)``, ``(nb, m_eq)``, ``(nb, m_in)``),
    or ``None``."""
    nb, n = g.shape
    me, mi = A.shape[1], G.shape[1]
    if nb == 0:
        return None
    shapes = ((nb, n, n), (nb, me, n), (nb, mi, n), (nb, mi + 2 * n), (nb,), (nb, n))
    kernel = loader.compiled("qp_adjoint", (P, A, G, flags, exact, g), shapes)
    if kernel is None:
        return None
    dtype = g.dtype
    P, p_stride = _hessian(P)
    inputs = [P, *(t.contiguous() for t in (A, G, flags, exact, g))]
    params = torch.tensor([elastic], dtype=dtype, device=loader.CPU)
    outs = [loader.empty(nb, k, dtype=dtype) for k in (n, n, me, mi)]
    pointers = [t.data_ptr() for t in (params, *inputs, *outs)]
    loader.checked(kernel(nb, torch.get_num_threads(), n, me, mi, refinements, p_stride, *pointers), "qp_adjoint")
    return tuple(outs)
