"""The QP's kernels: the interior point and the active-set polish (``QP_SOLVE``), the adjoint solve of the
backward (``QP_ADJOINT``), their torch references, and ``run``, the whole solve of a checked problem in float64
(see ``kinematics.qp.solve`` for the method)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from kinematics import native
from kinematics.native.kernel import Kernel
from kinematics.qp.problem import INFEASIBLE, NOT_CONVERGED, SOLVED, Problem, QPSolution, flatten_problem, flatten_rows


def _mv(m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (m @ v[..., None])[..., 0]


def _mtv(m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (v[..., None, :] @ m)[..., 0, :]


def _inf_norm(v: torch.Tensor) -> torch.Tensor:
    return v.abs().amax(-1) if v.shape[-1] else v.new_zeros(v.shape[:-1])


def prox(dtype: torch.dtype) -> float:
    """The interior point's proximal term on the Hessian's diagonal for problems of ``dtype``."""
    return 1e-10 if dtype == torch.float64 else 1e-6


def _ipm_reference(P, q, A, b, G, h, lb, ub, iterations: int, elastic: float):
    """Mehrotra predictor-corrector interior point steps on the elastic problem (dual regularisation ``elastic``
    on every constraint row): ``A x - elastic y = b``, ``G x - elastic z + s = h``, ``x - elastic zu + su = ub``,
    ``-x - elastic zl + sl = -lb``, ``s, z >= 0``. Returns ``(x, y, z, s, zu, su, zl, sl)``: the point and the
    inequality and bound slacks and multipliers (the compiled ``kinematics.native.qp_ipm`` does the same
    arithmetic, rows in SIMD lanes)."""
    nb, n = q.shape
    me, mi = A.shape[1], G.shape[1]
    dt = q.dtype
    d = elastic
    prox_term = prox(dt)
    fin_u, fin_l = torch.isfinite(ub).to(dt), torch.isfinite(lb).to(dt)
    ubf, lbf = torch.nan_to_num(ub, posinf=0.0, neginf=0.0), torch.nan_to_num(lb, posinf=0.0, neginf=0.0)
    count = (mi + fin_u.sum(-1) + fin_l.sum(-1)).clamp_min(1.0)
    x = q.new_zeros(nb, n)
    y = q.new_zeros(nb, me)
    # slacks start at the constraints' values at x = 0 (at least 1): a far, inactive row (``0 x <= 1000``) starts
    # primal feasible instead of needing many damped steps to grow its slack
    z, s = q.new_ones(nb, mi), torch.nan_to_num(h, posinf=1e8, neginf=-1e8).clamp_min(1.0)
    zu, su, zl, sl = fin_u.clone(), ubf.clamp_min(1.0), fin_l.clone(), (-lbf).clamp_min(1.0)

    def max_step(v, dv, mask=None):
        ratio = torch.where(dv < 0, -v / dv.clamp_max(-1e-300 if dt == torch.float64 else -1e-38), torch.inf)
        if mask is not None:
            ratio = torch.where(mask > 0, ratio, torch.inf)
        return ratio.amin(-1) if ratio.shape[-1] else ratio.new_full(ratio.shape[:-1], torch.inf)

    def direction(it, rc, rcu, rcl):
        """The Newton direction of the elastic KKT system for the complementarity right-hand sides ``rc``."""
        r_d, r_e, r_i, r_u, r_l, W, Wu, Wl, L, V, LS, y, z, s, zu, su, zl, sl = it
        zus, zls = torch.where(fin_u > 0, zu, 1.0), torch.where(fin_l > 0, zl, 1.0)
        ti = r_i - rc / z
        tu = r_u - rcu / zus
        tl = r_l - rcl / zls
        rhs1 = -r_d - _mtv(G, W * ti) - Wu * tu + Wl * tl
        # H dx + A^T dy = rhs1, A dx - elastic dy = -r_e with H = L L^T and V = L^-1 A^T, S = V^T V + elastic I
        u = torch.linalg.solve_triangular(L, rhs1[..., None], upper=False)
        if me:
            # S dy = V^T u + r_e through LS's two triangular solves: cholesky_solve's would read its status back to
            # the host (a synchronisation on a GPU), and LS, from cholesky_ex, needs no check
            dy = torch.linalg.solve_triangular(LS, _mtv(V, u[..., 0])[..., None] + r_e[..., None], upper=False)
            dy = torch.linalg.solve_triangular(LS.mT, dy, upper=True)
            u = u - V @ dy
            dy = dy[..., 0]
        else:
            dy = y
        dx = torch.linalg.solve_triangular(L.mT, u, upper=True)[..., 0]
        dz = W * (_mv(G, dx) + ti)
        dzu = Wu * (dx + tu)
        dzl = Wl * (-dx + tl)
        ds = (-rc - s * dz) / z
        dsu = fin_u * (-rcu - su * dzu) / zus
        dsl = fin_l * (-rcl - sl * dzl) / zls
        return dx, dy, dz, dzu, dzl, ds, dsu, dsl

    def step_len(z, s, zu, su, zl, sl, dz, dzu, dzl, ds, dsu, dsl):
        return torch.stack(
            (
                max_step(s, ds),
                max_step(z, dz),
                max_step(su, dsu, fin_u),
                max_step(zu, dzu, fin_u),
                max_step(sl, dsl, fin_l),
                max_step(zl, dzl, fin_l),
            )  # fmt: skip
        ).amin(0)

    for _ in range(iterations):
        r_d = _mv(P, x) + q + _mtv(A, y) + _mtv(G, z) + zu - zl
        r_e = _mv(A, x) - d * y - b
        r_i = _mv(G, x) - d * z + s - h
        r_u = (x - d * zu + su - ubf) * fin_u
        r_l = (-x - d * zl + sl + lbf) * fin_l
        mu = ((s * z).sum(-1) + (su * zu * fin_u).sum(-1) + (sl * zl * fin_l).sum(-1)) / count
        W = z / (s + d * z)
        Wu = fin_u * zu / (su + d * zu)
        Wl = fin_l * zl / (sl + d * zl)
        H = torch.baddbmm(P, G.mT * W[:, None, :], G)
        H.diagonal(dim1=-2, dim2=-1).add_(Wu + Wl + prox_term)
        L, _ = torch.linalg.cholesky_ex(H, check_errors=False)
        if me:
            V = torch.linalg.solve_triangular(L, A.mT, upper=False)
            S = V.mT @ V
            S.diagonal(dim1=-2, dim2=-1).add_(d)
            LS, _ = torch.linalg.cholesky_ex(S, check_errors=False)
        else:
            V = LS = None
        it = (r_d, r_e, r_i, r_u, r_l, W, Wu, Wl, L, V, LS, y, z, s, zu, su, zl, sl)
        state = (z, s, zu, su, zl, sl)

        aff = direction(it, s * z, su * zu * fin_u, sl * zl * fin_l)
        a_aff = step_len(*state, *aff[2:]).clamp_max(1.0)[:, None]
        dz, dzu, dzl, ds, dsu, dsl = aff[2:]
        mu_aff = (
            ((s + a_aff * ds) * (z + a_aff * dz)).sum(-1)
            + ((su + a_aff * dsu) * (zu + a_aff * dzu) * fin_u).sum(-1)
            + ((sl + a_aff * dsl) * (zl + a_aff * dzl) * fin_l).sum(-1)
        ) / count
        sigma_mu = ((mu_aff / mu.clamp_min(1e-300 if dt == torch.float64 else 1e-38)).clamp(0, 1) ** 3 * mu)[:, None]
        cor = direction(it, s * z + ds * dz - sigma_mu, (su * zu + dsu * dzu - sigma_mu) * fin_u,
                        (sl * zl + dsl * dzl - sigma_mu) * fin_l)  # fmt: skip
        dx, dy, dz, dzu, dzl, ds, dsu, dsl = cor
        a = (0.99 * step_len(*state, dz, dzu, dzl, ds, dsu, dsl)).clamp_max(1.0)[:, None]
        x, y = x + a * dx, y + a * dy
        z, s = z + a * dz, s + a * ds
        zu, su = zu + a * dzu, su + a * dsu
        zl, sl = zl + a * dzl, sl + a * dsl
    return x, y, z, s, zu * fin_u, su, zl * fin_l, sl


class _ActiveSet(NamedTuple):
    ineq: torch.Tensor  # (nb, mi) bool
    upper: torch.Tensor  # (nb, n) bool: fixed at ub
    lower: torch.Tensor  # (nb, n) bool: fixed at lb


def _kkt(pb: Problem, act: _ActiveSet, elastic: float):
    """The KKT matrix of the original problem on the active set ``K0``, its elastic one ``Kd``, the right-hand
    side ``r`` (the same for both) and the fixed values. Unknowns ``[x; y; z]``; rows: stationarity for free
    variables (elastic: ``+ elastic x_i``), ``x_i = c_i`` for fixed ones (exact in both: the compiled kernels
    eliminate them), ``A x = b`` (``- elastic y``), active ``G_k x = h_k`` (``- elastic z_k``), ``z_k = 0`` for
    inactive rows."""
    P, q, A, b, G, h, lb, ub = pb
    nb, n = q.shape
    me, mi = A.shape[1], G.shape[1]
    fixed = act.upper | act.lower
    both = act.upper & act.lower  # contradictory bounds lb > ub: their midpoint
    lbf, ubf = torch.nan_to_num(lb, posinf=0.0, neginf=0.0), torch.nan_to_num(ub, posinf=0.0, neginf=0.0)
    c = torch.where(both, 0.5 * (lbf + ubf), torch.where(act.upper, ubf, torch.where(act.lower, lbf, 0.0)))
    act_f = act.ineq.to(q.dtype)
    # assembled in place: fewer full (nb, N, N) passes than cat / where / diag_embed
    N = n + me + mi
    K0 = q.new_zeros(nb, N, N)
    K0[:, :n, :n] = P
    K0[:, :n, n : n + me] = A.mT
    K0[:, :n, n + me :] = G.mT
    K0[:, :n] *= (~fixed).to(q.dtype)[..., None]  # a fixed variable's row is x_i = c_i
    K0[:, :n, :n].diagonal(dim1=-2, dim2=-1).add_(fixed.to(q.dtype))
    K0[:, n : n + me, :n] = A
    K0[:, n + me :, :n] = G * act_f[..., None]
    K0[:, n + me :, n + me :].diagonal(dim1=-2, dim2=-1).copy_(1.0 - act_f)
    # a proximal term on free variables (P may be only semidefinite), the elastic weight on constraint rows
    diag = torch.cat((elastic * (~fixed).to(q.dtype), torch.full_like(b, -elastic), -elastic * act_f), 1)
    Kd = K0.clone()
    Kd.diagonal(dim1=-2, dim2=-1).add_(diag)
    r = torch.cat((torch.where(fixed, c, -q), b, h * act_f), 1)
    return K0, Kd, r, fixed, c


def _split(sol, n, me):
    return sol[:, :n], sol[:, n : n + me], sol[:, n + me :]


def _bound_multiplier(pb: Problem, x, y, z, fixed):
    stat = _mv(pb.P, x) + pb.q + _mtv(pb.A, y) + _mtv(pb.G, z)
    return torch.where(fixed, -stat, 0.0)


def _violation(pb: Problem, x) -> torch.Tensor:
    parts = [
        _inf_norm(_mv(pb.A, x) - pb.b),
        _inf_norm((_mv(pb.G, x) - pb.h).clamp_min(0)),
        _inf_norm((pb.lb - x).clamp_min(0)),
        _inf_norm((x - pb.ub).clamp_min(0)),
    ]
    return torch.stack(parts).amax(0)


# The pivot test of an active set's original system, relative to each factor's largest diagonal entry (the compiled
# polish's QP_AS_IS): above it, the elastic solution refined once is the original system's to about
# (elastic / pivot)^2 = 1e-12 (elastic 1e-9), so solving the original system there moves no answer by more.
AS_IS_PIVOT = 1e-3


def _cholesky_passes(M: torch.Tensor, used: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The Cholesky factor of the symmetric ``M`` ``(nb, k, k)`` on its ``used`` rows ``(nb, k)`` (the others unit
    rows), and per row whether every used pivot exceeds ``AS_IS_PIVOT`` (1 + the largest used diagonal entry)."""
    eye = torch.eye(M.shape[-1], dtype=M.dtype, device=M.device)
    L, info = torch.linalg.cholesky_ex(torch.where(used[..., :, None] & used[..., None, :], M, eye), check_errors=False)
    big = torch.where(used, M.diagonal(dim1=-2, dim2=-1), 0.0).abs().amax(-1, keepdim=True)
    pivots = L.diagonal(dim1=-2, dim2=-1) ** 2
    return L, (info == 0) & ((pivots > AS_IS_PIVOT * (1 + big)) | ~used).all(-1)


def _factors_as_is(pb: Problem, act: _ActiveSet, fixed: torch.Tensor) -> torch.Tensor:
    """Per row, whether the active set's original system passes the compiled polish's pivot tests: the factor of
    ``P_FF``, then that of the Schur complement ``C_F P_FF^-1 C_F^T`` of the equality and active inequality rows."""
    free = ~fixed
    L, passes = _cholesky_passes(pb.P, free)
    rows = torch.cat((pb.A, pb.G), 1) * free.to(pb.P.dtype)[:, None, :]
    if rows.shape[1] == 0:
        return passes
    V = torch.linalg.solve_triangular(L, rows.mT, upper=False)
    return passes & _cholesky_passes(V.mT @ V, torch.cat((torch.ones_like(pb.b, dtype=torch.bool), act.ineq), 1))[1]


def _polish(pb: Problem, act: _ActiveSet, elastic: float, refinements: int, as_is: torch.Tensor):
    """One active-set solve: on the rows ``as_is`` allows whose system passes the pivot tests (``_factors_as_is``),
    the original KKT system's solution; on the others the elastic solution and its refinement to the original
    system. Returns ``(sol_d, sol, fixed, as_is)``: the elastic (there: the original) solution, the refined one, and
    which rows were solved as they are."""
    K0, Kd, r, fixed, _ = _kkt(pb, act, elastic)
    as_is = as_is & _factors_as_is(pb, act, fixed)
    LU, piv, _ = torch.linalg.lu_factor_ex(torch.where(as_is[:, None, None], K0, Kd), check_errors=False)
    sol_d = torch.linalg.lu_solve(LU, piv, r[..., None])[..., 0]
    sol = sol_d
    elastic_rows = (~as_is).to(sol.dtype)[:, None]
    for _ in range(refinements):
        sol = sol + elastic_rows * torch.linalg.lu_solve(LU, piv, (r - _mv(K0, sol))[..., None])[..., 0]
    return sol_d, sol, fixed, as_is


def _next_active(pb: Problem, x, z, w, act: _ActiveSet, slack_p, slack_d) -> _ActiveSet:
    """Primal-dual active-set rule: an active row stays while its multiplier has the right sign; an inactive one
    enters when violated; a fixed variable is released (never moved straight to the other bound). Within the
    SOLVED test's tolerances (``slack_p`` primal, ``slack_d`` dual, per row) nothing changes, so a point that
    passes the test keeps its active set (rounding would otherwise make a touching row enter and the set
    degenerate)."""
    gx = _mv(pb.G, x)
    ineq = torch.where(act.ineq, z > -slack_d, gx > pb.h + slack_p)
    upper = torch.where(act.upper, w > -slack_d, ~act.lower & (x > pb.ub + slack_p))
    lower = torch.where(act.lower, w < slack_d, ~act.upper & (x < pb.lb - slack_p))
    # contradictory bounds (lb > ub): both sides, the elastic midpoint
    contra = pb.lb > pb.ub
    return _ActiveSet(ineq, upper | contra, lower | contra)


def _scales(pb: Problem) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's primal and dual scale of the SOLVED test, ``(nb,)``."""
    h = torch.where(torch.isfinite(pb.h), pb.h, 0.0)
    return 1.0 + torch.stack((_inf_norm(pb.b), _inf_norm(h))).amax(0), 1.0 + _inf_norm(pb.q)


def _guess(cfg: dict, batch, nb: int, n: int, mi: int, dtype: torch.dtype, device) -> torch.Tensor:
    """The active-set steps' first active set, flat ``(nb, mi + 2 n)``: ``cfg["warm_start"]``'s, else empty."""
    warm = cfg.get("warm_start")
    if warm is None:
        return torch.zeros(nb, mi + 2 * n, dtype=dtype, device=device)
    ineq, bounds = flatten_rows(warm[0], batch, 1), flatten_rows(warm[1], batch, 1)
    return torch.cat((ineq, bounds > 0, bounds < 0), 1).to(dtype)


def _solve(pb: Problem, cfg: dict, guess: torch.Tensor):
    """The whole forward solve on flat ``(nb, ...)`` tensors, without autograd, the active-set steps from
    ``guess``: the solution, and the final active set's flags with, per row, whether the original system's point
    was kept (1) or the elastic one (0) (``QP_ADJOINT`` needs both)."""
    n, me, mi = pb.q.shape[1], pb.A.shape[1], pb.G.shape[1]
    counts = (cfg["iterations"], max(1, cfg["polish_steps"]), cfg["active_set_steps"], cfg["refinements"])
    tolerances = (cfg["elastic"], cfg["tolerance"], cfg["infeasibility_tolerance"])
    sol, w, flags, rows = QP_SOLVE(*pb, guess, *counts, *tolerances)
    xs, ys, zs = _split(sol, n, me)
    active_bounds = (flags[:, mi : mi + n] - flags[:, mi + n :]).to(torch.int8)  # flags are 1 / 0: +1 / -1 / 0
    status = rows[:, 0].to(torch.int8)
    out = QPSolution(xs, ys, zs, w, flags[:, :mi] > 0, active_bounds, status, rows[:, 1], rows[:, 2])
    return out, (flags, rows[:, 3])


def _polish_reference(P, q, A, b, G, h, lb, ub, z, sz, zu, su, zl, sl, steps, refinements, elastic, tolerance,
                      infeasibility_tolerance):  # fmt: skip
    """``_solve``'s active-set polish and status tests as torch ops (the compiled ``native.qp_polish`` does the
    same arithmetic, the systems in symmetric form, and stops a row's steps once its active set repeats; its pivot
    tests read its own factors, so near ``AS_IS_PIVOT`` the two can decide apart, where their answers agree to about
    1e-12): the packed outputs ``(sol, w, flags, rows)``."""
    pb = Problem(P, q, A, b, G, h, lb, ub)
    n, me = q.shape[1], A.shape[1]
    tol = tolerance
    # the interior point's guess: a side is active where its multiplier exceeds its slack
    contra = lb > ub
    act = _ActiveSet(z > sz, (zu > su) & (zu >= zl) | contra, (zl > sl) & (zl > zu) | contra)
    scale_p, scale_d = _scales(pb)
    as_is = torch.ones_like(scale_p, dtype=torch.bool)  # a row's systems are the elastic ones from its first that fails
    for step in range(steps):
        sol_d, sol, fixed, as_is = _polish(pb, act, elastic, refinements, as_is)
        if step + 1 < steps:
            # the next guess from the refined point where it is finite, else from the elastic one
            good = torch.isfinite(sol).all(-1, keepdim=True)
            s = torch.where(good, sol, sol_d)
            xs, ys, zs = _split(s, n, me)
            w = _bound_multiplier(pb, xs, ys, zs, fixed)
            act = _next_active(pb, xs, zs, w, act, (tol * scale_p)[:, None], (tol * scale_d)[:, None])

    def kkt_ok(s, tol):
        xs, ys, zs = _split(s, n, me)
        w = _bound_multiplier(pb, xs, ys, zs, fixed)
        viol = _violation(pb, xs)
        sign = torch.stack(
            (
                _inf_norm((-zs).clamp_min(0)),
                _inf_norm(torch.where(act.upper & ~act.lower, (-w).clamp_min(0), 0.0)),
                _inf_norm(torch.where(act.lower & ~act.upper, w.clamp_min(0), 0.0)),
            )
        ).amax(0)
        stat = _inf_norm(_mv(pb.P, xs) + pb.q + _mtv(pb.A, ys) + _mtv(pb.G, zs) + w)
        ok = (viol <= tol * scale_p) & (sign <= tol * scale_d) & (stat <= tol * scale_d) & torch.isfinite(s).all(-1)
        return ok, viol, w

    ok_exact, _, _ = kkt_ok(sol, tol)
    ok_elastic, viol_d, _ = kkt_ok(sol_d, tol)
    final = torch.where(ok_exact[:, None], sol, sol_d)
    xs, ys, zs = _split(final, n, me)
    w = _bound_multiplier(pb, xs, ys, zs, fixed)
    viol = _violation(pb, xs)
    dual_res = _inf_norm(_mv(P, xs) + q + _mtv(A, ys) + _mtv(G, zs) + w)
    infeasible = viol_d > infeasibility_tolerance * scale_p
    status = torch.where(
        ok_exact | ok_elastic,
        SOLVED,
        torch.where(infeasible, INFEASIBLE, NOT_CONVERGED),
    ).to(torch.int8)
    # within-tolerance wrong signs (the SOLVED test allows them) are clipped: z >= 0, w >= 0 at ub, w <= 0 at lb
    zs = zs.clamp_min(0.0)
    w = torch.where(act.upper & ~act.lower, w.clamp_min(0.0), torch.where(act.lower & ~act.upper, w.clamp_max(0.0), w))
    flags = torch.cat((act.ineq, act.upper, act.lower), 1).to(q.dtype)
    rows = torch.stack((status.to(q.dtype), viol, dual_res, ok_exact.to(q.dtype)), 1)
    return torch.cat((xs, ys, zs), 1), w, flags, rows


def _start(guess: torch.Tensor, mi: int) -> tuple[torch.Tensor, ...]:
    """The polish's guess ``(z, s, zu, su, zl, sl)`` for the active set ``guess`` ``(nb, mi + 2 n)`` (active
    inequalities, at the upper bound, at the lower, 1 / 0): a side is active where its multiplier 1 exceeds its
    slack 1/2."""
    sizes = [mi, (guess.shape[1] - mi) // 2, (guess.shape[1] - mi) // 2]
    (z, zu, zl), (sz, su, sl) = guess.split(sizes, 1), torch.full_like(guess, 0.5).split(sizes, 1)
    return z, sz, zu, su, zl, sl


def _solve_reference(P, q, A, b, G, h, lb, ub, guess, iterations, polish_steps, active_set_steps, refinements,
                     elastic, tolerance, infeasibility_tolerance):  # fmt: skip
    """``_solve``'s steps 0 to 3 as torch ops, every row through every step (``QP_SOLVE``'s packed outputs: those
    of ``_polish_reference``). ``P``'s symmetric part is used, as by the compiled kernels."""
    problem = (0.5 * (P + P.mT), q, A, b, G, h, lb, ub)
    settings = (refinements, elastic, tolerance, infeasibility_tolerance)
    interior = _ipm_reference(*problem, iterations, elastic)[2:]
    second = _polish_reference(*problem, *interior, polish_steps, *settings)
    if active_set_steps == 0:
        return second
    first = _polish_reference(*problem, *_start(guess, G.shape[1]), active_set_steps, *settings)
    done = (first[3][:, 0] == SOLVED)[:, None]
    return tuple(torch.where(done, a, b) for a, b in zip(first, second, strict=True))


def _qp_solve_cpu(P, q, A, b, G, h, lb, ub, guess, iterations, polish_steps, active_set_steps, refinements, elastic,
                  tolerance, infeasibility_tolerance):  # fmt: skip
    """The compiled kernels: the active-set start on every row, the interior point and polish on the rows it did
    not solve only."""
    problem = (P, q, A, b, G, h, lb, ub)
    settings = (refinements, elastic, tolerance, infeasibility_tolerance)
    if active_set_steps > 0:
        first = native.qp_polish(problem, _start(guess, G.shape[1]), active_set_steps, *settings)
        if first is None:
            return None
        retry = torch.nonzero(first[3][:, 0] != SOLVED)[:, 0]
        if retry.numel() == 0:
            return first
        problem = tuple(t.index_select(0, retry) for t in problem)
    interior = native.qp_ipm(*problem, iterations, elastic, prox(q.dtype))
    second = None if interior is None else native.qp_polish(problem, interior[2:], polish_steps, *settings)
    if active_set_steps == 0 or second is None:
        return second
    for out, redone in zip(first, second, strict=True):
        out.index_copy_(0, retry, redone)
    return first


_PROBLEM = "Tensor P, Tensor q, Tensor A, Tensor b, Tensor G, Tensor h, Tensor lb, Tensor ub"


# The active-set steps start from ``guess`` (nb, m_in + 2 n) (active inequalities, at ub, at lb: 1 / 0). The solve's
# packed outputs (sol = [x; y; z], the signed bound multipliers, the active flags, per row status /
# primal / dual residual / original point kept), on flat batch-first float64 problems.
QP_SOLVE = Kernel(
    "qp_solve", f"({_PROBLEM}, Tensor guess, int iterations, int polish_steps, int active_set_steps, int refinements, "
    "float elastic, float tolerance, float infeasibility_tolerance) -> (Tensor, Tensor, Tensor, Tensor)",
    _solve_reference,
)  # fmt: skip


QP_SOLVE.implement("cpu", _qp_solve_cpu)


def _adjoint_reference(P, A, G, flags, exact, g, refinements: int, elastic: float):
    """The backward's adjoint solve as torch ops: ``K^T lam = [g; 0; 0]`` for the final active set's KKT matrix
    ``K`` (``_kkt``: the original one on rows whose original point was kept, ``exact > 0``, the elastic one
    elsewhere), with the elastic system's LU factors and ``refinements`` refinement steps (``K`` differs from it
    by ``O(elastic)``), or, on those rows whose system passes the polish's pivot tests (``_factors_as_is``), with
    the original system's own factors and none. Returns ``(ls, lx, ly, lz)``: ``lam``'s parts, ``ls`` = ``lx`` weighted as ``K`` weighs
    each stationarity row (1 for a free variable, 0 for a fixed one), ``lz`` 0 on inactive
    rows (the compiled ``native.qp_adjoint`` solves the same system in its symmetric form)."""
    nb, n = g.shape
    me, mi = A.shape[1], G.shape[1]
    act = _ActiveSet(flags[:, :mi] > 0, flags[:, mi : mi + n] > 0, flags[:, mi + n :] > 0)
    use_exact = exact > 0
    unused = (g.new_zeros(nb, k) for k in (n, me, mi, n, n))  # q, b, h, lb, ub: the matrices do not read them
    q, b, h, lb, ub = unused
    pb = Problem(0.5 * (P + P.mT), q, A, b, G, h, lb, ub)
    K0, Kd, _, fixed, _ = _kkt(pb, act, elastic)
    as_is = (use_exact & _factors_as_is(pb, act, fixed))[:, None, None]
    LU, piv, _ = torch.linalg.lu_factor_ex(torch.where(as_is, K0, Kd), check_errors=False)
    K = torch.where(use_exact[:, None, None], K0, Kd)
    rhs = torch.cat((g, g.new_zeros(nb, me + mi)), 1)[..., None]
    lam = torch.linalg.lu_solve(LU, piv, rhs, adjoint=True)
    refined = (~as_is).to(g.dtype)
    for _ in range(refinements):
        lam = lam + refined * torch.linalg.lu_solve(LU, piv, rhs - K.mT @ lam, adjoint=True)
    lam = lam[..., 0]
    lx, ly, lz = lam[:, :n], lam[:, n : n + me], lam[:, n + me :]
    return torch.where(fixed, 0.0, lx), lx, ly, lz * act.ineq.to(g.dtype)


def _adjoint_cpu(P, A, G, flags, exact, g, refinements: int, elastic: float):
    return native.qp_adjoint(P, A, G, flags, exact, g, refinements, elastic)


# solve_qp's backward: the adjoint of the final active set's KKT system for the upstream gradient g (nb, n), on flat
# batch-first float64 tensors (flags and exact as QP_SOLVE writes them): (ls, lx, ly, lz)
QP_ADJOINT = Kernel(
    "qp_adjoint",
    "(Tensor P, Tensor A, Tensor G, Tensor flags, Tensor exact, Tensor g, int refinements, float elastic) -> "
    "(Tensor, Tensor, Tensor, Tensor)",
    _adjoint_reference,
)


QP_ADJOINT.implement("cpu", _adjoint_cpu)


def run(cfg, batch, P, q, A, b, G, h, lb, ub):
    """float32 problems are solved in float64 (the interior point's late steps are too ill-conditioned for float32
    Cholesky factors) and the results cast back."""
    with torch.no_grad():
        work = torch.float64
        pb = flatten_problem(batch, *(t.to(work) for t in (P, q, A, b, G, h, lb, ub)))
        (nb, n), mi = pb.q.shape, pb.G.shape[1]
        sol, saved = _solve(pb, cfg, _guess(cfg, batch, nb, n, mi, work, q.device))
        out = QPSolution(
            *(
                t.reshape(tuple(batch) + tuple(t.shape[1:])).to(q.dtype if t.is_floating_point() else t.dtype)
                for t in sol
            )
        )
    return out, pb, saved
