"""One translucent ghost arm per method, posed at the joints its yaw leads to, with a gripper frame showing the yaw.

A ghost is drawn when its method has an answer and the method picker shows it; its label stands in the column
above the target (``app.shell.ghost_labels``).
"""

from __future__ import annotations

import numpy as np
import viser
import viser.transforms as vtf
import yourdfpy

from app.grasp_yaw.methods import BY_KEY
from app.shell.ghost_labels import LabelledGhost
from app.shell.robot_view import ArmView
from assets import RobotDescription

GHOST_ALPHA = 0.35
TCP_AXES_M = (
    0.06  # a ghost's gripper frame: its axes stay inside the target gizmo's arrows (app.shell.stage.GIZMO_SCALE)
)


class Ghost(LabelledGhost):
    """A method's arm under ``/ghosts/<key>``, its TCP frame (x-axis = the chosen yaw) and its label."""

    def __init__(
        self, server: viser.ViserServer, urdf: yourdfpy.URDF, robot: RobotDescription, key: str, right: np.ndarray
    ) -> None:
        """``urdf``: the robot's light mesh set (``load_urdf(robot, robot.ghost_meshes)``), drawn many times;
        ``right``: the screen's right at the scene's initial camera (where its label's dot goes)."""
        method = BY_KEY[key]
        super().__init__(server, key, method.label, method.rgb, method.shown, right)
        color = (*(c / 255 for c in method.rgb), GHOST_ALPHA)
        coarse = robot.ghost_meshes == "collision"
        self._arm = ArmView(server, urdf, robot, f"/ghosts/{key}", color=color, coarse=coarse)
        self._frame = server.scene.add_frame(
            f"/ghost_tcp/{key}", axes_length=TCP_AXES_M, axes_radius=0.004, origin_radius=0.01, origin_color=method.rgb
        )
        # A bar along the gripper's closing direction (TCP y) in the method's colour: the yaw at a glance.
        self._jaw = server.scene.add_line_segments(
            f"/ghost_tcp/{key}/jaw",
            np.array([[[0.0, -0.05, 0.0], [0.0, 0.05, 0.0]]]),
            method.rgb,
            thickness=5.0,
            thickness_units="screen",
        )
        self._pose: tuple[np.ndarray, np.ndarray] | None = None
        self._posed = True  # nothing to pose yet
        self._apply()

    def show(self, qpos: np.ndarray, T_root_tcp: np.ndarray) -> None:
        """Pose the ghost at ``qpos`` ``(7,)`` and its gripper frame at ``T_root_tcp`` ``(4, 4)`` (a ghost the
        picker hides keeps the pose and takes it when shown: posing an arm costs milliseconds)."""
        self._pose = (np.asarray(qpos, dtype=float), np.asarray(T_root_tcp, dtype=float))
        self._posed = False
        self.set_pending(False)
        self.answered = True
        self._apply()

    def _apply(self) -> None:
        visible = self.answered and self.enabled
        if visible and not self._posed:
            qpos, T_root_tcp = self._pose
            self._arm.show(qpos)
            self._frame.position = T_root_tcp[:3, 3]
            self._frame.wxyz = vtf.SO3.from_matrix(T_root_tcp[:3, :3]).wxyz
            self._posed = True
        self._arm.set_visible(visible)
        self._frame.visible = visible
        self._label.visible = visible
