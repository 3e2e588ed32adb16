"""A batched, differentiable dense QP solver in torch: fixed iteration counts, no host synchronisation.

Solves, for every row of a batch (any leading dimensions, broadcast),

    min_x 1/2 x^T P x + q^T x   s.t.   A x = b,   G x <= h,   lb <= x <= ub     (bounds may be +-inf)

with ``P`` symmetric positive semidefinite (its symmetric part is used).

Method (every count is bounded, every decision is a per-row ``torch.where``):

0. Up to ``active_set_steps`` primal-dual active-set steps (step 2's, below) from ``warm_start``'s active set or
   the empty one (no inequality active, no variable at a bound: the first is the equality-constrained solve). A row whose point
   passes the SOLVED test there is done (its solution is the problem's: the test is the KKT conditions); every
   other row is solved again by steps 1 and 2. Off by default: a random QP with a dozen active constraints needs
   8 to 32 steps from the empty set, and the interior point is cheaper; a whole-body step, whose levels have few
   active constraints (or the level above's active set to start from), is done in one to three.
1. ``iterations`` Mehrotra predictor-corrector interior-point steps on the *elastic* problem: every constraint row
   carries the dual regularisation ``elastic`` (``A x - elastic y = b``, ``G x - elastic z + s = h``, likewise the
   bounds), which is the KKT system of the problem with the quadratic penalty ``1 / (2 elastic)`` on each
   constraint's violation. The elastic problem always has a solution, feasible or not. One Cholesky of
   ``P + G^T W G + D`` (``n x n``) and one of its ``m_eq x m_eq`` Schur complement per step.
2. ``polish_steps`` primal-dual active-set Newton steps (Hintermueller-Ito-Kunisch), starting from the interior
   point's guess (a side is active where its multiplier exceeds its slack): solve the active set's KKT system (a
   variable at a bound is fixed there, exactly), the *original* problem's (``elastic = 0``) where its factors are
   well conditioned (every Cholesky pivot of the free variables' Hessian and of the constraints' Schur complement
   above 1e-3 of its factor's largest diagonal entry, ``kernels.AS_IS_PIVOT``: there the refined elastic solution
   would agree with it to about 1e-12), else the elastic one, refined ``refinements`` times to the original with
   the same factors (and so at every later step of that row); take the next guess from that point.
3. A row is ``SOLVED`` when the refined point is primal feasible and dual feasible (multiplier signs) to
   ``tolerance``; otherwise ``INFEASIBLE`` when the elastic solution violates the constraints by more than
   ``infeasibility_tolerance``; otherwise ``NOT_CONVERGED``.

On an ``INFEASIBLE`` row ``x`` is the solution of the elastic problem on the last step's active set,

    min_x 1/2 x^T P x + q^T x + 1/(2 elastic) * (||A x - b||^2 + ||G_a x - h_a||^2)   s.t.   x_i = c_i (i fixed)

with ``G_a``, ``h_a`` its active inequality rows and each variable it fixes held at that bound (at the midpoint of
contradictory bounds): for ``elastic -> 0`` the least-squares least-violation point of the constraint rows with
those bounds kept, and among those the one of least objective (the violation term dominates by ``1 / elastic``).

KKT convention: ``P x + q + A^T y + G^T z + w = 0`` with ``z >= 0`` (``ineq_multipliers``) and the signed bound
multiplier ``w`` (``bound_multipliers``): ``w_i > 0`` where ``x_i`` is at its upper bound, ``w_i < 0`` at its lower
bound, ``0`` where free. ``active_bounds`` is ``+1`` / ``-1`` / ``0`` for upper / lower / free.

Gradients (``kinematics.qp.gradient``): implicit differentiation of the KKT conditions on the final active set
(OptNet), one adjoint solve of its KKT system (``QP_ADJOINT``), w.r.t. ``P, q, A, b, G, h, lb, ub``; only ``x``
carries a gradient.
"""

from __future__ import annotations

import torch

from kinematics.errors import ConfigError
from kinematics.qp.gradient import QPFunction, refuse_transforms
from kinematics.qp.kernels import run
from kinematics.qp.problem import QPSolution, check_problem, check_warm_start, settings


def solve_qp(
    P: torch.Tensor,
    q: torch.Tensor,
    A: torch.Tensor | None = None,
    b: torch.Tensor | None = None,
    G: torch.Tensor | None = None,
    h: torch.Tensor | None = None,
    lb: torch.Tensor | None = None,
    ub: torch.Tensor | None = None,
    *,
    iterations: int = 16,
    polish_steps: int = 2,
    refinements: int = 2,
    active_set_steps: int = 0,
    warm_start: QPSolution | None = None,
    tolerance: float | None = None,
    infeasibility_tolerance: float | None = None,
    elastic: float | None = None,
) -> QPSolution:
    """Solve ``min 1/2 x^T P x + q^T x`` s.t. ``A x = b``, ``G x <= h``, ``lb <= x <= ub`` for a batch.

    Shapes: ``P (..., n, n)``, ``q (..., n)``, ``A (..., m_eq, n)``, ``b (..., m_eq)``, ``G (..., m_in, n)``,
    ``h (..., m_in)``, ``lb``/``ub`` ``(..., n)`` with ``-inf``/``inf`` for missing bounds; leading dimensions
    broadcast. float32 or float64, all on one device. Up to ``active_set_steps`` active-set solves first (0, the
    default: none; they pay where few constraints are active or a warm start is near), from the empty active set or
    from ``warm_start``'s (a solution of a problem with the same inequalities and
    bounds, its ``active_inequalities`` and ``active_bounds`` broadcast to the batch); on the rows they leave unsolved, ``iterations`` interior-point steps, then
    ``polish_steps`` active-set solves (each solve refined ``refinements`` times); defaults of ``tolerance`` (the SOLVED test, relative),
    ``infeasibility_tolerance`` and ``elastic`` (the inverse penalty weight of the elastic problem) depend on the
    dtype of the computation, which is float64 for float32 inputs too (results cast back): 1e-9 / 1e-6 / 1e-9. See the module docstring for the method, the
    status rules and the sign conventions; ``x`` is differentiable w.r.t. every tensor input (first-order reverse
    mode; forward-mode AD, ``torch.func`` and ``create_graph`` raise ``UnsupportedTransformError``).
    """
    A, b, G, h, lb, ub, batch = check_problem(P, q, A, b, G, h, lb, ub)
    cfg = settings(
        q.dtype,
        tolerance=tolerance,
        infeasibility_tolerance=infeasibility_tolerance,
        elastic=elastic,
    )
    for name, value in (("iterations", iterations), ("polish_steps", polish_steps), ("refinements", refinements),
                        ("active_set_steps", active_set_steps)):  # fmt: skip
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{name} must be an int >= 0, got {value!r}")
    cfg.update(
        iterations=iterations, polish_steps=polish_steps, refinements=refinements, active_set_steps=active_set_steps
    )
    if warm_start is not None:
        cfg["warm_start"] = check_warm_start(warm_start, batch, G.shape[-2], q.shape[-1], q.device)
    inputs = (P, q, A, b, G, h, lb, ub)
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in inputs)
    refuse_transforms(needs_grad)
    if needs_grad:
        sol = QPSolution(*QPFunction.apply(cfg, batch, *inputs))
    else:
        sol = run(cfg, batch, *inputs)[0]
    return sol
