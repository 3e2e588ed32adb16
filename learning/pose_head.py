"""A predictor head that outputs a full grasp pose through the R^9 -> SE(3) parameterisation.

Where the yaw predictor fixes the grasp to be top-down at ``p`` and only chooses the yaw, this head predicts all
of ``T_root_tcp``: a translation offset from ``p`` and two rotation columns made orthonormal by Gram-Schmidt
(``kinematics.r9``), so its output is a valid IK target with no angle wrap anywhere on SO(3). It starts at the
radial grasp; ``grasp_deviation`` measures how far a pose is from a top-down grasp at ``p`` and serves as the
task's soft constraint when the head is trained through the IK layer.
"""

from __future__ import annotations

import torch
from torch import nn

from kinematics.r9 import r9_to_se3, se3_to_r9
from learning.task import grasp_pose, radial_angle, yaw_vector


class GraspPoseNet(nn.Module):
    """MLP ``features -> (dt, da1, da2)`` added to the radial grasp's R^9 coordinates, mapped to SE(3)."""

    def __init__(self, in_features: int, hidden: int = 128) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(in_features, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 9)
        )
        nn.init.normal_(self.body[-1].weight, std=1e-3)
        nn.init.zeros_(self.body[-1].bias)

    def forward(self, features: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        """``(N, F), (N, 3) -> (N, 4, 4)`` grasp poses in the root frame."""
        base = se3_to_r9(grasp_pose(p, yaw_vector(radial_angle(p))))
        return r9_to_se3(base + self.body(features))


def grasp_deviation(pose: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """``(N,)``: squared distance of the TCP from ``p`` (m^2) plus squared deviation of its z-axis from straight
    down; zero exactly for top-down grasps at ``p`` (any yaw)."""
    down = torch.tensor([0.0, 0.0, -1.0], dtype=pose.dtype, device=pose.device)
    return (pose[..., :3, 3] - p).square().sum(-1) + (pose[..., :3, 2] - down).square().sum(-1)
