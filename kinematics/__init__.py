"""Batched, differentiable kinematics for PyTorch: serial chains and URDF trees, the arm's damped-least-squares IK
layer, a batched QP solver and the whole-body IK layer built on it; gradients flow through every solve.

Contents, by wing (everything else lives in its wing's modules):

- ``lie``: ``so3_exp``, ``so3_log``, ``skew``, ``make_transform``, ``transform_inverse``, ``se3_exp_left``,
  ``pose_error``, ``r9_to_se3``, ``se3_to_r9``
- ``model``: ``SerialChainKinematics`` (a chain cut out of a URDF), ``KinematicsLayer`` (its checked FK and
  Jacobian), ``KinematicTree`` (a whole URDF tree, optionally on a floating base)
- ``ik``: ``DifferentiableIKLayer``, ``DifferentiableIKCfg``, ``IKResult``
- ``qp``: ``solve_qp``, ``QPSolution`` and its statuses ``SOLVED``, ``INFEASIBLE``, ``NOT_CONVERGED``
- ``wholebody``: ``WholeBodyIKLayer``, ``WholeBodyIKCfg`` (tasks, constraints and the standing problem in
  ``kinematics.wholebody``)
- ``errors``: ``ProjectError`` and the typed errors every bad input raises
- ``native``: the compiled CPU kernels behind all of it (``KINEMATICS_NATIVE=0`` turns them off)
"""

from kinematics.errors import (
    CheckpointMismatchError,
    ConfigError,
    DtypeDeviceMismatchError,
    FrameNotFoundError,
    InvalidQuaternionError,
    InvalidTargetError,
    LinkNotFoundError,
    MissingInertialError,
    NonFiniteError,
    NotAChainError,
    ProjectError,
    ShapeError,
    UnsupportedTransformError,
    URDFError,
)
from kinematics.ik.layer import DifferentiableIKCfg, DifferentiableIKLayer, IKResult
from kinematics.lie.pose_error import pose_error
from kinematics.lie.r9 import r9_to_se3, se3_to_r9
from kinematics.lie.rotations import make_transform, se3_exp_left, skew, so3_exp, so3_log, transform_inverse
from kinematics.model.chain import SerialChainKinematics
from kinematics.model.kinematics_layer import KinematicsLayer
from kinematics.model.tree import KinematicTree
from kinematics.qp.problem import INFEASIBLE, NOT_CONVERGED, SOLVED, QPSolution
from kinematics.qp.solve import solve_qp
from kinematics.wholebody.layer import WholeBodyIKCfg, WholeBodyIKLayer

__all__ = [
    # lie
    "so3_exp",
    "so3_log",
    "skew",
    "make_transform",
    "transform_inverse",
    "se3_exp_left",
    "pose_error",
    "r9_to_se3",
    "se3_to_r9",
    # model
    "SerialChainKinematics",
    "KinematicsLayer",
    "KinematicTree",
    # ik
    "DifferentiableIKLayer",
    "DifferentiableIKCfg",
    "IKResult",
    # qp
    "solve_qp",
    "QPSolution",
    "SOLVED",
    "INFEASIBLE",
    "NOT_CONVERGED",
    # wholebody
    "WholeBodyIKLayer",
    "WholeBodyIKCfg",
    # errors
    "ProjectError",
    "CheckpointMismatchError",
    "ConfigError",
    "DtypeDeviceMismatchError",
    "FrameNotFoundError",
    "InvalidQuaternionError",
    "InvalidTargetError",
    "LinkNotFoundError",
    "MissingInertialError",
    "NonFiniteError",
    "NotAChainError",
    "ShapeError",
    "UnsupportedTransformError",
    "URDFError",
]
