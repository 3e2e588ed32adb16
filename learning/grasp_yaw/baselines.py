"""Yaw choosers that need no training: the radial rule, heading (the hand's current yaw), an angular grid, online optimisation,
and the teacher (dense grid plus local refinement), the numerical reference.

Every chooser returns unit yaw vectors ``(N, 2)``; the searches solve IK from ``q0`` for each candidate. The angular
grid also hands on its chosen yaw's solve (``CheckedSolve``), which the final solve continues instead of repeating.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kinematics import DifferentiableIKCfg, DifferentiableIKLayer, KinematicsLayer
from learning.grasp_yaw.task import (
    CostWeights,
    current_heading,
    grasp_pose,
    radial_angle,
    smooth_cost,
    yaw_cost,
    yaw_vector,
)

_CHUNK = 16384  # IK rows per batched call: bounds memory of the searches


def ik_layer(kinematics: KinematicsLayer, iterations: int) -> DifferentiableIKLayer:
    """The DLS layer at the default settings with ``iterations`` steps (inputs are valid by construction)."""
    return DifferentiableIKLayer(kinematics, DifferentiableIKCfg(iterations=iterations, validate_inputs=False))


def radial_yaw(p: torch.Tensor) -> torch.Tensor:
    return yaw_vector(radial_angle(p))


def heading_yaw(kinematics: KinematicsLayer, q0: torch.Tensor) -> torch.Tensor:
    """Keep the hand's present yaw (read from FK of ``q0``); blind to joint limits."""
    return yaw_vector(current_heading(kinematics, q0))


@dataclass(frozen=True)
class CheckedSolve:
    """A chosen yaw's checking solve, handed on: the joints ``q`` ``(N, dof)`` after ``iterations`` steps of ``ik``
    from ``q0`` toward the chosen grasp. The IK is a pure iteration (no state but the joints), so ``iterations + k``
    steps from ``q0`` are these joints continued for ``k`` steps (bit for bit on the compiled solve): the final solve
    picks up here (``learning.grasp_yaw.evaluation.final_joints``) instead of solving the first ``iterations`` steps
    again."""

    q: torch.Tensor
    ik: DifferentiableIKLayer

    @property
    def iterations(self) -> int:
        return self.ik.cfg.iterations


@dataclass
class Candidates:
    """What solving candidate yaws gave, ``(N, M)`` each: the yaws, their cost, joint displacement and success, and
    the yaw vectors solved ``(N, M, 2)`` and the joints reached ``(N, M, dof)``."""

    psi: torch.Tensor
    cost: torch.Tensor
    displacement: torch.Tensor  # |q_ik - q0|^2, rad^2
    success: torch.Tensor  # bool
    yaw: torch.Tensor
    q: torch.Tensor


@dataclass
class SearchResult:
    yaw: torch.Tensor  # (N, 2) chosen yaw vectors
    cost: torch.Tensor  # (N,) cost of the choice at the search's own IK iterations
    ik_solves: int  # IK solves spent
    candidates: Candidates | None = None  # the grid's evaluations: its yaw landscape
    checked: CheckedSolve | None = None  # the chosen yaw's solve, where the final solve can continue it


@torch.no_grad()
def solve_candidates(
    ik: DifferentiableIKLayer,
    p: torch.Tensor,
    q0: torch.Tensor,
    psi: torch.Tensor,
    weights: CostWeights,
    penalty: float,
    yaw: torch.Tensor | None = None,
) -> Candidates:
    """Solve every candidate yaw ``psi`` ``(N, M)`` for goals ``p`` ``(N, 3)`` from ``q0`` ``(N, dof)``: the grasps
    of the yaw vectors ``yaw`` ``(N, M, 2)`` where given (a network's, solved as they are), else of ``psi``'s."""
    n, m = psi.shape
    dof = q0.shape[-1]
    flat_p = p[:, None, :].expand(n, m, 3).reshape(-1, 3)
    flat_q0 = q0[:, None, :].expand(n, m, dof).reshape(-1, dof)
    flat_yaw = (yaw_vector(psi) if yaw is None else yaw).reshape(-1, 2)
    cost, displacement, success, joints = [], [], [], []
    for start in range(0, n * m, _CHUNK):
        rows = slice(start, start + _CHUNK)
        result = ik.solve(grasp_pose(flat_p[rows], flat_yaw[rows]), flat_q0[rows])
        cost.append(yaw_cost(result, flat_q0[rows], weights, penalty))
        displacement.append((result.q - flat_q0[rows]).square().sum(-1))
        success.append(result.success)
        joints.append(result.q)
    cost, displacement, success = (torch.cat(parts).reshape(n, m) for parts in (cost, displacement, success))
    return Candidates(psi, cost, displacement, success, flat_yaw.reshape(n, m, 2), torch.cat(joints).reshape(n, m, dof))


def cheapest_candidate(ik: DifferentiableIKLayer, candidates: Candidates) -> tuple[torch.Tensor, CheckedSolve]:
    """The index ``(N,)`` of each goal's cheapest candidate and its solve (by ``ik``, which solved ``candidates``),
    handed on."""
    best = candidates.cost.argmin(-1)
    rows = torch.arange(best.shape[0], device=best.device)
    return best, CheckedSolve(candidates.q[rows, best], ik)


def candidate_costs(
    ik: DifferentiableIKLayer,
    p: torch.Tensor,
    q0: torch.Tensor,
    psi: torch.Tensor,
    weights: CostWeights,
    penalty: float,
) -> torch.Tensor:
    """``(N, M)`` cost of each candidate yaw ``psi`` ``(N, M)`` for goals ``p`` ``(N, 3)`` from ``q0`` ``(N, dof)``."""
    return solve_candidates(ik, p, q0, psi, weights, penalty).cost


def grid_yaws(p: torch.Tensor, yaws: int, anchor: str = "radial") -> torch.Tensor:
    """``(N, yaws)`` the grid's candidate yaws for goals ``p`` ``(N, 3)``: evenly spaced on the full circle from the
    radial yaw (``"radial"``), or the seed's ``linspace(-pi, pi, yaws)`` for every goal (``"absolute"``; both ends
    are the same yaw)."""
    if anchor == "absolute":
        return torch.linspace(-math.pi, math.pi, yaws, dtype=p.dtype, device=p.device).expand(p.shape[0], yaws)
    offsets = torch.arange(yaws, dtype=p.dtype, device=p.device) * (2 * math.pi / yaws)
    return radial_angle(p)[:, None] + offsets


def angular_grid(
    ik: DifferentiableIKLayer,
    p: torch.Tensor,
    q0: torch.Tensor,
    yaws: int,
    weights: CostWeights,
    penalty: float,
    anchor: str = "radial",
) -> SearchResult:
    """``yaws`` candidates on the full circle (``grid_yaws``), the cheapest kept."""
    candidates = solve_candidates(ik, p, q0, grid_yaws(p, yaws, anchor), weights, penalty)
    best, checked = cheapest_candidate(ik, candidates)
    yaw = candidates.yaw[torch.arange(best.shape[0], device=best.device), best]  # exactly the grasp solved
    return SearchResult(yaw, candidates.cost.min(-1).values, p.shape[0] * yaws, candidates, checked)


def teacher(
    ik: DifferentiableIKLayer,
    p: torch.Tensor,
    q0: torch.Tensor,
    yaws: int,
    refine: int,
    weights: CostWeights,
    penalty: float,
) -> SearchResult:
    """The numerical reference: a dense grid, then ``refine`` candidates spanning one grid cell around the best."""
    coarse = angular_grid(ik, p, q0, yaws, weights, penalty)
    psi0 = torch.atan2(coarse.yaw[:, 1], coarse.yaw[:, 0])
    cell = 2 * math.pi / yaws
    offsets = torch.linspace(-cell, cell, refine + 2, dtype=p.dtype, device=p.device)[1:-1]
    psi = psi0[:, None] + offsets
    cost = candidate_costs(ik, p, q0, psi, weights, penalty)
    best = cost.argmin(-1)
    fine_cost = cost.gather(-1, best[:, None])[:, 0]
    fine_psi = psi.gather(-1, best[:, None])[:, 0]
    better = fine_cost < coarse.cost
    chosen = torch.where(better, fine_psi, psi0)
    return SearchResult(
        yaw_vector(chosen), torch.minimum(fine_cost, coarse.cost), coarse.ik_solves + p.shape[0] * refine
    )


def online_optimization(
    ik: DifferentiableIKLayer,
    p: torch.Tensor,
    q0: torch.Tensor,
    steps: int,
    learning_rate: float,
    weights: CostWeights,
    penalty: float,
    start: torch.Tensor | None = None,
    incumbents: tuple[float, ...] = (),
) -> SearchResult:
    """Per-goal Adam steps on ``psi`` through the IK layer from ``start`` ``(N,)`` (default: the radial yaw); the
    cheapest iterate is kept, and each absolute yaw in ``incumbents`` is solved first and kept if cheaper (the
    seed's search keeps yaw 0 so)."""
    psi = (radial_angle(p) if start is None else start).detach().clone().requires_grad_(True)
    optimizer = torch.optim.Adam([psi], lr=learning_rate)
    best_psi = psi.detach().clone()
    best_cost = torch.full_like(best_psi, math.inf)
    for yaw in incumbents:
        fixed = torch.full_like(best_psi, yaw)
        with torch.no_grad():
            result = ik.solve(grasp_pose(p, yaw_vector(fixed)), q0)
            cost = yaw_cost(result, q0, weights, penalty)
        best_psi = torch.where(cost < best_cost, fixed, best_psi)
        best_cost = torch.minimum(cost, best_cost)
    for _ in range(steps + 1):
        result = ik.solve(grasp_pose(p, yaw_vector(psi)), q0)
        smooth = smooth_cost(result, q0, weights)
        with torch.no_grad():
            cost = smooth + penalty * (~result.success).to(smooth.dtype)
            improved = cost < best_cost
            best_cost = torch.where(improved, cost, best_cost)
            best_psi = torch.where(improved, psi.detach(), best_psi)
        optimizer.zero_grad(set_to_none=True)
        smooth.sum().backward()
        optimizer.step()
    return SearchResult(yaw_vector(best_psi), best_cost, p.shape[0] * (steps + 1 + len(incumbents)))
