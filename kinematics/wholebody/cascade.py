"""A strict cascade of QPs for one step: each priority level's optimum is kept exactly by the levels below.

Level ``k`` solves ``min sum_t |W_t (J_t dq - gain_t e_t)|^2 + damping^2 |dq|^2`` over the step ``dq`` subject to
every constraint (contacts, the support polygon, limits) and, for every level ``j < k``, ``W_j J_j dq = W_j J_j
dq_j`` (the task values level ``j`` achieved, as equalities, not as a penalty weight). The last level's step is
the step. Every level's status is reported in ``level_status``. When the first level's constraints cannot all
hold, its least-violation solution (``solve_qp``'s), clamped to the step's bounds, is the step, and the levels
below keep what it achieved. A
lower level that ``solve_qp`` does not report solved (its constraints are those of the level above plus that
level's achieved values, so this means a numerically inconsistent stack) keeps the step of the level above it:
feasible, and exactly optimal for every level above.

Every piece is a torch op (``solve_qp`` differentiates through its KKT conditions on the active set), so the
step is differentiable w.r.t. the targets and the configuration, level by level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from kinematics.model import KinematicTree, TreeState
from kinematics.qp import SOLVED, solve_qp
from kinematics.wholebody.constraints.constraint import Constraint
from kinematics.wholebody.tasks.task import Task

_WORK = torch.float64  # solve_qp's working precision


@dataclass(frozen=True)
class CascadeStep:
    """The step ``dq`` ``(..., nv)``, each level's QP status ``(..., n_levels)`` and the last level's active
    inequalities ``(..., m_in)`` and bounds ``(..., nv)``."""

    dq: torch.Tensor
    level_status: torch.Tensor
    active_inequalities: torch.Tensor | None
    active_bounds: torch.Tensor | None


@dataclass(frozen=True)
class ConstraintRows:
    """Every constraint stacked at one configuration: ``A dq = b``, ``G dq <= h``, ``lb <= dq <= ub``."""

    A: torch.Tensor | None
    b: torch.Tensor | None
    G: torch.Tensor | None
    h: torch.Tensor | None
    lb: torch.Tensor | None
    ub: torch.Tensor | None


def constraint_rows(
    tree: KinematicTree, state: TreeState, q: torch.Tensor, constraints: Sequence[Constraint], targets: Mapping
) -> ConstraintRows:
    equalities, inequalities, lb, ub = [], [], None, None
    for constraint in constraints:
        target = targets.get(constraint.name)
        if (rows := constraint.equality(tree, state, q, target)) is not None:
            equalities.append(rows)
        if (rows := constraint.inequality(tree, state, q, target)) is not None:
            inequalities.append(rows)
        if (bounds := constraint.bounds(tree, state, q)) is not None:
            lb = bounds[0] if lb is None else torch.maximum(lb, bounds[0])
            ub = bounds[1] if ub is None else torch.minimum(ub, bounds[1])
    A = torch.cat([a for a, _ in equalities], -2) if equalities else None
    b = torch.cat([b for _, b in equalities], -1) if equalities else None
    G = torch.cat([g for g, _ in inequalities], -2) if inequalities else None
    h = torch.cat([h for _, h in inequalities], -1) if inequalities else None
    return ConstraintRows(A, b, G, h, lb, ub)


def _kept_rows(task: Task) -> torch.Tensor | None:
    """Indices of the task's rows with a positive cost (zero-cost rows ask nothing and would be ``0 = 0``)."""
    keep = task.cost() > 0
    return None if bool(keep.all()) else torch.nonzero(keep)[:, 0]


def weighted_rows(
    tree: KinematicTree, state: TreeState, q: torch.Tensor, tasks: Sequence[Task], targets: Mapping
) -> tuple[torch.Tensor, torch.Tensor]:
    """A level's stacked ``W J`` ``(..., m, nv)`` and ``W gain e`` ``(..., m)`` (rows of zero cost left out), in
    float64. Where every task's Jacobian is the same for the whole batch (a posture task's), ``W J`` is one
    ``(1, m, nv)`` matrix, not a copy per row."""
    jacobians, residuals = [], []
    found = [task.jacobian(tree, state, q) for task in tasks]
    constant = all(_constant(jac) for jac in found)
    for task, jac in zip(tasks, found, strict=True):
        jac = (jac.reshape(-1, *jac.shape[-2:])[:1] if constant else jac).to(_WORK)
        err = task.error(tree, state, q, targets[task.name]).to(_WORK)
        w = task.cost(jac)
        jac, err = w[:, None] * jac, task.gain * w * err
        if (rows := _kept_rows(task)) is not None:
            rows = rows.to(jac.device)
            jac, err = jac.index_select(-2, rows), err.index_select(-1, rows)
        jacobians.append(jac)
        residuals.append(err)
    return torch.cat(jacobians, -2), torch.cat(residuals, -1)


def _constant(jac: torch.Tensor) -> bool:
    """Whether ``jac`` is one matrix broadcast over the batch (every batch stride 0)."""
    return all(stride == 0 for stride in jac.stride()[:-2])


def _gram(J: torch.Tensor) -> torch.Tensor:
    """``J^T J`` ``(..., nv, nv)`` of ``J`` ``(..., m, nv)``. A batch of float64 products of a few rows is 2 to 5
    times faster as ``m`` rank-one updates than as one batched matrix product (which costs about 1.6 us per
    matrix on the CPU whatever ``m``); beyond ``_GRAM_RANK_ONE_ROWS`` rows the product wins."""
    m = J.shape[-2]
    if m == 0 or m > _GRAM_RANK_ONE_ROWS:
        return J.mT.contiguous() @ J
    P = J[..., 0, :, None] * J[..., 0, None, :]
    for k in range(1, m):
        P = P.addcmul_(J[..., k, :, None], J[..., k, None, :])
    return P


_GRAM_RANK_ONE_ROWS = 5


def _stacked(parts: list[torch.Tensor], dim: int) -> torch.Tensor | None:
    """``parts`` concatenated along ``dim``; one part as it is (no copy), none as ``None``."""
    return None if not parts else parts[0] if len(parts) == 1 else torch.cat(parts, dim)


def _float64(rows: ConstraintRows) -> ConstraintRows:
    return ConstraintRows(
        *(None if t is None else t.to(_WORK) for t in (rows.A, rows.b, rows.G, rows.h, rows.lb, rows.ub))
    )


def cascade_step(
    tree: KinematicTree,
    state: TreeState,
    q: torch.Tensor,
    levels: Sequence[Sequence[Task]],
    constraints: Sequence[Constraint],
    targets: Mapping[str, torch.Tensor],
    damping: float,
    qp_iterations: int,
    qp_active_set_steps: int,
    *,
    qp_refinements: int = 1,
) -> CascadeStep:
    """One step of the cascade at ``q`` ``(B, nq)`` (one flat batch dimension). The levels' QPs are built in
    float64, as ``solve_qp`` solves them (its float32 inputs would be converted there, ``P`` once per level);
    the step comes back in ``q``'s dtype."""
    rows = _float64(constraint_rows(tree, state, q, constraints, targets))
    batch = q.shape[0]
    kept_A, kept_b, statuses = [], [], []
    dq = active_in = active_bounds = solution = None
    for index, tasks in enumerate(levels):
        J, r = weighted_rows(tree, state, q, tasks, targets)
        P = _gram(J)
        P.diagonal(dim1=-2, dim2=-1).add_(damping**2)  # in place: one pass fewer over (B, nv, nv)
        if J.shape[0] == batch:
            c = -(J * r[..., None]).sum(-2)
        else:  # one W J for the batch: P once, c as one (B, m) x (m, nv) product
            P, J = P.expand(batch, *P.shape[1:]), J.expand(batch, *J.shape[1:])
            c = -(r @ J[0])
        A = [a for a in (rows.A, *kept_A) if a is not None]
        b = [v for v in (rows.b, *kept_b) if v is not None]
        solution = solve_qp(
            P,
            c,
            _stacked(A, -2),
            _stacked(b, -1),
            rows.G,
            rows.h,
            rows.lb,
            rows.ub,
            iterations=qp_iterations,
            active_set_steps=qp_active_set_steps,
            refinements=qp_refinements,
            warm_start=solution,  # the level above's active set: the same inequalities and bounds
        )
        if dq is None:  # the first level: its least-violation step where it is not solved, inside the bounds
            dq, active_in, active_bounds = solution.x, solution.active_inequalities, solution.active_bounds
            if rows.lb is not None:
                # the elastic point of an active set the solver did not finish can lie far outside the step
                # limits (a starved interior point once stepped 9 rad and the configuration diverged); solved
                # rows are left alone (their bounds hold to tolerance, and clamping would split their gradient)
                inside = torch.minimum(torch.maximum(dq, rows.lb.expand_as(dq)), rows.ub.expand_as(dq))
                dq = torch.where((solution.status == SOLVED)[..., None], dq, inside)
        else:  # a lower level that cannot be solved keeps the step above it (feasible, and optimal for it)
            solved = solution.status == SOLVED
            dq = torch.where(solved[..., None], solution.x, dq)
            if active_in is not None:
                active_in = torch.where(solved[..., None], solution.active_inequalities, active_in)
            active_bounds = torch.where(solved[..., None], solution.active_bounds, active_bounds)
        statuses.append(solution.status)
        if index + 1 < len(levels):  # what this level achieved, kept by the levels below
            kept_A.append(J)
            kept_b.append((J * dq[..., None, :]).sum(-1))
    return CascadeStep(dq.to(q.dtype), torch.stack(statuses, -1), active_in, active_bounds)
