"""The G1 drawn from its URDF with real meshes on its floating base, translucent so that the ghosts inside it show
(``--light``: as a stick figure, for software WebGL), the payload in its reaching hand, and one ghost per
counterweight method: its pose as a stick figure in the method's colour (a segment per URDF joint, between link
origins: light enough for headless Chromium's software WebGL, where four full-mesh G1s take over 30 s a frame), its
payload, the centre of mass's ground projection (red, larger, when the balance margin is violated), the body
targets its method chose as SE(3) frames (``BodyAnswer.targets``: the pelvis pose, the torso orientation at the
torso, the free hand's position), and a label stacked above the goal (``app.shell.ghost_labels.stack_labels``).

The payload is a steel ball of the task's mass (8 kg: 6 cm in radius), centred where the task holds it
(``CounterweightCfg.payload_point`` in the reaching hand's frame): opaque on the solid robot, translucent in each
ghost's colour (every ghost's payload sits on the goal, around its marker).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import viser
import viser.transforms as vtf
import yourdfpy

from app.counterweight.answers import BodyAnswer
from app.shell.ghost_labels import LabelledGhost
from app.shell.methods import Method
from app.shell.robot_view import ArmView
from assets import RobotDescription
from learning.counterweight.problem import BODY_TASKS

BONE_PX = 4.0
SOLID_RGB = (90, 90, 100)  # the light mode's solid robot
BODY_RGBA = (0.62, 0.62, 0.68, 0.3)  # the meshes' colour: translucent, the ghosts' stick figures show through
PAYLOAD_RGB = (70, 70, 80)  # the solid robot's payload
PAYLOAD_GHOST_OPACITY = 0.35
STEEL_KG_PER_M3 = 7850.0
UNBALANCED_RGB = (230, 30, 30)
COM_RADIUS_M = 0.012
TARGET_AXES_M = 0.07  # the body-target frames' axes
POLYGON_RGB = (60, 60, 60)


def payload_radius_m(mass_kg: float) -> float:
    """The radius of a steel ball of ``mass_kg`` (8 kg: 0.062 m)."""
    return (3.0 * mass_kg / (4.0 * math.pi * STEEL_KG_PER_M3)) ** (1.0 / 3.0)


def add_payload(
    server: viser.ViserServer, name: str, mass_kg: float, rgb: tuple[int, int, int], opacity: float | None = None
) -> viser.IcosphereHandle:
    """The payload as a ball of ``mass_kg`` under ``name`` (placed by setting its ``position``)."""
    return server.scene.add_icosphere(name, radius=payload_radius_m(mass_kg), color=rgb, opacity=opacity)


class BodyView:
    """A G1 under ``root``: a frame node carrying the base pose, the URDF's links under it in one translucent
    colour (``BODY_RGBA``)."""

    def __init__(
        self,
        server: viser.ViserServer,
        urdf: yourdfpy.URDF,
        robot: RobotDescription,
        root: str,
    ) -> None:
        self.base = server.scene.add_frame(root, show_axes=False)
        self._body = ArmView(server, urdf, robot, f"{root}/links", color=BODY_RGBA)

    def show(self, q: np.ndarray) -> None:
        """Pose at ``q`` ``(nq,)``: base xyz (m), quaternion xyzw, then the joints in the robot's order (rad)."""
        q = np.asarray(q, dtype=float)
        x, y, z, w = q[3:7]
        self.base.position = tuple(q[:3])
        self.base.wxyz = (w, x, y, z)
        self._body.show(q[7:])


class StickFigure:
    """A G1 pose as line segments under ``name``: ``bones`` ``(parent, child)`` index pairs into a pose's link
    origins (``learning.counterweight.figures.skeleton_bones``), in one colour."""

    def __init__(
        self, server: viser.ViserServer, name: str, bones: Sequence[tuple[int, int]], rgb: tuple[int, int, int]
    ) -> None:
        self._bones = np.asarray(bones, dtype=int)
        self.handle = server.scene.add_line_segments(
            name, np.zeros((len(self._bones), 2, 3)), rgb, thickness=BONE_PX, thickness_units="screen"
        )

    def show(self, frames: np.ndarray) -> None:
        """Pose at ``frames`` ``(n_frames, 3)``: every link's origin, world frame, m."""
        self.handle.points = np.asarray(frames, dtype=np.float32)[self._bones]


class BodyGhost(LabelledGhost):
    """A method's ``StickFigure`` under ``/ghosts/<key>``, its payload under ``/payload/<key>``, its CoM marker,
    its body-target frames under ``/body_targets/<key>`` (origin in the method's colour) and its label."""

    def __init__(
        self,
        server: viser.ViserServer,
        bones: Sequence[tuple[int, int]],
        method: Method,
        payload_kg: float,
        right: np.ndarray,
    ) -> None:
        """Drawn once answered while the picker shows ``method`` (``method.shown`` at first); ``right``: the
        screen's right at the scene's initial camera (where its label's dot goes)."""
        key, rgb = method.key, method.rgb
        super().__init__(server, key, method.label, method.rgb, method.shown, right)
        self._rgb = rgb
        self.figure = StickFigure(server, f"/ghosts/{key}", bones, rgb)
        self.payload = add_payload(server, f"/payload/{key}", payload_kg, rgb, PAYLOAD_GHOST_OPACITY)
        self._com = server.scene.add_icosphere(f"/com/{key}", radius=COM_RADIUS_M, color=rgb, cast_shadow=False)
        self.targets = {
            name: server.scene.add_frame(
                f"/body_targets/{key}/{name}",
                axes_length=TARGET_AXES_M,
                axes_radius=0.004,
                origin_radius=0.012,
                origin_color=rgb,
            )
            for name in BODY_TASKS
        }
        self._has_targets = False  # reach only draws no target frames
        self._apply()

    def show(self, answer: BodyAnswer) -> None:
        self.figure.show(answer.frames)
        self.payload.position = tuple(float(v) for v in answer.payload)
        balanced = answer.balanced
        self._com.position = (float(answer.com_xy[0]), float(answer.com_xy[1]), 0.002)
        self._com.color = self._rgb if balanced else UNBALANCED_RGB
        self._com.radius = COM_RADIUS_M if balanced else 2 * COM_RADIUS_M
        for name, frame in self.targets.items():
            if answer.targets is not None:
                pose = answer.targets[name]
                frame.position = tuple(float(v) for v in pose[:3, 3])
                frame.wxyz = tuple(float(v) for v in vtf.SO3.from_matrix(pose[:3, :3]).wxyz)
        self._has_targets = answer.targets is not None
        self.answered = True
        self.set_pending(False)
        self._apply()

    def _apply(self) -> None:
        visible = self.drawn
        self.figure.handle.visible = visible
        self.payload.visible = visible
        self._com.visible = visible
        self._label.visible = visible
        for frame in self.targets.values():
            frame.visible = visible and self._has_targets


def draw_support_polygon(server: viser.ViserServer, hull_xy: np.ndarray) -> None:
    """The support polygon ``(k, 2)`` (closed) as a line on the ground."""
    ring = np.concatenate([hull_xy, hull_xy[:1]])
    points = np.concatenate([ring, np.full((len(ring), 1), 0.003)], -1)
    segments = np.stack([points[:-1], points[1:]], 1)
    server.scene.add_line_segments("/support_polygon", segments, POLYGON_RGB, thickness=3.0, thickness_units="screen")
