"""The Franka scene's stage: the camera that frames the arm, the workspace and the ghosts, and the workspace outlined
on a table (the training region and the disjoint-spatial test region), labelled."""

from __future__ import annotations

import numpy as np
import viser

from app.shell.stage import Camera
from learning.grasp_yaw.config import WorkspaceCfg

TRAIN_COLOR = (40, 110, 220)  # the region training, validation and IID test goals come from
HELDOUT_COLOR = (220, 50, 120)  # the disjoint-spatial test region, never seen in training
CAMERA_POSITION = (1.25, -0.85, 0.8)  # metres, root frame: frames the arm, the workspace and the ghosts
CAMERA_LOOK_AT = (0.35, 0.0, 0.2)
CAMERA_FOV_DEG = 75.0  # vertical
SCENE_LABEL_SCALE = 0.8  # the regions' labels' font, times viser's 12 px
SCENE_LABEL_ANCHOR = "top-left"  # the text hangs below and right of its point
SCENE_LABEL_OFFSET_M = 0.1  # the regions' labels' distance in front of the workspace's near edge (+x)
CAMERA = Camera(CAMERA_POSITION, CAMERA_LOOK_AT, CAMERA_FOV_DEG)


def box_edges(x: tuple[float, float], y: tuple[float, float], z: tuple[float, float]) -> np.ndarray:
    """``(12, 2, 3)`` the edges of an axis-aligned box, as line segments."""
    corners = np.array([[x[i], y[j], z[k]] for i in (0, 1) for j in (0, 1) for k in (0, 1)])
    pairs = [(a, b) for a in range(8) for b in range(a + 1, 8) if bin(a ^ b).count("1") == 1]
    return np.stack([corners[[a, b]] for a, b in pairs])


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
    camera they never overlap for a target in the workspace (tests/app/grasp_yaw/test_app_layout.py projects them)."""
    front = ws.x[1] + SCENE_LABEL_OFFSET_M
    return [
        ("train_label", "workspace", (front, ws.y[0] + 0.1, 0.0)),
        ("heldout_label", "disjoint-spatial\ntest", (front, ws.heldout_y[0] - 0.05, 0.0)),
    ]
