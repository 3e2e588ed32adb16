"""Scoring a choice of yaws: the checking IK solve from ``q0`` and the per-row metrics every method is judged by."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kinematics import DifferentiableIKLayer
from learning.grasp_yaw.splits import GoalSet
from learning.grasp_yaw.task import CostWeights, grasp_pose, yaw_cost

METRICS = ("success", "displacement", "position_error", "rotation_error", "cost")
GRID_METRICS = ("displacement_solved", "grid_gap")  # RowMetrics.against_grid


@dataclass
class RowMetrics:
    """Per-goal metrics ``(N,)``; failed rows are included in every one of them."""

    q: torch.Tensor  # (N, dof) the checked joints
    success: torch.Tensor
    displacement: torch.Tensor  # |q_ik - q0|^2, rad^2
    position_error: torch.Tensor  # metres
    rotation_error: torch.Tensor  # radians
    cost: torch.Tensor

    def means(self) -> dict[str, float]:
        return {name: float(getattr(self, name).double().mean()) for name in METRICS}

    def against_grid(self, grid: RowMetrics) -> dict[str, float]:
        """The seed's paired measures: the mean joint displacement over the goals this method solves, and its mean
        relative displacement above ``grid``'s over the goals both solve (``nan`` where there are none)."""
        solved, both = self.success > 0.5, (self.success > 0.5) & (grid.success > 0.5)
        displacement = self.displacement.double()
        ratio = displacement[both] / grid.displacement.double()[both] - 1
        return {
            "displacement_solved": float(displacement[solved].mean()) if solved.any() else float("nan"),
            "grid_gap": float(ratio.mean()) if both.any() else float("nan"),
        }


@torch.no_grad()
def score_yaws(
    ik: DifferentiableIKLayer, goals: GoalSet, yaw: torch.Tensor, weights: CostWeights, penalty: float
) -> RowMetrics:
    """Solve IK from each ``q0`` to the grasp at ``p`` with ``yaw`` ``(N, 2)`` and measure the result."""
    result = ik.solve(grasp_pose(goals.p, yaw), goals.q0)
    return RowMetrics(
        q=result.q,
        success=result.success.to(goals.p.dtype),
        displacement=(result.q - goals.q0).square().sum(-1),
        position_error=result.position_error_norm,
        rotation_error=result.rotation_error_norm,
        cost=yaw_cost(result, goals.q0, weights, penalty),
    )
