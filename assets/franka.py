"""The Franka Panda the project uses: where its URDF and meshes come from, its root/TCP links and ready pose.

The description ships with the PyPI package ``example-robot-data`` (Apache-2.0), under
``cmeel.prefix/share/example-robot-data/robots/panda_description/``. Meshes are referenced in the URDF as
``package://example-robot-data/robots/panda_description/meshes/...``; ``resolve_package_uri`` maps those to files.
"""

from __future__ import annotations

import importlib.metadata
import math
from functools import lru_cache
from pathlib import Path

from kinematics.errors import MissingAssetError

DISTRIBUTION = "example-robot-data"
URDF_RELATIVE = "example-robot-data/robots/panda_description/urdf/panda.urdf"
ROOT_LINK = "panda_link0"
TCP_LINK = "panda_hand_tcp"
ARM_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("panda_finger_joint1", "panda_finger_joint2")
READY_POSE = (0.0, -math.pi / 4, 0.0, -3 * math.pi / 4, 0.0, math.pi / 2, math.pi / 4)
FINGER_OPENING = 0.04  # metres per finger: fully open, as drawn by the viewer

# Where a top-down grasp (TCP z straight down) can reach, root frame, metres. The wrist point, ``p`` raised by
# ``TOP_DOWN_WRIST_HEIGHT``, must lie within ``TOP_DOWN_REACH_RADIUS`` of the shoulder (joint 2's axis at
# ``SHOULDER``). Measured by bisection along the radius at z = 0, 0.3 and 0.6 m in three directions, a point
# counting as reached when any of 16 yaws x 32 random seeds solves with 64-step DLS IK: the reached wrist
# distances were 0.787-0.806 m; the radius keeps 7 mm inside the smallest.
SHOULDER = (0.0, 0.0, 0.333)
TOP_DOWN_WRIST_HEIGHT = 0.21
TOP_DOWN_REACH_RADIUS = 0.78
# The box a grasp target may be typed or dragged in: the reach sphere's bounding box above the floor (z = 0).
TARGET_BOX = ((-0.78, 0.78), (-0.78, 0.78), (0.0, 0.9))


@lru_cache(maxsize=1)
def share_dir() -> Path:
    """The ``share`` folder that holds ``example-robot-data/robots``."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise MissingAssetError(
            f"the Franka description comes from the PyPI package {DISTRIBUTION!r}; install it with "
            f"`pip install {DISTRIBUTION}`"
        ) from exc
    share = Path(str(dist.locate_file("cmeel.prefix/share")))
    if not (share / URDF_RELATIVE).is_file():
        raise MissingAssetError(f"{DISTRIBUTION} is installed but {share / URDF_RELATIVE} is missing; reinstall it")
    return share


def robot_file(relative: str) -> Path:
    """A file of ``example-robot-data`` by its path under ``share`` (e.g. ``example-robot-data/robots/...``)."""
    path = share_dir() / relative
    if not path.is_file():
        raise MissingAssetError(f"{path} is not installed; reinstall {DISTRIBUTION}")
    return path


def urdf_path() -> Path:
    """Path of the Panda URDF (arm, hand, fingers, ``panda_hand_tcp``)."""
    return robot_file(URDF_RELATIVE)


def urdf_text() -> str:
    return urdf_path().read_text()


def resolve_package_uri(uri: str) -> str:
    """Map ``package://example-robot-data/...`` (or a plain relative path) to an absolute file path.

    Used as yourdfpy's ``filename_handler``, so viser and trimesh load the real meshes.
    """
    relative = uri.removeprefix("package://")
    candidate = share_dir() / relative
    if candidate.is_file():
        return str(candidate)
    raise MissingAssetError(f"mesh {uri!r} not found under {share_dir()}")
