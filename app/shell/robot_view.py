"""A robot drawn from its URDF with real meshes, solid or as a translucent ghost, for either scene (the Panda's arm
and its ghosts, the G1's body)."""

from __future__ import annotations

import threading

import numpy as np
import viser
import yourdfpy
from viser.extras import ViserUrdf

import assets
from assets import RobotDescription

# Every ArmView shares one parsed URDF (meshes load once); ``ViserUrdf.update_cfg`` poses that shared object
# before reading its transforms, so posing is serialised across the threads that draw.
_POSE_LOCK = threading.Lock()


def load_urdf(robot: RobotDescription, meshes: str = "visual") -> yourdfpy.URDF:
    """``robot``'s URDF with one of its mesh sets resolved from ``example-robot-data``: ``"visual"`` (the real
    look) or ``"collision"`` (coarse, light to send and to render: what ``robot.ghost_meshes`` names for ghosts)."""
    visual = meshes == "visual"
    return yourdfpy.URDF.load(
        str(robot.urdf_path()),
        filename_handler=lambda fname: assets.resolve_package_uri(fname),  # yourdfpy passes ``fname=...``
        load_meshes=visual,
        build_scene_graph=visual,
        load_collision_meshes=not visual,
        build_collision_scene_graph=not visual,
    )


class ArmView:
    """One drawn arm under ``root`` (its held joints, the Panda's fingers, at their held values), optionally in one
    translucent colour.

    Args:
        server: the viser server to draw in.
        urdf: the parsed robot (shared between views), from ``load_urdf``.
        robot: its description (the driven and the held joints).
        root: scene node name, e.g. ``"/robot"``.
        color: RGBA in [0, 1] overriding every mesh's colour (alpha < 1 is translucent); None: real colours.
        coarse: draw the collision meshes (``urdf`` from ``load_urdf(robot, "collision")``), not the visual ones.
    """

    def __init__(
        self,
        server: viser.ViserServer,
        urdf: yourdfpy.URDF,
        robot: RobotDescription,
        root: str,
        color: tuple[float, float, float, float] | None = None,
        coarse: bool = False,
    ) -> None:
        self._coarse = coarse
        self._robot = robot
        self._urdf = ViserUrdf(
            server,
            urdf,
            root_node_name=root,
            mesh_color_override=color,
            collision_mesh_color_override=color,
            load_meshes=not coarse,
            load_collision_meshes=coarse,
        )
        self._cfg_names = self._urdf.get_actuated_joint_names()
        self.limits = self._urdf.get_actuated_joint_limits()

    def show(self, q: np.ndarray) -> None:
        """Pose the arm at ``q``, one value per driven joint (radians)."""
        joints = dict(zip(self._robot.joints, np.asarray(q, dtype=float), strict=True)) | dict(self._robot.held_joints)
        with _POSE_LOCK:
            self._urdf.update_cfg(np.array([joints[name] for name in self._cfg_names]))

    @property
    def visible(self) -> bool:
        return bool(self._urdf.show_collision if self._coarse else self._urdf.show_visual)

    def set_visible(self, visible: bool) -> None:
        if self._coarse:
            self._urdf.show_collision = visible
        else:
            self._urdf.show_visual = visible
