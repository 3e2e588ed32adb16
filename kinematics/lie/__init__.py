"""Lie groups and their parameterisations: SO(3)/SE(3) maps, the free flyer, R^9 -> SE(3), the pose error."""

from kinematics.lie import free_flyer
from kinematics.lie.pose_error import pose_error, pose_error_batch_last
from kinematics.lie.r9 import r9_to_se3, se3_to_r9, singularity_margin
from kinematics.lie.rotations import make_transform, se3_exp_left, skew, so3_exp, so3_log, transform_inverse

__all__ = [
    "free_flyer",
    "pose_error",
    "pose_error_batch_last",
    "r9_to_se3",
    "se3_to_r9",
    "singularity_margin",
    "make_transform",
    "se3_exp_left",
    "skew",
    "so3_exp",
    "so3_log",
    "transform_inverse",
]
