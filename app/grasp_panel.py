"""The grasp panel: the target and ``q0`` inputs, and each method's answer (yaw, success, displacement, residuals,
latency) as a table whose rows carry the ghosts' colours.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import numpy as np
import viser

import assets
from app.ghosts import METHOD_STYLES
from app.inference import MethodResult

PENDING = "pending"
SLIDER_STEP = 1e-3  # radians
TARGET_STEP = 1e-3  # metres


def format_row(name: str, result: MethodResult | str | None) -> str:
    label, rgb = METHOD_STYLES[name]
    swatch = f"<span style='color:rgb{rgb}'>■</span> {label}"
    if result is None:
        return f"| {swatch} | – | | | | |"
    if isinstance(result, str):
        return f"| {swatch} | {result}… | | | | |"
    ok = "✔" if result.success else "✘"
    return (
        f"| {swatch} | {math.degrees(result.yaw):.1f} | {ok} | {result.displacement:.3f} | "
        f"{1e3 * result.position_error:.1f} / {1e3 * result.rotation_error:.1f} | {result.latency_ms:.0f} |"
    )


def results_table(results: dict[str, MethodResult | str | None]) -> str:
    """Markdown table of every method's answer (``PENDING`` while computing, None before the first)."""
    lines = [
        "| method | yaw ° | ok | Δq rad² | pos mm / rot mrad | ms |",
        "|:--|--:|:-:|--:|--:|--:|",
    ]
    return "\n".join(lines + [format_row(name, results.get(name)) for name in METHOD_STYLES])


class GraspPanel:
    """Inputs of the grasp question and the answers' table.

    Args:
        server: the viser server.
        target: initial grasp point ``(3,)`` metres.
        q0: initial start joints ``(7,)`` radians.
        limits: per arm joint ``(lower, upper)`` radians.
        on_change: called with ``(p (3,), q0 (7,))`` after every user change (one call per change, even when
            a button sets several inputs).
        on_random_target, on_random_q0: draw new values (the viewer owns the random generators).
    """

    def __init__(
        self,
        server: viser.ViserServer,
        target: np.ndarray,
        q0: np.ndarray,
        limits: dict[str, tuple[float, float]],
        on_change: Callable[[np.ndarray, np.ndarray], None],
        on_random_target: Callable[[], np.ndarray],
        on_random_q0: Callable[[], np.ndarray],
    ) -> None:
        self._on_change = on_change
        self._lock = threading.RLock()
        self._quiet = 0  # > 0 while the panel sets several inputs itself
        with server.gui.add_folder("Grasp"):
            self.table = server.gui.add_markdown(results_table({}))
            self.targets = tuple(
                server.gui.add_number(f"target {axis} (m)", initial_value=round(float(v), 3), step=TARGET_STEP)
                for axis, v in zip("xyz", target, strict=True)
            )
            random_target = server.gui.add_button("Random target", icon=viser.Icon.TARGET)
            with server.gui.add_folder("Start joints q0", expand_by_default=False):
                self.sliders = tuple(
                    server.gui.add_slider(
                        name, min=limits[name][0], max=limits[name][1], step=SLIDER_STEP, initial_value=float(v)
                    )
                    for name, v in zip(assets.ARM_JOINTS, q0, strict=True)
                )
                random_q0 = server.gui.add_button("Random q0", icon=viser.Icon.DICE)
                ready = server.gui.add_button("Ready pose")
        for handle in (*self.targets, *self.sliders):
            handle.on_update(lambda _: self._changed())
        random_target.on_click(lambda _: self.set_inputs(target=on_random_target()))
        random_q0.on_click(lambda _: self.set_inputs(q0=on_random_q0()))
        ready.on_click(lambda _: self.set_inputs(q0=np.array(assets.READY_POSE)))

    @property
    def target(self) -> np.ndarray:
        return np.array([h.value for h in self.targets], dtype=float)

    @property
    def q0(self) -> np.ndarray:
        return np.array([h.value for h in self.sliders], dtype=float)

    def set_inputs(self, target: np.ndarray | None = None, q0: np.ndarray | None = None, notify: bool = True) -> None:
        """Set the target and/or ``q0`` in the page; one ``on_change`` afterwards when ``notify``."""
        with self._lock:
            self._quiet += 1
            try:
                if target is not None:
                    for handle, v in zip(self.targets, target, strict=True):
                        handle.value = round(float(v), 4)
                if q0 is not None:
                    for handle, v in zip(self.sliders, q0, strict=True):
                        handle.value = float(v)
            finally:
                self._quiet -= 1
            if notify:
                self._on_change(self.target, self.q0)

    def show(self, results: dict[str, MethodResult | str | None]) -> None:
        self.table.content = results_table(results)

    def _changed(self) -> None:
        with self._lock:
            if self._quiet:
                return
            self._on_change(self.target, self.q0)
