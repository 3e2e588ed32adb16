"""The counterweight policy: a small network from the reach goal to the body tasks' action in ``[-1, 1]^7``, and
the hand-written rule it is compared with."""

from __future__ import annotations

import torch
from torch import nn

from learning.counterweight.config import GoalRegionCfg
from learning.counterweight.problem import ACTIONS


class CounterweightPolicy(nn.Module):
    """``goal (B, 3) -> action (B, 7)``. The goal enters relative to the reaching shoulder, scaled to about unit
    size; the last layer starts at zero, so an untrained policy holds the body at its rest targets."""

    def __init__(self, shoulder: torch.Tensor, hidden: int = 64) -> None:
        super().__init__()
        self.register_buffer("shoulder", shoulder.detach().clone().to(torch.float32))
        self.net = nn.Sequential(
            nn.Linear(3, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, len(ACTIONS))
        )
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, goals: torch.Tensor) -> torch.Tensor:
        features = (goals - self.shoulder.to(goals.dtype)) / 0.4
        return torch.tanh(self.net.to(goals.dtype)(features))


def counterweight_rule(goals: torch.Tensor, shoulder: torch.Tensor, region: GoalRegionCfg) -> torch.Tensor:
    """The hand-written rule: the free hand swings back (up to its full 0.35 m) in proportion to how far the goal
    lies beyond the near edge of the goal region; everything else stays at rest."""
    distance = (goals - shoulder.to(goals.dtype)).norm(dim=-1)
    near, far = region.distance
    action = goals.new_zeros(len(goals), len(ACTIONS))
    action[:, 0] = -((distance - near) / (far - near)).clamp(0.0, 1.0)
    return action


def constant_counterweight(goals: torch.Tensor) -> torch.Tensor:
    """One action for every goal: the free hand all the way back (0.35 m at the default scale)."""
    action = goals.new_zeros(len(goals), len(ACTIONS))
    action[:, 0] = -1.0
    return action
