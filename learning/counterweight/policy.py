"""The counterweight policies: a goal in, the body tasks' targets out, as a bounded offset from the rest targets.

``CounterweightPolicy`` is a small network; ``LinearPolicy`` is linear in the same goal features (the small policy
a zero-order method is given a fair chance on). Both read the goal relative to the reaching shoulder, divided by
``GOAL_SCALE`` (about unit size), and start at zero output, so an untrained policy holds the body at its rest
targets. For the paper's ``"r9"`` parameterisation the output is the R^9 offset ``(B, 18)``
(``learning.counterweight.problem``) bounded by ``bound_offsets``; for the ``"axes"`` ablation, an action
``(B, 7)`` in ``[-1, 1]`` (``tanh``).
"""

from __future__ import annotations

import torch
from torch import nn

from learning.counterweight.problem import BODY_PARAMETERISATIONS, bound_offsets

GOAL_SCALE = 0.4  # m


class _BodyHead(nn.Module):
    """The goal features, a ``body`` module from them to raw outputs, and the parameterisation's bound."""

    def __init__(self, shoulder: torch.Tensor, parameterisation: str, bound: float) -> None:
        super().__init__()
        if parameterisation not in BODY_PARAMETERISATIONS:
            raise ValueError(
                f"parameterisation must be one of {sorted(BODY_PARAMETERISATIONS)}, got {parameterisation!r}"
            )
        self.parameterisation, self.bound = parameterisation, bound
        self.outputs = BODY_PARAMETERISATIONS[parameterisation]
        self.register_buffer("shoulder", shoulder.detach().clone().to(torch.float32))

    def features(self, goals: torch.Tensor) -> torch.Tensor:
        return (goals - self.shoulder.to(goals.dtype)) / GOAL_SCALE

    def squash(self, raw: torch.Tensor) -> torch.Tensor:
        if self.parameterisation == "axes":
            return torch.tanh(raw)
        return bound_offsets(raw, self.bound)


class CounterweightPolicy(_BodyHead):
    """``goal (B, 3) -> body outputs (B, 18 or 7)``: two tanh layers of ``hidden`` units, the last layer zero."""

    def __init__(self, shoulder: torch.Tensor, hidden: int = 64, parameterisation: str = "r9", bound: float = 0.45):
        super().__init__(shoulder, parameterisation, bound)
        self.net = nn.Sequential(
            nn.Linear(3, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, self.outputs)
        )
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, goals: torch.Tensor) -> torch.Tensor:
        return self.squash(self.net.to(goals.dtype)(self.features(goals)))


class LinearPolicy(_BodyHead):
    """``goal (B, 3) -> body outputs``: one linear map of the goal features (72 weights for R^9), zero at start."""

    def __init__(self, shoulder: torch.Tensor, parameterisation: str = "r9", bound: float = 0.45):
        super().__init__(shoulder, parameterisation, bound)
        self.linear = nn.Linear(3, self.outputs)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, goals: torch.Tensor) -> torch.Tensor:
        return self.squash(self.linear.to(goals.dtype)(self.features(goals)))


class ConstantPolicy(_BodyHead):
    """One output for every goal (the best constant offset, optimised through the layer)."""

    def __init__(self, shoulder: torch.Tensor, parameterisation: str = "r9", bound: float = 0.45):
        super().__init__(shoulder, parameterisation, bound)
        self.raw = nn.Parameter(torch.zeros(self.outputs))

    def forward(self, goals: torch.Tensor) -> torch.Tensor:
        return self.squash(self.raw.to(goals.dtype).expand(len(goals), -1))
