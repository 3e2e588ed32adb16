"""``kinematics.solve_qp`` against proxsuite (daqp through qpsolvers where ProxQP fails) on random QPs, its statuses
on infeasible QPs, batching, float32, implicit gradients (gradcheck and finite differences of the reference) and
typed errors. The 1000-QP measurement is the benchmark's (``--suite qp``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from optional_dependencies import require_module
from threads_support import assert_one_thread_gives_two_threads_bits

from kinematics import (
    INFEASIBLE,
    SOLVED,
    ConfigError,
    DtypeDeviceMismatchError,
    QPSolution,
    ShapeError,
    UnsupportedTransformError,
    solve_qp,
)
from learning.benchmark.qp_suite import SIZES, random_qps, reference, relative_error, to_torch

PER_SIZE = 30  # 8 sizes x 30 = 240 feasible QPs


def _proxsuite():
    return require_module("proxsuite", "pip install proxsuite (test-only), or the dev extra")


def _proxsuite_solve(p: dict):
    proxsuite = _proxsuite()
    big = 1e20
    return proxsuite.proxqp.dense.solve(
        H=p["P"], g=p["q"], A=p["A"], b=p["b"], C=p["G"], l=np.full(p["h"].shape, -big), u=p["h"],
        l_box=np.where(np.isinf(p["lb"]), -big, p["lb"]), u_box=np.where(np.isinf(p["ub"]), big, p["ub"]),
        eps_abs=1e-12, eps_rel=0.0, max_iter=10000,
    )  # fmt: skip


@pytest.mark.parametrize("size", SIZES, ids=[f"n{n}-eq{me}-in{mi}" for n, me, mi in SIZES])
def test_matches_reference(size):
    _proxsuite()
    n, me, mi = size
    problem = random_qps(PER_SIZE, n, me, mi, seed=1000 + n)
    sol = solve_qp(**to_torch(problem))
    assert isinstance(sol, QPSolution)
    assert sol.status.dtype == torch.int8 and sol.active_bounds.dtype == torch.int8
    checked = 0
    for i in range(PER_SIZE):
        x_ref, _ = reference(problem, i)
        if x_ref is None:
            continue
        checked += 1
        assert int(sol.status[i]) == SOLVED
        assert relative_error(sol.x[i].numpy(), x_ref) <= 1e-6
    assert checked >= PER_SIZE - 2
    assert (sol.ineq_multipliers >= 0).all()
    assert (sol.primal_residual <= 1e-8).all() and (sol.dual_residual <= 1e-8).all()


def test_multipliers_and_active_sets_agree_with_proxsuite():
    _proxsuite()
    n, me, mi = 35, 12, 8
    problem = random_qps(40, n, me, mi, seed=7)
    sol = solve_qp(**to_torch(problem))
    compared = 0
    for i in range(40):
        p = {k: v[i] for k, v in problem.items()}
        r = _proxsuite_solve(p)
        if r.info.status != _proxsuite().proxqp.QPSolverOutput.PROXQP_SOLVED:
            continue
        compared += 1
        scale = 1.0 + np.abs(r.z).max(initial=0) + np.abs(r.y).max(initial=0)
        np.testing.assert_allclose(sol.eq_multipliers[i].numpy(), r.y, atol=1e-6 * scale)
        np.testing.assert_allclose(sol.ineq_multipliers[i].numpy(), r.z[:mi], atol=1e-6 * scale)
        np.testing.assert_allclose(sol.bound_multipliers[i].numpy(), r.z[mi:], atol=1e-6 * scale)
        # active sets, where the reference is strictly complementary
        slack = p["h"] - p["G"] @ r.x
        clear = (r.z[:mi] > 1e-6) | (slack > 1e-6)
        assert (sol.active_inequalities[i].numpy()[clear] == (r.z[:mi] > 1e-6)[clear]).all()
        zb = r.z[mi:]
        side = np.where(zb > 1e-6, 1, np.where(zb < -1e-6, -1, 0))
        gap = np.minimum(np.abs(r.x - p["lb"]), np.abs(p["ub"] - r.x))
        clear_b = (np.abs(zb) > 1e-6) | (gap > 1e-6)
        assert (sol.active_bounds[i].numpy()[clear_b] == side[clear_b]).all()
    assert compared >= 35
    # the KKT convention: P x + q + A^T y + G^T z + w = 0
    t = to_torch(problem)
    stat = (
        (t["P"] @ sol.x[..., None])[..., 0]
        + t["q"]
        + (t["A"].mT @ sol.eq_multipliers[..., None])[..., 0]
        + (t["G"].mT @ sol.ineq_multipliers[..., None])[..., 0]
        + sol.bound_multipliers
    )
    assert stat.abs().max() < 1e-9


def test_semidefinite_hessian():
    _proxsuite()
    problem = random_qps(20, 12, 3, 6, seed=3)
    problem["P"][:, :, 6:] = 0.0  # rank <= 6, bounded through the constraints and finite bounds
    problem["P"][:, 6:, :] = 0.0
    problem["lb"] = np.where(np.isinf(problem["lb"]), -5.0, problem["lb"])
    problem["ub"] = np.where(np.isinf(problem["ub"]), 5.0, problem["ub"])
    sol = solve_qp(**to_torch(problem))
    # Known limitation: with the default 16 interior-point steps a few semidefinite (LP-like) rows end NOT solved
    # (reported INFEASIBLE or NOT_CONVERGED, never a wrong SOLVED); every SOLVED row is optimal.
    assert (sol.status == SOLVED).float().mean() >= 0.9
    for i in range(20):
        x_ref, _ = reference(problem, i)
        if int(sol.status[i]) != SOLVED:
            continue
        # an LP part may have several minimisers: compare objective values, and feasibility
        f = lambda x, i=i: 0.5 * x @ problem["P"][i] @ x + problem["q"][i] @ x  # noqa: E731
        assert f(sol.x[i].numpy()) <= f(x_ref) + 1e-7 * (1 + abs(f(x_ref)))
        assert sol.primal_residual[i] <= 1e-8


@pytest.mark.parametrize("size", [(7, 2, 4), (20, 5, 10), (35, 12, 8), (60, 24, 40), (10, 0, 0)])
def test_infeasible_flagged_never_solved(size):
    n, me, mi = size
    problem = random_qps(25, n, me, mi, seed=50 + n, infeasible=True)
    sol = solve_qp(**to_torch(problem))
    assert (sol.status == INFEASIBLE).all(), sol.status
    assert (sol.primal_residual > 1e-3).all()


def test_infeasible_least_violation_point():
    # x1 <= -1 and x1 >= 1 with x2 free in a strictly convex objective: the least-violation x1 is 0
    P = torch.eye(2, dtype=torch.float64)
    q = torch.tensor([0.0, -2.0], dtype=torch.float64)
    G = torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)
    h = torch.tensor([-1.0, -1.0], dtype=torch.float64)
    sol = solve_qp(P, q, G=G, h=h)
    assert int(sol.status) == INFEASIBLE
    torch.testing.assert_close(sol.x, torch.tensor([0.0, 2.0], dtype=torch.float64), atol=1e-6, rtol=0)


def test_batched_equals_loop_and_broadcasting():
    problem = to_torch(random_qps(6, 15, 4, 6, seed=11))
    batched = solve_qp(**problem)
    for i in range(6):
        single = solve_qp(**{k: v[i] for k, v in problem.items()})
        assert single.x.shape == (15,) and single.status.shape == ()
        torch.testing.assert_close(single.x, batched.x[i], atol=1e-10, rtol=0)
        assert int(single.status) == int(batched.status[i])
    # one shared P / A / G with a (2, 3) batch of q
    shared = {k: (v[0] if k in ("P", "A", "b", "G", "h", "lb", "ub") else v) for k, v in problem.items()}
    q = problem["q"][:6].reshape(2, 3, 15)
    sol = solve_qp(**(shared | {"q": q}))
    assert sol.x.shape == (2, 3, 15) and sol.status.shape == (2, 3)
    ref = solve_qp(**(shared | {"q": problem["q"][4]}))
    torch.testing.assert_close(sol.x[1, 1], ref.x, atol=1e-10, rtol=0)


def test_float32_close_to_float64():
    problem = random_qps(40, 35, 12, 8, seed=21)
    s64 = solve_qp(**to_torch(problem))
    s32 = solve_qp(**to_torch(problem, torch.float32))
    assert s32.x.dtype == torch.float32
    solved = (s32.status == SOLVED) & (s64.status == SOLVED)
    assert solved.float().mean() >= 0.9
    err = (s32.x.double() - s64.x).abs().amax(-1) / (1 + s64.x.abs().amax(-1))
    assert (err[solved] < 1e-3).all(), err.max()


def _strict_problem(seed: int = 5):
    """Small QPs whose active set survives small perturbations (strict complementarity checked)."""
    t = to_torch(random_qps(3, 8, 2, 4, seed=seed))
    sol = solve_qp(**t)
    assert (sol.status == SOLVED).all()
    slack = t["h"] - (t["G"] @ sol.x[..., None])[..., 0]
    z = sol.ineq_multipliers
    margin = torch.where(sol.active_inequalities, z, slack)
    assert margin.min() > 1e-4
    return t


@pytest.mark.parametrize("name", ["q", "b", "h", "P", "A", "G"])
def test_gradcheck(name):
    t = _strict_problem()
    if name in ("P", "A", "G"):
        # one QP for the matrices (64 / 16 / 32 entries, each two solves), the one with two active inequalities;
        # the batch of three is checked for q, b, h
        t = {k: v[1:2] for k, v in t.items()}

    def f(value):
        return solve_qp(**(t | {name: value})).x

    assert torch.autograd.gradcheck(f, (t[name].clone().requires_grad_(True),), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("drop", ["inequalities", "equalities", "both"])
def test_gradcheck_without_some_constraint_kinds(drop):
    # the arm layer's posture level has equalities and bounds only: the backward must take empty row sets
    t = _strict_problem()
    if drop in ("inequalities", "both"):
        t.pop("G"), t.pop("h")
    if drop in ("equalities", "both"):
        t.pop("A"), t.pop("b")

    def f(q):
        return solve_qp(**(t | {"q": q})).x

    assert torch.autograd.gradcheck(f, (t["q"].clone().requires_grad_(True),), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("name", ["lb", "ub"])
def test_bound_gradient_matches_central_differences(name):
    # the first QP of the strict set: its bound active set is strictly complementary too (rows 1-2 have a weakly
    # active bound, where the one-sided derivatives differ)
    t = {k: v[:1] for k, v in _strict_problem().items()}
    value = t[name].clone().requires_grad_(True)
    x = solve_qp(**(t | {name: value})).x
    upstream = torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(0))
    (grad,) = torch.autograd.grad((x * upstream).sum(), value)
    finite = torch.isfinite(t[name])
    numeric = torch.zeros_like(grad)
    for idx in finite.nonzero().tolist():
        e = torch.zeros_like(t[name])
        e[tuple(idx)] = 1e-6
        plus = solve_qp(**(t | {name: t[name] + e})).x
        minus = solve_qp(**(t | {name: t[name] - e})).x
        numeric[tuple(idx)] = ((plus - minus) * upstream).sum() / 2e-6
    torch.testing.assert_close(grad, numeric, atol=1e-6, rtol=1e-5)


def test_gradient_matches_reference_finite_differences():
    _proxsuite()
    problem = random_qps(1, 20, 5, 10, seed=9)
    t = to_torch(problem)
    q = t["q"].clone().requires_grad_(True)
    h = t["h"].clone().requires_grad_(True)
    x = solve_qp(**(t | {"q": q, "h": h})).x
    upstream = torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(1))
    grad_q, grad_h = torch.autograd.grad((x * upstream).sum(), (q, h))
    u = upstream[0].numpy()
    for key, grad in (("q", grad_q), ("h", grad_h)):
        numeric = np.zeros(problem[key].shape[1])
        for j in range(numeric.size):
            values = []
            for sign in (1.0, -1.0):
                p = {k: v[0].copy() for k, v in problem.items()}
                p[key][j] += sign * 1e-5
                values.append(_proxsuite_solve(p).x @ u)
            numeric[j] = (values[0] - values[1]) / 2e-5
        np.testing.assert_allclose(grad[0].numpy(), numeric, atol=1e-5, rtol=1e-4)


def test_typed_errors():
    t = to_torch(random_qps(2, 7, 2, 3, seed=0))
    with pytest.raises(ShapeError):
        solve_qp(t["P"], t["q"][:, :5])
    with pytest.raises(ShapeError):
        solve_qp(t["P"], t["q"], A=t["A"])
    with pytest.raises(ShapeError):
        solve_qp(t["P"], t["q"], A=t["A"], b=t["b"][:, :1])
    with pytest.raises(ShapeError):
        solve_qp(t["P"], t["q"], G=t["G"][..., :4], h=t["h"])
    with pytest.raises(ShapeError):
        solve_qp(t["P"], t["q"], lb=t["lb"][:, :3])
    with pytest.raises(ShapeError):
        solve_qp(t["P"][:1].expand(3, 7, 7), t["q"])  # batches 3 and 2 do not broadcast
    with pytest.raises(DtypeDeviceMismatchError):
        solve_qp(t["P"].float(), t["q"])
    with pytest.raises(DtypeDeviceMismatchError):
        solve_qp(t["P"], t["q"], G=t["G"], h=t["h"].float())
    with pytest.raises(DtypeDeviceMismatchError):
        solve_qp(t["P"].long(), t["q"].long())
    with pytest.raises(ConfigError):
        solve_qp(t["P"], t["q"], active_set_steps=-1)
    with pytest.raises(ShapeError):
        solve_qp(**t, warm_start=(t["h"] > 0, t["lb"]))  # not a QPSolution
    warm = solve_qp(**t)
    with pytest.raises(ShapeError):
        solve_qp(**{k: v for k, v in t.items() if k not in ("G", "h")}, warm_start=warm)  # 3 inequalities, not 0


def test_forward_mode_and_create_graph_refused():
    t = to_torch(random_qps(1, 7, 2, 3, seed=0))
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level(), pytest.raises(UnsupportedTransformError):
        solve_qp(**(t | {"q": fwAD.make_dual(t["q"], torch.ones_like(t["q"]))}))
    q = t["q"].clone().requires_grad_(True)
    x = solve_qp(**(t | {"q": q})).x
    with pytest.raises(UnsupportedTransformError):
        torch.autograd.grad(x.sum(), q, create_graph=True)


def test_float32_backward_matches_float64():
    # the factors are float64 for float32 inputs too: the backward must accept a float32 upstream gradient
    t64 = {k: v[:1] for k, v in _strict_problem().items()}
    grads = []
    for dtype in (torch.float32, torch.float64):
        t = {k: v.to(dtype) for k, v in t64.items()}
        q = t["q"].clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(solve_qp(**(t | {"q": q})).x.sum(), q)
        assert grad.dtype == dtype
        grads.append(grad.double())
    torch.testing.assert_close(grads[0], grads[1], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("batch", [40, 37])  # the kernel solves tiles of rows: 37 ends in a partial one
@pytest.mark.parametrize("size", [(7, 2, 4), (12, 0, 6), (35, 12, 28), (15, 0, 20), (35, 18, 8)])
def test_compiled_interior_point_equals_torch_ops(size, batch):
    from kinematics import native
    from kinematics.qp.kernels import _ipm_reference
    from kinematics.qp.problem import flatten_problem

    if native.library() is None:
        pytest.skip("no compiled kernels here")
    n, me, mi = size
    t = to_torch(random_qps(batch, n, me, mi, seed=70 + n))
    pb = flatten_problem((batch,), *(t[k] for k in ("P", "q", "A", "b", "G", "h", "lb", "ub")))
    compiled = native.qp_ipm(*pb, 16, 1e-9, 1e-10)
    assert compiled is not None
    for a, b in zip(_ipm_reference(*pb, 16, 1e-9), compiled, strict=True):
        torch.testing.assert_close(b, a, atol=1e-9, rtol=1e-9)
    # and the whole solve: the same statuses and solutions with the kernel disabled
    with native.disabled():
        ref = solve_qp(**t)
    sol = solve_qp(**t)
    assert torch.equal(sol.status, ref.status)
    torch.testing.assert_close(sol.x, ref.x, atol=1e-9, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_far_inactive_rows_as_in_the_wholebody_layer(dtype):
    # the whole-body layer pads its inequalities with rows 0 x <= 1000; they must not stop the interior point
    # (its slacks once started at 1 and needed many damped steps to reach 1000: every row ended INFEASIBLE)
    problem = random_qps(32, 35, 18, 8, seed=4)
    problem["lb"] = np.where(np.isinf(problem["lb"]), -10.0, problem["lb"])
    problem["ub"] = np.where(np.isinf(problem["ub"]), 10.0, problem["ub"])
    padded = dict(problem)
    padded["G"] = np.concatenate((problem["G"], np.zeros((32, 20, 35))), 1)
    padded["h"] = np.concatenate((problem["h"], np.full((32, 20), 1000.0)), 1)
    sol = solve_qp(**to_torch(padded, dtype))
    ref = solve_qp(**to_torch(problem, dtype))
    assert (sol.status == SOLVED).all() and (ref.status == SOLVED).all()
    torch.testing.assert_close(sol.x, ref.x, atol=1e-6 if dtype == torch.float64 else 1e-3, rtol=0)
    assert not sol.active_inequalities[:, 8:].any()


@pytest.mark.parametrize("size", [(35, 12, 8), (20, 5, 10), (15, 0, 20)])
def test_every_start_gives_the_one_solution(size):
    """The active-set steps from the empty set, from a warm start (right or wrong) and the interior point alone
    (``active_set_steps=0``) reach the same solution of a strictly convex QP; a wrong warm start costs steps (or
    the interior point), never the answer."""
    n, me, mi = size
    problem = random_qps(64, n, me, mi, seed=11 + n)
    t = to_torch(problem)
    cold = solve_qp(**t, active_set_steps=32)
    interior = solve_qp(**t)
    warm = solve_qp(**t, warm_start=cold, active_set_steps=32)
    everything = cold._replace(
        active_inequalities=torch.ones_like(cold.active_inequalities),
        active_bounds=torch.where(torch.isfinite(t["ub"]), 1, 0).to(torch.int8).expand_as(cold.active_bounds),
    )
    wrong = solve_qp(**t, warm_start=everything, active_set_steps=2)
    assert (cold.status == SOLVED).all()
    for other in (interior, warm, wrong):
        assert torch.equal(other.status, cold.status)
        torch.testing.assert_close(other.x, cold.x, atol=1e-7, rtol=0)
    assert torch.equal(warm.active_inequalities, cold.active_inequalities)
    for i in range(0, 64, 8):
        x_ref, _ = reference(problem, i)
        assert x_ref is None or relative_error(cold.x[i].numpy(), x_ref) <= 1e-6


def test_a_few_bounds_fixed_after_a_free_step_equal_the_reference_and_proxsuite():
    """The polish's two ways to hold a fixed variable: eliminated (the free variables' system), or, where a step
    with every variable free has the whole system's factor at hand and at most a few variables become fixed, as
    exact unit rows of that system; and, where such a unit row depends on the equalities (``x_0 = 3`` with
    ``x_0 <= 1``), the elimination after all. Each against the torch reference (one LU of the KKT matrix) and,
    where feasible, proxsuite."""
    from kinematics import native

    gen = torch.Generator().manual_seed(5)
    batch, n = 32, 20
    M = torch.randn(batch, n, n, dtype=torch.float64, generator=gen)
    P = M @ M.mT / n + torch.eye(n, dtype=torch.float64)
    q = torch.randn(batch, n, dtype=torch.float64, generator=gen)
    A = torch.randn(batch, 3, n, dtype=torch.float64, generator=gen)
    b = torch.randn(batch, 3, dtype=torch.float64, generator=gen)
    free = solve_qp(P, q, A, b)  # the unconstrained-by-bounds optimum: bounds just inside it bind
    fixed = torch.arange(batch) % 6  # 0 to 5 variables bound per row: unit rows up to 4, elimination beyond
    ub = torch.full((batch, n), 10.0, dtype=torch.float64)
    for row in range(batch):
        ub[row, : int(fixed[row])] = free.x[row, : int(fixed[row])] - 0.1
    lb = torch.full_like(ub, -10.0)
    problem = {"P": P, "q": q, "A": A, "b": b, "lb": lb, "ub": ub}
    # no interior point (iterations=0): every row is solved by the active-set steps from the empty set or not at all
    sol = solve_qp(**problem, active_set_steps=8, iterations=0)
    with native.disabled():
        ref = solve_qp(**problem, active_set_steps=8, iterations=0)
    assert (sol.status == SOLVED).all() and torch.equal(sol.active_bounds, ref.active_bounds)
    bound = (sol.active_bounds != 0).sum(-1)  # per row at most the bounds set to bind (coupling frees some)
    assert (bound <= fixed).all() and set(bound.tolist()) == {0, 1, 2, 3, 4, 5}
    torch.testing.assert_close(sol.x, ref.x, atol=1e-10, rtol=0)
    for row in range(0, batch, 5):
        p = {k: v[row].numpy() for k, v in problem.items()}
        p |= {"G": np.zeros((0, n)), "h": np.zeros(0)}
        np.testing.assert_allclose(sol.x[row].numpy(), _proxsuite_solve(p).x, atol=1e-7)
    # a unit row that repeats a (large) equality, 1000 x_0 = 3000 with x_0 <= 1: the Schur complement with it has
    # no pivot to trust, so the second polish step (the first has x_0 free) eliminates x_0 after all. Infeasible,
    # the same elastic point as the reference's
    A0 = torch.zeros(batch, 1, n, dtype=torch.float64)
    A0[:, 0, 0] = 1e3
    contradicted = {"P": P, "q": q, "A": A0, "b": torch.full((batch, 1), 3e3, dtype=torch.float64), "lb": lb}
    contradicted["ub"] = torch.where(torch.arange(n) == 0, 1.0, ub)
    sol = solve_qp(**contradicted, iterations=0, polish_steps=2)
    with native.disabled():
        ref = solve_qp(**contradicted, iterations=0, polish_steps=2)
    assert (sol.active_bounds[:, 0] == 1).all()
    assert (sol.status == INFEASIBLE).all() and (ref.status == INFEASIBLE).all()
    torch.testing.assert_close(sol.x, ref.x, atol=1e-9, rtol=0)


def _final_active_set(problem: dict):
    from kinematics.qp.kernels import run
    from kinematics.qp.problem import settings

    t = to_torch(problem)
    cfg = settings(torch.float64)
    cfg.update(iterations=16, polish_steps=2, refinements=2, active_set_steps=0)
    sol, pb, (flags, exact) = run(cfg, t["q"].shape[:1], *(t[k] for k in ("P", "q", "A", "b", "G", "h", "lb", "ub")))
    return sol, pb, flags, exact, cfg["elastic"]


@pytest.mark.parametrize("kind", ["feasible", "infeasible", "semidefinite", "contradictory"])
@pytest.mark.parametrize("size", [(7, 2, 4), (35, 12, 8), (15, 0, 20), (60, 24, 40)])
def test_compiled_adjoint_equals_torch_reference(size, kind):
    """The backward's adjoint solve (``QP_ADJOINT``): the compiled kernel (symmetric form, Cholesky and Schur
    complement, the dense LU where they fail) against its LU reference on SOLVED rows (refined to the original
    system), INFEASIBLE ones (the elastic system), semidefinite Hessians and contradictory bounds."""
    from kinematics import native
    from kinematics.qp.kernels import _ActiveSet, _adjoint_reference, _kkt
    from kinematics.qp.problem import Problem

    if native.library() is None:
        pytest.skip("no compiled kernels here")
    n, me, mi = size
    problem = random_qps(24, n, me, mi, seed=90 + n, infeasible=kind == "infeasible")
    problem["lb"] = np.where(np.isinf(problem["lb"]), -5.0, problem["lb"])
    problem["ub"] = np.where(np.isinf(problem["ub"]), 5.0, problem["ub"])
    if kind == "semidefinite":
        problem["P"][:, :, n // 2 :] = problem["P"][:, n // 2 :, :] = 0.0
    if kind == "contradictory":
        problem["lb"][:, 0], problem["ub"][:, 0] = 1.0, -1.0
    sol, pb, flags, exact, elastic = _final_active_set(problem)
    if kind == "infeasible":
        assert (sol.status == INFEASIBLE).all() and not exact.any()
    elif kind == "feasible":
        assert exact.all()
    g = torch.randn(24, n, dtype=torch.float64, generator=torch.Generator().manual_seed(n))
    compiled = native.qp_adjoint(pb.P, pb.A, pb.G, flags, exact, g, 2, elastic)
    assert compiled is not None
    # rows refined to the original system agree to rounding; on the others, two backward-stable solves of the
    # elastic system agree to its condition number times the rounding unit (about 1 / elastic, up to 1e11 here)
    n_, me_, mi_ = g.shape[1], pb.A.shape[1], pb.G.shape[1]
    active = _ActiveSet(flags[:, :mi_] > 0, flags[:, mi_ : mi_ + n_] > 0, flags[:, mi_ + n_ :] > 0)
    unused = (g.new_zeros(24, k) for k in (n_, me_, mi_, n_, n_))
    q, b, h, lb, ub = unused
    _, K_elastic, _, _, _ = _kkt(Problem(0.5 * (pb.P + pb.P.mT), q, pb.A, b, pb.G, h, lb, ub), active, elastic)
    conditioned = 10 * torch.finfo(torch.float64).eps * torch.linalg.cond(K_elastic)
    assert float(conditioned.max()) < 1e-3  # the elastic system is regular: the tolerance stays a test
    tolerance = torch.where(exact > 0, 1e-9, conditioned.clamp_min(1e-9))[:, None]
    for ours, theirs in zip(compiled, _adjoint_reference(pb.P, pb.A, pb.G, flags, exact, g, 2, elastic), strict=True):
        assert ours.shape == theirs.shape
        if theirs.numel():
            scale = 1.0 + theirs.abs().amax(-1, keepdim=True)
            assert ((ours - theirs).abs() <= tolerance * scale).all(), (ours - theirs).abs().amax()


@pytest.mark.parametrize("active_set_steps", [0, 8])
def test_a_batch_constant_hessian_read_in_place_equals_its_copies(active_set_steps):
    """One ``P`` broadcast over the batch (batch stride 0, as the whole-body layer's posture level passes it) is
    read, and factored, once by the compiled kernels; the solution and the gradients equal those of a ``P``
    copied per row (the kernels' per-row path)."""
    problem = random_qps(40, 20, 5, 10, seed=7)
    t = to_torch(problem)
    shared = t["P"][0]
    solutions, gradients = [], []
    for P in (shared.expand(40, 20, 20), shared.expand(40, 20, 20).clone()):
        P = P.detach().requires_grad_(True)
        q = t["q"].clone().requires_grad_(True)
        sol = solve_qp(P, q, t["A"], t["b"], t["G"], t["h"], t["lb"], t["ub"], active_set_steps=active_set_steps)
        solutions.append(sol)
        gradients.append(torch.autograd.grad((sol.x * torch.linspace(-1, 1, 20, dtype=sol.x.dtype)).sum(), (P, q)))
    assert (solutions[0].status == SOLVED).all()
    torch.testing.assert_close(solutions[0].x, solutions[1].x, atol=1e-12, rtol=0)
    assert torch.equal(solutions[0].active_bounds, solutions[1].active_bounds)
    for broadcast, copied in zip(gradients[0], gradients[1], strict=True):
        torch.testing.assert_close(broadcast, copied, atol=1e-10, rtol=0)


def test_another_default_device_leaves_the_compiled_solve_on_the_cpu():
    """The compiled interior point's and polish's settings were made on the default device: under
    ``torch.set_default_device`` (``meta`` here, the stand-in for ``cuda``) the kernels read arrays they could not (a
    segmentation fault). The solve, its active sets and its backward answer as under the CPU's default."""
    problem = to_torch(random_qps(4, 12, 3, 5, seed=3))
    expected = solve_qp(**problem)
    with torch.device("meta"):
        found = solve_qp(**problem)
    assert (
        found.x.device.type == "cpu" and torch.equal(found.x, expected.x) and torch.equal(found.status, expected.status)
    )
    q = problem["q"].clone().requires_grad_(True)
    (expected_grad,) = torch.autograd.grad(solve_qp(**(problem | {"q": q})).x.sum(), q)
    with torch.device("meta"):
        (found_grad,) = torch.autograd.grad(solve_qp(**(problem | {"q": q})).x.sum(), q)
    assert torch.equal(found_grad, expected_grad)


@pytest.mark.parametrize("structured", [False, True])
def test_one_thread_and_two_give_the_same_bits(structured):
    """One thread runs the kernels' rows outside any OpenMP region, in code compiled apart from the region's (with
    contraction on in this unit): the solve, its active sets and its gradient on one thread equal two threads' bit for
    bit (96 rows: each of two threads takes 48)."""
    problem = to_torch(random_qps(96, 20, 4, 6, seed=17))
    if structured:  # a Hessian shared by the batch: the kernels read it in place
        problem["P"] = problem["P"][0]

    def solve():
        q = problem["q"].clone().requires_grad_(True)
        solution = solve_qp(**(problem | {"q": q}))
        (grad,) = torch.autograd.grad((solution.x * torch.linspace(-1, 1, 20, dtype=q.dtype)).sum(), q)
        return solution.x, solution.status, grad

    assert_one_thread_gives_two_threads_bits(solve)


def test_a_well_conditioned_active_set_is_solved_as_it_is_and_a_nearly_dependent_one_refined():
    """Where the active set's factors pass the pivot test the polish solves the original system once (the refinement
    count changes nothing); where two equality rows are nearly dependent it solves the elastic system and refines it
    (the count matters: none leaves the row unsolved). The compiled polish and the torch reference decide alike and
    agree."""
    from kinematics import native

    generator = torch.Generator().manual_seed(11)
    n, me, batch = 12, 4, 6
    P = torch.eye(n, dtype=torch.float64) + 0.1 * torch.randn(batch, n, n, generator=generator, dtype=torch.float64)
    P = P @ P.mT
    q = torch.randn(batch, n, generator=generator, dtype=torch.float64)
    A = torch.linalg.qr(torch.randn(batch, n, me, generator=generator, dtype=torch.float64))[0].mT  # orthonormal rows
    b = torch.randn(batch, me, generator=generator, dtype=torch.float64)
    nearly, b_nearly = A.clone(), b.clone()  # the Schur complement's second pivot about 1e-6 of the first
    nearly[:, 1], b_nearly[:, 1] = A[:, 0] + 1e-3 * A[:, 1], b[:, 0] + 1e-3 * b[:, 1]
    for rows, rhs, as_is in ((A, b, True), (nearly, b_nearly, False)):
        found = {}
        for path in ("compiled", "reference"):
            for refinements in (0, 2):
                if path == "reference":
                    with native.disabled():
                        found[path, refinements] = solve_qp(P, q, rows, rhs, refinements=refinements)
                else:
                    found[path, refinements] = solve_qp(P, q, rows, rhs, refinements=refinements)
        for path in ("compiled", "reference"):
            moved = (found[path, 0].x - found[path, 2].x).abs().max()
            assert (moved < 1e-13) if as_is else (moved > 1e-9), (path, as_is, float(moved))
        for refinements in (0, 2):
            compiled, reference = found["compiled", refinements], found["reference", refinements]
            solved = as_is or refinements > 0  # the elastic solution alone misses the nearly dependent row by ~1e-6
            assert torch.equal(compiled.status, reference.status)
            assert bool((compiled.status == SOLVED).all()) is solved
            torch.testing.assert_close(compiled.x, reference.x, atol=1e-12 if solved else 1e-9, rtol=0)


def test_the_compiled_polish_and_the_torch_reference_share_one_pivot_threshold():
    """The as-is pivot test is a constant on each side (``QP_AS_IS`` in C, ``AS_IS_PIVOT`` in torch): one rule."""
    import re

    from kinematics.native import build
    from kinematics.qp.kernels import AS_IS_PIVOT

    found = re.findall(r"^#define QP_AS_IS (\S+)", (build.CSRC / "qp_active_set.c").read_text(), re.MULTILINE)
    assert len(found) == 1 and float(found[0]) == AS_IS_PIVOT
