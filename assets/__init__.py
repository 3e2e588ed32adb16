"""Robots as data: the descriptions the project uses (the Franka Panda, the Unitree G1), located in the installed
``example-robot-data`` package, and the resolver for their ``package://`` mesh paths. Imports no other package of
the project."""

from assets.description import RobotDescription, SoleContact
from assets.errors import MissingAssetError
from assets.example_robot_data import resolve_package_uri, robot_file
from assets.franka import PANDA, PANDA_TOP_DOWN_REACH, TopDownReach
from assets.g1 import G1

ROBOTS = {robot.name: robot for robot in (PANDA, G1)}

__all__ = [
    "G1",
    "PANDA",
    "PANDA_TOP_DOWN_REACH",
    "ROBOTS",
    "MissingAssetError",
    "RobotDescription",
    "SoleContact",
    "TopDownReach",
    "resolve_package_uri",
    "robot_file",
]
