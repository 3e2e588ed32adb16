"""A trainer's curves: the loss per step and the validation metrics at each validation step, with the budget spent
(IK evaluations, seconds) at each: the grasp-yaw trainers' record, and what the viewer's live trainers report."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class TrainingHistory:
    """Loss per step and validation metrics at each validation step."""

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    val_steps: list[int] = field(default_factory=list)
    val_ik_evaluations: list[int] = field(default_factory=list)  # training IK evaluations spent at each validation
    val_success: list[float] = field(default_factory=list)
    val_cost: list[float] = field(default_factory=list)
    val_displacement: list[float] = field(default_factory=list)
    val_seconds: list[float] = field(default_factory=list)  # training seconds spent at each validation
    best_step: int = 0
    best_val_cost: float = math.inf
    ik_evaluations: int = 0  # IK solves spent on training steps (validation excluded)
    seconds: float = 0.0  # wall time spent in training steps (validation excluded)

    def to_dict(self) -> dict:
        return dict(self.__dict__)
