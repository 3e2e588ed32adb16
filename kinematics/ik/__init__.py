"""The arm's differentiable IK layer: the DLS step, the fused solve, implicit gradients, the box QP step."""

from kinematics.ik.box_qp import solve_box_qp
from kinematics.ik.dls_step import dls_step
from kinematics.ik.layer import DifferentiableIKCfg, DifferentiableIKLayer, IKResult

__all__ = [
    "solve_box_qp",
    "dls_step",
    "DifferentiableIKCfg",
    "DifferentiableIKLayer",
    "IKResult",
]
