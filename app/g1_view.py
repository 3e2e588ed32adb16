"""The G1 drawn from its URDF with real meshes on its floating base, and one translucent ghost per counterweight
method: its pose, the centre of mass's ground projection (red, larger, when the balance margin is violated), the
policy's body-task targets as markers, and a label stacked above the goal (``app.ghosts.stack_labels``)."""

from __future__ import annotations

import numpy as np
import viser
import yourdfpy

from app.counterweight_answers import BodyAnswer
from app.robot_view import ArmView
from assets import RobotDescription

GHOST_ALPHA = 0.35
UNBALANCED_RGB = (230, 30, 30)
COM_RADIUS_M = 0.012
POLYGON_RGB = (60, 60, 60)


class BodyView:
    """A G1 under ``root``: a frame node carrying the base pose, the URDF's links under it."""

    def __init__(
        self,
        server: viser.ViserServer,
        urdf: yourdfpy.URDF,
        robot: RobotDescription,
        root: str,
        color: tuple[float, float, float, float] | None = None,
    ) -> None:
        self.base = server.scene.add_frame(root, show_axes=False)
        self._body = ArmView(server, urdf, robot, f"{root}/links", color=color)

    def show(self, q: np.ndarray) -> None:
        """Pose at ``q`` ``(nq,)``: base xyz (m), quaternion xyzw, then the joints in the robot's order (rad)."""
        q = np.asarray(q, dtype=float)
        x, y, z, w = q[3:7]
        self.base.position = tuple(q[:3])
        self.base.wxyz = (w, x, y, z)
        self._body.show(q[7:])


class BodyGhost:
    """A method's translucent G1 under ``/ghosts/<key>``, its CoM marker, its target markers and its label."""

    def __init__(
        self,
        server: viser.ViserServer,
        urdf: yourdfpy.URDF,
        robot: RobotDescription,
        key: str,
        label: str,
        rgb: tuple[int, int, int],
    ) -> None:
        self.key, self._text, self._rgb = key, label, rgb
        self._view = BodyView(server, urdf, robot, f"/ghosts/{key}", color=(*(c / 255 for c in rgb), GHOST_ALPHA))
        self._com = server.scene.add_icosphere(f"/com/{key}", radius=COM_RADIUS_M, color=rgb, cast_shadow=False)
        self._targets = {
            name: server.scene.add_icosphere(f"/body_targets/{key}/{name}", radius=0.02, color=rgb, cast_shadow=False)
            for name in ("pelvis", "torso", "left_hand")
        }
        self._label = server.scene.add_label(f"/ghost_labels/{key}", label, font_screen_scale=0.7)
        self.pending = False
        self.answered = False
        self.enabled = True
        self._has_targets = False  # reach only and a run without targets draw no target markers
        self._apply()

    def show(self, answer: BodyAnswer) -> None:
        self._view.show(answer.q)
        balanced = answer.balanced
        self._com.position = (float(answer.com_xy[0]), float(answer.com_xy[1]), 0.002)
        self._com.color = self._rgb if balanced else UNBALANCED_RGB
        self._com.radius = COM_RADIUS_M if balanced else 2 * COM_RADIUS_M
        for name, marker in self._targets.items():
            if answer.targets is not None:
                marker.position = tuple(float(v) for v in answer.targets[name])
        self._has_targets = answer.targets is not None
        self.answered = True
        self.set_pending(False)
        self._apply()

    def hide(self) -> None:
        self.answered = False
        self._apply()

    @property
    def drawn(self) -> bool:
        return self.answered and self.enabled

    def set_pending(self, pending: bool) -> None:
        if pending != self.pending:
            self.pending = pending
            self._label.text = f"{self._text} (pending…)" if pending else self._text

    def place_label(self, position: np.ndarray) -> None:
        self._label.position = tuple(float(v) for v in position)

    def _apply(self) -> None:
        visible = self.drawn
        self._view.base.visible = visible
        self._com.visible = visible
        self._label.visible = visible
        for marker in self._targets.values():
            marker.visible = visible and self._has_targets


def draw_support_polygon(server: viser.ViserServer, hull_xy: np.ndarray) -> None:
    """The support polygon ``(k, 2)`` (closed) as a line on the ground."""
    ring = np.concatenate([hull_xy, hull_xy[:1]])
    points = np.concatenate([ring, np.full((len(ring), 1), 0.003)], -1)
    segments = np.stack([points[:-1], points[1:]], 1)
    server.scene.add_line_segments("/support_polygon", segments, POLYGON_RGB, thickness=3.0, thickness_units="screen")
