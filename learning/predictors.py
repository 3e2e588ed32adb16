"""Yaw predictors: the conditional network ``f(q0, p)`` and the shared constant, both correcting the heading yaw.

Both output a unit yaw vector ``(N, 2)``: the heading vector rotated by a predicted unit correction, so the
prediction is continuous on the whole circle (no wrap at +-pi). The network reads normalised joints, their
sines and cosines, the normalised grasp point, the heading and the hand's present yaw (from FK of ``q0``).
"""

from __future__ import annotations

import torch
from torch import nn

from kinematics import KinematicsLayer
from learning.config import WorkspaceCfg
from learning.task import hand_yaw, heading, yaw_vector


def rotate_yaw(base: torch.Tensor, correction: torch.Tensor) -> torch.Tensor:
    """Compose two yaw vectors ``(..., 2)`` (complex multiplication): angles add."""
    c = base[..., 0] * correction[..., 0] - base[..., 1] * correction[..., 1]
    s = base[..., 0] * correction[..., 1] + base[..., 1] * correction[..., 0]
    return torch.stack((c, s), -1)


def goal_features(
    kinematics: KinematicsLayer, p: torch.Tensor, q0: torch.Tensor, workspace: WorkspaceCfg
) -> torch.Tensor:
    """``(N, 3), (N, dof) -> (N, 3 * dof + 7)`` network inputs, all of order one."""
    lower, upper = kinematics.lower, kinematics.upper
    q_norm = 2 * (q0 - lower) / (upper - lower) - 1
    lo = p.new_tensor([workspace.x[0], workspace.y[0], workspace.z[0]])
    hi = p.new_tensor([workspace.x[1], workspace.y[1], workspace.z[1]])
    p_norm = 2 * (p - lo) / (hi - lo) - 1
    return torch.cat(
        (q_norm, torch.sin(q0), torch.cos(q0), p_norm, yaw_vector(heading(p)), yaw_vector(hand_yaw(kinematics, q0))),
        -1,
    )


class YawNet(nn.Module):
    """MLP ``features -> unit correction (2,)`` applied to the heading yaw. Starts at heading (correction 0)."""

    def __init__(self, in_features: int, hidden: int = 128) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(in_features, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 2)
        )
        head = self.body[-1]
        nn.init.normal_(head.weight, std=1e-3)
        with torch.no_grad():
            head.bias.copy_(torch.tensor([1.0, 0.0]))

    def forward(self, features: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        raw = self.body(features)
        correction = raw / raw.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        return rotate_yaw(yaw_vector(heading(p)), correction)


class SharedConstant(nn.Module):
    """Heading plus one learned scalar correction (radians), the same for every goal."""

    def __init__(self) -> None:
        super().__init__()
        self.offset = nn.Parameter(torch.zeros(()))

    def forward(self, features: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return yaw_vector(heading(p) + self.offset)


class YawPolicy(nn.Module):
    """A predictor with its feature map: ``policy(p, q0) -> yaw (N, 2)``. Only the predictor is saved."""

    def __init__(self, predictor: nn.Module, kinematics: KinematicsLayer, workspace: WorkspaceCfg) -> None:
        super().__init__()
        self.predictor = predictor
        self._kinematics = (kinematics,)  # shared, not owned: kept out of the state dict and .to()
        self.workspace = workspace

    def forward(self, p: torch.Tensor, q0: torch.Tensor) -> torch.Tensor:
        return self.predictor(goal_features(self._kinematics[0], p, q0, self.workspace), p)


def feature_count(dof: int) -> int:
    return 3 * dof + 7


def build_predictor(kind: str, dof: int, hidden: int) -> nn.Module:
    """``kind``: ``"shared_constant"`` or a network kind (``"ik_trained"``, ``"teacher_supervised"``, ...)."""
    return SharedConstant() if kind == "shared_constant" else YawNet(feature_count(dof), hidden)
