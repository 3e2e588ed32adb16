"""Batched, differentiable kinematics of serial chains in PyTorch: FK, geometric Jacobian and DLS IK."""

from kinematics.box_qp import solve_box_qp
from kinematics.chain import JointSpec, SerialChainKinematics
from kinematics.errors import (
    CheckpointMismatchError,
    ConfigError,
    DtypeDeviceMismatchError,
    FrameNotFoundError,
    InvalidQuaternionError,
    InvalidTargetError,
    LinkNotFoundError,
    MissingAssetError,
    MissingInertialError,
    NonFiniteError,
    NotAChainError,
    ProjectError,
    ShapeError,
    UnsupportedTransformError,
    URDFError,
)
from kinematics.ik import DifferentiableIKCfg, DifferentiableIKLayer, IKResult
from kinematics.layer import KinematicsLayer
from kinematics.pose_error import pose_error
from kinematics.qp import INFEASIBLE, NOT_CONVERGED, SOLVED, QPSolution, solve_qp
from kinematics.r9 import r9_to_se3, se3_to_r9, singularity_margin
from kinematics.rotations import make_transform, se3_exp_left, skew, so3_exp, so3_log, transform_inverse
from kinematics.tree import KinematicTree, TreeState

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
    "MissingAssetError",
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
