"""The Franka Panda: its description (example-robot-data's ``panda_description``, Apache-2.0) and where a top-down
grasp can reach.

The URDF holds the arm, the hand, two finger joints and ``panda_hand_tcp`` (the hand's z + 0.1034 m). The project
drives the seven arm joints; the fingers are held open when drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from assets.description import RobotDescription

PANDA = RobotDescription(
    name="panda",
    urdf_file="example-robot-data/robots/panda_description/urdf/panda.urdf",
    license="Apache-2.0",
    root_link="panda_link0",
    floating_base=False,
    joints=tuple(f"panda_joint{i}" for i in range(1, 8)),
    reference_posture=(0.0, -math.pi / 4, 0.0, -3 * math.pi / 4, 0.0, math.pi / 2, math.pi / 4),  # "ready"
    frames={"tcp": "panda_hand_tcp"},
    held_joints={"panda_finger_joint1": 0.04, "panda_finger_joint2": 0.04},  # metres per finger: fully open
    ghost_meshes="collision",  # its STL collision meshes are light enough for nine ghosts
)


@dataclass(frozen=True)
class TopDownReach:
    """Where a top-down grasp (TCP z straight down) can reach, root frame, metres.

    The wrist point, the target raised by ``wrist_height``, must lie within ``radius`` of the shoulder (joint 2's
    axis at ``shoulder``). ``target_box`` is where a grasp target may be typed or dragged: the reach sphere's
    bounding box above the floor (z = 0).
    """

    shoulder: tuple[float, float, float]
    wrist_height: float
    radius: float
    target_box: tuple[tuple[float, float], tuple[float, float], tuple[float, float]]


# Measured by bisection along the radius at z = 0, 0.3 and 0.6 m in three directions, a point counting as reached
# when any of 16 yaws x 32 random seeds solves with 64-step DLS IK: the reached wrist distances were 0.787-0.806 m;
# the radius keeps 7 mm inside the smallest.
PANDA_TOP_DOWN_REACH = TopDownReach(
    shoulder=(0.0, 0.0, 0.333),
    wrist_height=0.21,
    radius=0.78,
    target_box=((-0.78, 0.78), (-0.78, 0.78), (0.0, 0.9)),
)
