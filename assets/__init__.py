"""Robot descriptions the project uses, located in installed packages."""

from assets.franka import (
    ARM_JOINTS,
    READY_POSE,
    ROOT_LINK,
    SHOULDER,
    TARGET_BOX,
    TCP_LINK,
    TOP_DOWN_REACH_RADIUS,
    TOP_DOWN_WRIST_HEIGHT,
    resolve_package_uri,
    robot_file,
    urdf_path,
    urdf_text,
)

__all__ = [
    "ARM_JOINTS",
    "READY_POSE",
    "ROOT_LINK",
    "SHOULDER",
    "TARGET_BOX",
    "TCP_LINK",
    "TOP_DOWN_REACH_RADIUS",
    "TOP_DOWN_WRIST_HEIGHT",
    "resolve_package_uri",
    "robot_file",
    "urdf_path",
    "urdf_text",
]
