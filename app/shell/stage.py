"""The stage both scenes share: z up, the floor, the lighting, the initial camera, and the draggable target gizmo."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import viser

TARGET_COLOR = (250, 190, 0)
GIZMO_SCALE = (
    0.26  # metres: the target gizmo's arrows, whose outer half lies beyond every ghost's frame in either scene
)
GIZMO_LINE_WIDTH = 5.0  # px: thicker than the ghosts' frames and bars, so a first grab finds it


@dataclass(frozen=True)
class Camera:
    """The initial camera of a scene: where it stands and looks (m, world frame) and its vertical field of view."""

    position: tuple[float, float, float]
    look_at: tuple[float, float, float]
    fov_deg: float


def set_stage(server: viser.ViserServer, camera: Camera, light: bool = False) -> None:
    """Z up, a floor grid (10 cm cells), the lighting and the scene's initial camera.

    ``light``: plain lighting, the default lights without shadows and no environment map. In software WebGL
    (headless Chromium, a machine without a GPU) viser's shadows and environment reflections cost seconds a frame
    (measured on 2 cores at 1280x800: 9.4 s a frame with both, 1.4 s without shadows, 1.8 s without the environment
    map, 17 ms without either), and until a frame ends the page takes no message, key or mouse event.
    """
    server.scene.set_up_direction("+z")
    if light:
        server.scene.configure_default_lights(enabled=True, cast_shadow=False)
        server.scene.configure_environment_map(hdri=None)
    server.scene.add_grid("/ground", width=2.0, height=2.0, cell_size=0.1, section_size=0.5)
    server.initial_camera.position = camera.position
    server.initial_camera.look_at = camera.look_at
    server.initial_camera.fov = math.radians(camera.fov_deg)


def translation_limits(position: np.ndarray, box: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
    """viser's ``translation_limits`` for a gizmo first placed at ``position`` that must stay in ``box``: viser
    (drei's pivot controls) bounds the drag's offset from where the gizmo was first placed, not its position."""
    return tuple((float(lo - p), float(hi - p)) for p, (lo, hi) in zip(position, box, strict=True))


class TargetGizmo:
    """A draggable target point (position only; what else a method chooses is its own), limited to ``box``.

    Args:
        server: the viser server.
        position: initial target point (m, world or root frame).
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
