"""Robot descriptions the project uses, located in installed packages."""

from assets.franka import (
    ARM_JOINTS,
    READY_POSE,
    ROOT_LINK,
    TCP_LINK,
    resolve_package_uri,
    robot_file,
    urdf_path,
    urdf_text,
)

__all__ = [
    "ARM_JOINTS",
    "READY_POSE",
    "ROOT_LINK",
    "TCP_LINK",
    "resolve_package_uri",
    "robot_file",
    "urdf_path",
    "urdf_text",
]
