"""Batched, differentiable kinematics of serial chains in PyTorch: FK, geometric Jacobian and DLS IK."""

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
from kinematics.ik.box_qp import solve_box_qp
from kinematics.ik.layer import DifferentiableIKCfg, DifferentiableIKLayer, IKResult
from kinematics.lie.pose_error import pose_error
from kinematics.lie.r9 import r9_to_se3, se3_to_r9, singularity_margin
from kinematics.lie.rotations import make_transform, se3_exp_left, skew, so3_exp, so3_log, transform_inverse
from kinematics.model.chain import JointSpec, SerialChainKinematics
from kinematics.model.kinematics_layer import KinematicsLayer
from kinematics.model.tree import KinematicTree, TreeState
from kinematics.qp.problem import INFEASIBLE, NOT_CONVERGED, SOLVED, QPSolution
from kinematics.qp.solve import solve_qp

__all__ = [
    "CheckpointMismatchError",
    "ConfigError",
    "DifferentiableIKCfg",
    "DifferentiableIKLayer",
    "DtypeDeviceMismatchError",
    "FrameNotFoundError",
    "IKResult",
    "INFEASIBLE",
    "InvalidQuaternionError",
    "InvalidTargetError",
    "JointSpec",
    "KinematicTree",
    "KinematicsLayer",
    "LinkNotFoundError",
    "MissingInertialError",
    "NonFiniteError",
    "NOT_CONVERGED",
    "NotAChainError",
    "ProjectError",
    "QPSolution",
    "SOLVED",
    "SerialChainKinematics",
    "TreeState",
    "ShapeError",
    "URDFError",
    "UnsupportedTransformError",
    "make_transform",
    "r9_to_se3",
    "se3_to_r9",
    "singularity_margin",
    "solve_box_qp",
    "solve_qp",
    "pose_error",
    "se3_exp_left",
    "skew",
    "so3_exp",
    "so3_log",
    "transform_inverse",
]
