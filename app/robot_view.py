"""The Panda drawn from its URDF with real meshes: the solid arm at ``q0`` and the base of every ghost arm."""

from __future__ import annotations

import threading

import numpy as np
import viser
import yourdfpy
from viser.extras import ViserUrdf

import assets
from assets.franka import FINGER_JOINTS, FINGER_OPENING

# Every ArmView shares one parsed URDF (meshes load once); ``ViserUrdf.update_cfg`` poses that shared object
# before reading its transforms, so posing is serialised across the threads that draw.
_POSE_LOCK = threading.Lock()


def load_panda_urdf() -> yourdfpy.URDF:
    """The Panda URDF with its visual meshes resolved from ``example-robot-data``."""
    return yourdfpy.URDF.load(
        str(assets.urdf_path()),
        filename_handler=lambda fname: assets.resolve_package_uri(fname),  # yourdfpy passes ``fname=...``
        load_meshes=True,
        build_scene_graph=True,
        load_collision_meshes=False,
        build_collision_scene_graph=False,
    )


def load_panda_collision_urdf() -> yourdfpy.URDF:
    """The Panda with only its collision meshes: coarse, light to send and to render; the ghosts use these."""
    return yourdfpy.URDF.load(
        str(assets.urdf_path()),
        filename_handler=lambda fname: assets.resolve_package_uri(fname),
        load_meshes=False,
        build_scene_graph=False,
        load_collision_meshes=True,
        build_collision_scene_graph=True,
    )


class ArmView:
    """One drawn Panda under ``root`` (fingers open), optionally in one translucent colour.

    Args:
        server: the viser server to draw in.
        urdf: the parsed Panda (shared between views).
        root: scene node name, e.g. ``"/robot"``.
        color: RGBA in [0, 1] overriding every mesh's colour (alpha < 1 is translucent); None: real colours.
        coarse: draw the collision meshes (``urdf`` from ``load_panda_collision_urdf``) instead of the visual ones.
    """

    def __init__(
        self,
        server: viser.ViserServer,
        urdf: yourdfpy.URDF,
        root: str,
        color: tuple[float, float, float, float] | None = None,
        coarse: bool = False,
    ) -> None:
        self._coarse = coarse
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
        """Pose the arm at ``q`` ``(7,)`` radians."""
        joints = dict(zip(assets.ARM_JOINTS, np.asarray(q, dtype=float), strict=True))
        joints |= dict.fromkeys(FINGER_JOINTS, FINGER_OPENING)
        with _POSE_LOCK:
            self._urdf.update_cfg(np.array([joints[name] for name in self._cfg_names]))

    def set_visible(self, visible: bool) -> None:
        if self._coarse:
            self._urdf.show_collision = visible
        else:
            self._urdf.show_visual = visible
