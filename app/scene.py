"""The stage: floor, the workspace outlined on the table (training and disjoint-spatial regions) and the target gizmo."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import numpy as np
import viser

from learning.grasp_yaw.config import WorkspaceCfg

TRAIN_COLOR = (40, 110, 220)  # the region training, validation and IID test goals come from
HELDOUT_COLOR = (220, 50, 120)  # the disjoint-spatial test region, never seen in training
TARGET_COLOR = (250, 190, 0)
CAMERA_POSITION = (1.25, -0.85, 0.8)  # metres, root frame: frames the arm, the workspace and the ghosts
CAMERA_LOOK_AT = (0.35, 0.0, 0.2)
CAMERA_FOV_DEG = 75.0  # vertical
GIZMO_SCALE = 0.26  # metres: the target gizmo's arrows, whose outer half lies beyond every ghost's gripper frame
GIZMO_LINE_WIDTH = 5.0  # px: thicker than the ghosts' frames and jaw bars, so a first grab finds it
SCENE_LABEL_SCALE = 0.8  # the regions' labels' font, times viser's 12 px
SCENE_LABEL_ANCHOR = "top-left"  # the text hangs below and right of its point
SCENE_LABEL_OFFSET_M = 0.1  # the regions' labels' distance in front of the workspace's near edge (+x)


def box_edges(x: tuple[float, float], y: tuple[float, float], z: tuple[float, float]) -> np.ndarray:
    """``(12, 2, 3)`` the edges of an axis-aligned box, as line segments."""
    corners = np.array([[x[i], y[j], z[k]] for i in (0, 1) for j in (0, 1) for k in (0, 1)])
    pairs = [(a, b) for a in range(8) for b in range(a + 1, 8) if bin(a ^ b).count("1") == 1]
    return np.stack([corners[[a, b]] for a, b in pairs])


def set_stage(server: viser.ViserServer) -> None:
    """Z up, a floor grid (10 cm cells) and a camera that frames the arm, the workspace and the ghosts."""
    server.scene.set_up_direction("+z")
    server.scene.add_grid("/ground", width=2.0, height=2.0, cell_size=0.1, section_size=0.5)
    server.initial_camera.position = CAMERA_POSITION
    server.initial_camera.look_at = CAMERA_LOOK_AT
    server.initial_camera.fov = math.radians(CAMERA_FOV_DEG)


def draw_workspace(server: viser.ViserServer, ws: WorkspaceCfg) -> None:
    """A translucent table under the workspace, the workspace box and the held-out region, each labelled."""
    margin = 0.05
    server.scene.add_box(
        "/workspace/table",
        color=(205, 205, 200),
        dimensions=(ws.x[1] - ws.x[0] + 2 * margin, ws.y[1] - ws.y[0] + 2 * margin, 0.004),
        position=((ws.x[0] + ws.x[1]) / 2, (ws.y[0] + ws.y[1]) / 2, -0.002),
        opacity=0.5,
        cast_shadow=False,
    )
    server.scene.add_line_segments(
        "/workspace/train", box_edges(ws.x, ws.y, ws.z), TRAIN_COLOR, thickness=3.0, thickness_units="screen"
    )
    server.scene.add_line_segments(
        "/workspace/heldout",
        box_edges(ws.heldout_x, ws.heldout_y, ws.z),
        HELDOUT_COLOR,
        thickness=3.0,
        thickness_units="screen",
    )
    server.scene.add_box(
        "/workspace/heldout_floor",
        color=HELDOUT_COLOR,
        dimensions=(ws.heldout_x[1] - ws.heldout_x[0], ws.heldout_y[1] - ws.heldout_y[0], 0.002),
        position=((ws.heldout_x[0] + ws.heldout_x[1]) / 2, (ws.heldout_y[0] + ws.heldout_y[1]) / 2, 0.001),
        opacity=0.35,
        cast_shadow=False,
    )
    for name, text, position in workspace_labels(ws):
        server.scene.add_label(
            f"/workspace/{name}",
            text,
            position=position,
            font_screen_scale=SCENE_LABEL_SCALE,
            anchor=SCENE_LABEL_ANCHOR,
        )


def workspace_labels(ws: WorkspaceCfg) -> list[tuple[str, str, tuple[float, float, float]]]:
    """``(name, text, position)`` of the regions' labels: on the floor in front of the workspace's near edge (the
    side the initial camera looks from), below every ghost label, which stacks above the target: at the initial
    camera they never overlap for a target in the workspace (tests/test_app_labels.py projects them)."""
    front = ws.x[1] + SCENE_LABEL_OFFSET_M
    return [
        ("train_label", "workspace", (front, ws.y[0] + 0.1, 0.0)),
        ("heldout_label", "disjoint-spatial\ntest", (front, ws.heldout_y[0] - 0.05, 0.0)),
    ]


def translation_limits(position: np.ndarray, box: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
    """viser's ``translation_limits`` for a gizmo first placed at ``position`` that must stay in ``box``: viser
    (drei's pivot controls) bounds the drag's offset from where the gizmo was first placed, not its position."""
    return tuple((float(lo - p), float(hi - p)) for p, (lo, hi) in zip(position, box, strict=True))


class TargetGizmo:
    """A draggable grasp point (position only; the yaw is what the methods choose), limited to ``box``.

    Args:
        server: the viser server.
        position: initial grasp point (m, root frame).
        box: per axis ``(lower, upper)`` metres the gizmo can be dragged within (viser keeps the limits it was
            built with: after the target is moved by other means they stay relative to ``position``, and the
            server's clamp to the reach is what bounds the target).
        on_move: called with the gizmo's present position ``(3,)`` on every drag update and at the drag's end
            (viser runs these callbacks on a thread pool, possibly out of order, so each one reads the
            position the gizmo has when it runs: the last one to run sees the final position).
    """

    def __init__(
        self,
        server: viser.ViserServer,
        position: np.ndarray,
        box: tuple[tuple[float, float], ...],
        on_move: Callable[[np.ndarray], None],
    ) -> None:
        self.handle = server.scene.add_transform_controls(
            "/target",
            scale=GIZMO_SCALE,
            line_width=GIZMO_LINE_WIDTH,
            disable_rotations=True,
            position=tuple(float(v) for v in position),
            translation_limits=translation_limits(position, box),
            depth_test=False,
        )
        server.scene.add_icosphere("/target/marker", radius=0.015, color=TARGET_COLOR, cast_shadow=False)
        self._drags = 0  # drags in progress (one per browser)
        self._lock = threading.Lock()

        def moved(event: viser.TransformControlsEvent) -> None:
            with self._lock:
                self._drags += {"start": 1, "end": -1}.get(event.phase, 0)
                self._drags = max(self._drags, 0)
            on_move(np.array(self.handle.position, dtype=float))

        self.handle.on_update(moved)

    @property
    def dragging(self) -> bool:
        """A user holds the gizmo: nothing may move it under their hand."""
        with self._lock:
            return self._drags > 0

    def place(self, position: np.ndarray) -> None:
        """Move the gizmo (no callback)."""
        self.handle.position = tuple(float(v) for v in position)
