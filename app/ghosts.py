"""One translucent ghost arm per method, posed at the joints its yaw leads to, with a gripper frame showing the yaw.

A ghost is drawn when its method has an answer and the method picker shows it. Its label does not sit on the
gripper (every method's gripper is at the same grasp point, so labels there print over each other): the viewer
stacks the shown ghosts' labels in a column above the target (``stack_labels``).
"""

from __future__ import annotations

import numpy as np
import viser
import viser.transforms as vtf
import yourdfpy

from app.methods import BY_KEY
from app.robot_view import ArmView
from assets import RobotDescription

GHOST_ALPHA = 0.35
LABEL_BASE_M = 0.08  # the lowest label's height above the target
LABEL_SPACING_M = 0.035  # between stacked labels
LABEL_SCALE = 0.7  # the labels' font, times viser's 12 px
LABEL_ANCHOR = "bottom-left"  # the text stands on its point: the whole column stays above LABEL_BASE_M
SWATCH_RADIUS_M = 0.009  # the dot in the method's colour left of its label (viser's labels are black text)
TCP_AXES_M = 0.06  # a ghost's gripper frame: its axes stay inside the target gizmo's arrows (app.scene.GIZMO_SCALE)


class LabelledGhost:
    """What every ghost shares: a label under ``/ghost_labels/<key>`` with a dot in the method's colour ``rgb``
    before it, that says *pending* while the drawn answer is for earlier inputs, whether it has an answer and whether
    it is shown. Subclasses draw in ``_apply``."""

    def __init__(
        self, server: viser.ViserServer, key: str, text: str, rgb: tuple[int, int, int], enabled: bool
    ) -> None:
        self.key, self._text = key, text
        self._label = server.scene.add_label(
            f"/ghost_labels/{key}", text, font_screen_scale=LABEL_SCALE, anchor=LABEL_ANCHOR
        )
        self.swatch = server.scene.add_icosphere(
            f"/ghost_labels/{key}/swatch",
            radius=SWATCH_RADIUS_M,
            color=rgb,
            position=(-1.5 * SWATCH_RADIUS_M, 0.0, SWATCH_RADIUS_M),
            cast_shadow=False,
            receive_shadow=False,
        )
        self.pending = False
        self.answered = False
        self.enabled = enabled

    def _apply(self) -> None:
        raise NotImplementedError

    def hide(self) -> None:
        """No answer to show (none yet, or the one drawn answers inputs that have changed)."""
        self.answered = False
        self._apply()

    def enable(self, enabled: bool) -> None:
        """The method picker's choice."""
        self.enabled = enabled
        self._apply()

    @property
    def drawn(self) -> bool:
        return self.answered and self.enabled

    def set_pending(self, pending: bool) -> None:
        """Mark the drawn pose as an answer to earlier inputs while the answer to the new ones is computed."""
        if pending != self.pending:
            self.pending = pending
            self._label.text = f"{self._text} (pending…)" if pending else self._text

    def place_label(self, position: np.ndarray) -> None:
        self._label.position = tuple(float(v) for v in position)


class Ghost(LabelledGhost):
    """A method's arm under ``/ghosts/<key>``, its TCP frame (x-axis = the chosen yaw) and its label."""

    def __init__(self, server: viser.ViserServer, urdf: yourdfpy.URDF, robot: RobotDescription, key: str) -> None:
        """``urdf``: the robot's light mesh set (``load_urdf(robot, robot.ghost_meshes)``), drawn many times."""
        method = BY_KEY[key]
        super().__init__(server, key, method.label, method.rgb, method.shown)
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


def label_position(target: np.ndarray, row: int) -> np.ndarray:
    """Where the ``row``-th label of the column above ``target`` stands (m, root frame)."""
    return np.asarray(target, dtype=float) + [0.0, 0.0, LABEL_BASE_M + LABEL_SPACING_M * row]


def stack_labels(ghosts: list[Ghost], target: np.ndarray) -> None:
    """Put the drawn ghosts' labels in a column above ``target``, in the order given, one row each."""
    row = 0
    for ghost in ghosts:
        if ghost.drawn:
            ghost.place_label(label_position(target, row))
            row += 1
