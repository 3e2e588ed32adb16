"""Kinematic models read from a URDF: the serial chain and the kinematic tree, their kernels, the payload."""

from kinematics.model.chain import SerialChainKinematics
from kinematics.model.kinematics_layer import KinematicsLayer
from kinematics.model.payload import with_payload
from kinematics.model.tree import KinematicTree, TreeState
from kinematics.model.urdf import TreeDescription, describe_tree

__all__ = [
    "SerialChainKinematics",
    "KinematicsLayer",
    "with_payload",
    "KinematicTree",
    "TreeState",
    "TreeDescription",
    "describe_tree",
]
