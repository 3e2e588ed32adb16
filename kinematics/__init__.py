"""Batched, differentiable kinematics of serial chains in PyTorch: FK, geometric Jacobian and DLS IK."""

from kinematics.chain import JointSpec, SerialChainKinematics
from kinematics.errors import (
    CheckpointMismatchError,
    ConfigError,
    DtypeDeviceMismatchError,
    InvalidTargetError,
    LinkNotFoundError,
    MissingAssetError,
    NonFiniteError,
    NotAChainError,
    ProjectError,
    ShapeError,
    URDFError,
)
from kinematics.ik import DifferentiableIKCfg, DifferentiableIKLayer, IKResult, pose_error
from kinematics.layer import KinematicsLayer
from kinematics.rotations import make_transform, se3_exp_left, skew, so3_exp, so3_log, transform_inverse

__all__ = [
    "CheckpointMismatchError",
    "ConfigError",
    "DifferentiableIKCfg",
    "DifferentiableIKLayer",
    "DtypeDeviceMismatchError",
    "IKResult",
    "InvalidTargetError",
    "JointSpec",
    "KinematicsLayer",
    "LinkNotFoundError",
    "MissingAssetError",
    "NonFiniteError",
    "NotAChainError",
    "ProjectError",
    "SerialChainKinematics",
    "ShapeError",
    "URDFError",
    "make_transform",
    "pose_error",
    "se3_exp_left",
    "skew",
    "so3_exp",
    "so3_log",
    "transform_inverse",
]
