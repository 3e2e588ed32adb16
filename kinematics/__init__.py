"""Batched, differentiable kinematics for PyTorch: serial chains and URDF trees, the arm's damped-least-squares IK
layer, a batched QP solver and the whole-body IK layer built on it; gradients flow through every solve.

Each wing's face (``kinematics.<wing>``) names its API in ``__all__``; this package re-exports the most used:

- ``lie``: ``so3_exp``, ``so3_log``, ``skew``, ``make_transform``, ``transform_inverse``, ``se3_exp_left``,
  ``pose_error`` (and ``pose_error_batch_last``), ``r9_to_se3``, ``se3_to_r9``, ``singularity_margin``, the
  ``free_flyer`` module
- ``model``: ``SerialChainKinematics`` (a chain cut out of a URDF), ``KinematicsLayer`` (its checked FK and
  Jacobian), ``KinematicTree`` (a whole URDF tree, optionally on a floating base) and its ``TreeState``,
  ``describe_tree``, ``with_payload``
- ``ik``: ``DifferentiableIKLayer``, ``DifferentiableIKCfg``, ``IKResult``, ``dls_step``, ``solve_box_qp``
- ``qp``: ``solve_qp``, ``QPSolution`` and its statuses ``SOLVED``, ``INFEASIBLE``, ``NOT_CONVERGED``
- ``wholebody``: ``WholeBodyIKLayer``, ``WholeBodyIKCfg``, the cascade, the standing problem; its tasks
  (``wholebody.tasks``) and constraints (``wholebody.constraints``)
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
from kinematics.ik import DifferentiableIKCfg, DifferentiableIKLayer, IKResult
from kinematics.lie import (
    make_transform,
    pose_error,
    r9_to_se3,
    se3_exp_left,
    se3_to_r9,
    skew,
    so3_exp,
    so3_log,
    transform_inverse,
)
from kinematics.model import KinematicsLayer, KinematicTree, SerialChainKinematics
from kinematics.qp import INFEASIBLE, NOT_CONVERGED, SOLVED, QPSolution, solve_qp
from kinematics.wholebody import WholeBodyIKCfg, WholeBodyIKLayer

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
