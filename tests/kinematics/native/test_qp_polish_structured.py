"""The active-set polish for a Hessian diag(p) + U U^T (``qp_polish_structured``, what the whole-body step
calls for each level) against the dense polish (``qp_polish``) on the same problems: the same active sets, statuses
and solutions, through its Schur-complement path, its diagonal-only case and its fallback to the dense system."""

from __future__ import annotations

import pytest
import torch

from kinematics import native
from kinematics.native import loader

pytestmark = pytest.mark.skipif(native.library() is None, reason="no compiled kernels here")

ELASTIC, TOLERANCE, INFEASIBILITY = 1e-9, 1e-9, 1e-6


def _problem(nb: int, n: int, me: int, mi: int, r: int, seed: int, tiny_p: bool = False):
    """Feasible QPs whose Hessian is diag(p) + U U^T, with bounds and inequalities that bind at the optimum."""
    g = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    p = torch.rand(nb, n, generator=g, dtype=torch.float64) * 0.5 + 1e-2
    if tiny_p:
        p[:, :3] = 0.0  # no diagonal on three variables: too small a p_F for the Schur path, P_FF's factor instead
    U = rand(nb, n, r)
    P = torch.diag_embed(p) + U @ U.transpose(1, 2)
    x0 = 0.05 * rand(nb, n)  # a feasible point: the equalities through it, the inequalities and bounds around it
    A, G = rand(nb, me, n), rand(nb, mi, n)
    b = (A @ x0.unsqueeze(-1)).squeeze(-1)
    h = (G @ x0.unsqueeze(-1)).squeeze(-1) + 0.05 * torch.rand(nb, mi, generator=g, dtype=torch.float64)
    lb, ub = x0 - 0.1, x0 + 0.1
    q = 0.01 * rand(nb, n)  # a pull that the bounds and the inequalities stop
    return P, p, U, q, A, b, G, h, lb, ub


def _empty_guess(nb: int, n: int, mi: int):
    zeros, half = torch.zeros, torch.full
    return (
        zeros(nb, mi, dtype=torch.float64),
        half((nb, mi), 0.5, dtype=torch.float64),
        zeros(nb, n, dtype=torch.float64),
        half((nb, n), 0.5, dtype=torch.float64),
        zeros(nb, n, dtype=torch.float64),
        half((nb, n), 0.5, dtype=torch.float64),
    )


def _outputs(nb: int, n: int, me: int, mi: int):
    return [torch.empty(nb, k, dtype=torch.float64) for k in (n + me + mi, n, mi + 2 * n, 4)]


def _polish(P, q, A, b, G, h, lb, ub, guess, steps):
    nb, n = q.shape
    me, mi = A.shape[1], G.shape[1]
    kernel = loader.compiled("qp_polish", (P, q), ((nb, n, n), (nb, n)))
    params = torch.tensor([ELASTIC, TOLERANCE, INFEASIBILITY], dtype=torch.float64)
    outs = _outputs(nb, n, me, mi)
    tensors = (params, P, q, A, b, G, h, lb, ub, *guess, *outs)
    kernel(nb, 1, n, me, mi, steps, 1, n * n, *(t.contiguous().data_ptr() for t in tensors))
    return outs


def _polish_structured(p, U, q, A, b, G, h, lb, ub, guess, steps):
    nb, n = q.shape
    me, mi, r = A.shape[1], G.shape[1], U.shape[2]
    kernel = loader.compiled("qp_polish_structured", (p, q), ((nb, n), (nb, n)))
    params = torch.tensor([ELASTIC, TOLERANCE, INFEASIBILITY], dtype=torch.float64)
    outs = _outputs(nb, n, me, mi)
    tensors = (params, p, U, q, A, b, G, h, lb, ub, *guess, *outs)
    kernel(nb, 1, n, me, mi, steps, 1, r, *(t.contiguous().data_ptr() for t in tensors))
    return outs


@pytest.mark.parametrize(
    ("r", "tiny_p"),
    [(3, False), (0, False), (3, True)],
    ids=["low-rank", "diagonal", "pivot-too-small"],
)
def test_the_structured_polish_equals_the_dense_one(r, tiny_p):
    nb, n, me, mi = 64, 20, 4, 6
    P, p, U, q, A, b, G, h, lb, ub = _problem(nb, n, me, mi, r, seed=r + 10 * tiny_p, tiny_p=tiny_p)
    guess = _empty_guess(nb, n, mi)
    dense = _polish(P, q, A, b, G, h, lb, ub, guess, steps=12)
    structured = _polish_structured(p, U, q, A, b, G, h, lb, ub, guess, steps=12)
    sol, w, flags, rows = structured
    assert torch.equal(flags, dense[2])  # the same active sets (inequalities, upper and lower bounds)
    assert torch.equal(rows[:, 0], dense[3][:, 0])  # the same statuses
    assert (rows[:, 0] == 0).float().mean() > 0.9  # the problems are solved, mostly: the comparison means something
    assert flags[:, :mi].sum() > 0 and flags[:, mi:].sum() > 0  # inequalities and bounds bind
    torch.testing.assert_close(sol, dense[0], rtol=0, atol=1e-10)
    torch.testing.assert_close(w, dense[1], rtol=0, atol=1e-10)
    solved = rows[:, 0] == 0
    x = sol[solved, :n]
    assert bool(((x >= lb[solved] - 1e-9) & (x <= ub[solved] + 1e-9)).all())


def test_the_structured_polish_reads_each_rows_own_structure():
    """Rows with different p and U in one call: each row's answer is that of the row alone."""
    nb, n, me, mi, r = 32, 16, 3, 4, 2
    problem = _problem(nb, n, me, mi, r, seed=7)[1:]  # p, U, ...: not P
    guess = _empty_guess(nb, n, mi)
    together = _polish_structured(*problem, guess, steps=12)
    for row in (0, 13, 31):
        alone = _polish_structured(*(t[row : row + 1] for t in problem), tuple(t[row : row + 1] for t in guess), 12)
        for a, b in zip(together, alone, strict=True):
            assert torch.equal(a[row : row + 1], b)


def _adjoint(kernel_name, hessian, A, G, flags, exact, g, r=None):
    nb, n = g.shape
    me, mi = A.shape[1], G.shape[1]
    kernel = loader.compiled(kernel_name, (g,), ((nb, n),))
    outs = [torch.empty(nb, k, dtype=torch.float64) for k in (n, n, me, mi)]
    params = torch.tensor([ELASTIC], dtype=torch.float64)
    tensors = (params, *hessian, A, G, flags, exact, g, *outs)
    counts = (r,) if r is not None else (n * n,)
    assert kernel(nb, 1, n, me, mi, 2, *counts, *(t.contiguous().data_ptr() for t in tensors)) == 0
    return outs


@pytest.mark.parametrize(
    ("r", "tiny_p"),
    [(3, False), (0, False), (3, True)],
    ids=["low-rank", "diagonal", "pivot-too-small"],
)
def test_the_structured_adjoint_equals_the_dense_one(r, tiny_p):
    """solve_qp's backward solve (``qp_adjoint``) for the polish's final active sets, through diag(p) + U U^T
    (``qp_adjoint_structured``, the whole-body step's backward): the same (ls, lx, ly, lz) to 1e-10, on rows whose
    original point was kept and on rows given the elastic system (exact = 0)."""
    nb, n, me, mi = 64, 20, 4, 6
    P, p, U, q, A, b, G, h, lb, ub = _problem(nb, n, me, mi, r, seed=20 + r + 10 * tiny_p, tiny_p=tiny_p)
    _, _, flags, rows = _polish(P, q, A, b, G, h, lb, ub, _empty_guess(nb, n, mi), steps=12)
    exact = rows[:, 3].clone()
    exact[::5] = 0.0
    g = torch.randn(nb, n, generator=torch.Generator().manual_seed(r), dtype=torch.float64)
    dense = _adjoint("qp_adjoint", (P,), A, G, flags, exact, g)
    structured = _adjoint("qp_adjoint_structured", (p, U), A, G, flags, exact, g, r=r)
    assert flags[:, mi:].sum() > 0 and float(dense[2].abs().max()) > 0
    for a, b in zip(structured, dense, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10 * (1 + float(b.abs().max())))
