"""One translucent ghost arm per method, posed at the joints its yaw leads to, with a gripper frame showing the yaw."""

from __future__ import annotations

import numpy as np
import viser
import viser.transforms as vtf
import yourdfpy

from app.robot_view import ArmView

# name -> (legend label, RGB 0-255); distinct hues that read well over the grey arm and the white floor.
METHOD_STYLES: dict[str, tuple[str, tuple[int, int, int]]] = {
    "heading": ("heading", (245, 130, 20)),
    "learned": ("learned predictor", (30, 170, 90)),
    "reference": ("numerical reference", (130, 60, 220)),
}
GHOST_ALPHA = 0.35


class Ghost:
    """A method's arm under ``/ghosts/<name>`` and its TCP frame (x-axis = the chosen yaw) with a label."""

    def __init__(self, server: viser.ViserServer, urdf: yourdfpy.URDF, name: str) -> None:
        """``urdf``: the Panda's collision model (``load_panda_collision_urdf``), light enough for three ghosts."""
        label, rgb = METHOD_STYLES[name]
        self.name = name
        color = (*(c / 255 for c in rgb), GHOST_ALPHA)
        self._arm = ArmView(server, urdf, f"/ghosts/{name}", color=color, coarse=True)
        self._frame = server.scene.add_frame(
            f"/ghost_tcp/{name}", axes_length=0.09, axes_radius=0.005, origin_radius=0.012, origin_color=rgb
        )
        # A bar along the gripper's closing direction (TCP y) in the method's colour: the yaw at a glance.
        self._jaw = server.scene.add_line_segments(
            f"/ghost_tcp/{name}/jaw",
            np.array([[[0.0, -0.05, 0.0], [0.0, 0.05, 0.0]]]),
            rgb,
            thickness=5.0,
            thickness_units="screen",
        )
        self._text = label
        self._label = server.scene.add_label(
            f"/ghost_tcp/{name}/label", label, position=(0.0, 0.0, -0.06), font_screen_scale=0.7
        )
        self.pending = False
        self.set_visible(False)

    def show(self, qpos: np.ndarray, T_root_tcp: np.ndarray) -> None:
        """Pose the ghost at ``qpos`` ``(7,)`` and its gripper frame at ``T_root_tcp`` ``(4, 4)``."""
        self._arm.show(qpos)
        self._frame.position = T_root_tcp[:3, 3]
        self._frame.wxyz = vtf.SO3.from_matrix(T_root_tcp[:3, :3]).wxyz
        self.set_pending(False)
        self.set_visible(True)

    def set_pending(self, pending: bool) -> None:
        """Mark the drawn pose as an answer to earlier inputs while the answer to the new ones is computed."""
        if pending != self.pending:
            self.pending = pending
            self._label.text = f"{self._text} (pending…)" if pending else self._text

    def set_visible(self, visible: bool) -> None:
        self._arm.set_visible(visible)
        self._frame.visible = visible
