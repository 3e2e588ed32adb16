"""The Panda drawn from its URDF with real meshes, and one slider per arm joint that poses it."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import viser
import yourdfpy
from viser.extras import ViserUrdf

import assets
from assets.franka import FINGER_JOINTS, FINGER_OPENING

SLIDER_STEP = 1e-3  # radians


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


class RobotView:
    """The arm at ``q`` (fingers open) under ``/robot``, a "Joints" folder of sliders and a ready-pose button.

    Args:
        server: the viser server to draw in.
        on_change: called with the arm joints ``(7,)`` in radians after every redraw (and once at start).
    """

    def __init__(self, server: viser.ViserServer, on_change: Callable[[np.ndarray], None]) -> None:
        self._server = server
        self._on_change = on_change
        self._lock = threading.Lock()  # Slider callbacks run in viser's thread pool.
        self._urdf = ViserUrdf(server, load_panda_urdf(), root_node_name="/robot")
        self._cfg_names = self._urdf.get_actuated_joint_names()
        limits = self._urdf.get_actuated_joint_limits()
        with server.gui.add_folder("Joints"):
            self.sliders = tuple(
                server.gui.add_slider(
                    name, min=limits[name][0], max=limits[name][1], step=SLIDER_STEP, initial_value=q
                )
                for name, q in zip(assets.ARM_JOINTS, assets.READY_POSE, strict=True)
            )
            ready = server.gui.add_button("Ready pose")
        for slider in self.sliders:
            slider.on_update(lambda _: self._redraw())
        ready.on_click(lambda _: self.set_q(np.array(assets.READY_POSE)))
        self._redraw()

    @property
    def q(self) -> np.ndarray:
        """``(7,)`` the arm joints the sliders show, in radians."""
        return np.array([slider.value for slider in self.sliders])

    def set_q(self, q: np.ndarray) -> None:
        """Move the sliders (and so the drawn arm) to ``q`` ``(7,)``."""
        with self._server.atomic():
            for slider, value in zip(self.sliders, q, strict=True):
                slider.value = float(value)

    def _redraw(self) -> None:
        with self._lock:
            q = self.q
            joints = dict(zip(assets.ARM_JOINTS, q, strict=True))
            joints |= dict.fromkeys(FINGER_JOINTS, FINGER_OPENING)
            self._urdf.update_cfg(np.array([joints[name] for name in self._cfg_names]))
            self._on_change(q)
