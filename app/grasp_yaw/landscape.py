"""The yaw landscape: the joint displacement over the whole circle of yaws at the current target and ``q0``, with
each drawn method's yaw marked on it in its colour.

The curve is the angular grid's own evaluations (``learning.grasp_yaw.baselines.angular_grid``'s candidates: every grid yaw
solved with the grid's IK steps), so drawing it costs no extra solve: ``LandscapeGrid`` is the grid chooser the
search worker runs, and it keeps what its last call evaluated. Failed yaws are marked with crosses. While the
target or ``q0`` has changed and the grid has not answered the new inputs yet, the plot says *pending*.
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass, field, replace

import numpy as np
import torch
import viser
from matplotlib.figure import Figure

from app.grasp_yaw.methods import BY_KEY
from app.shell.supervision import Supervisor
from kinematics import KinematicsLayer
from learning.grasp_yaw.baselines import Candidates, angular_grid, ik_layer
from learning.grasp_yaw.config import ExperimentCfg
from learning.grasp_yaw.task import failure_penalty

FIGURE_INCHES = (4.6, 2.5)
FIGURE_DPI = 90


class LandscapeGrid:
    """The experiment's angular grid as a chooser ``(p (1, 3), q0 (1, dof)) -> yaw (1, 2)`` that keeps the grid's
    evaluations of its last call in ``last`` (one goal: the viewer's question). Called from one thread only."""

    def __init__(self, cfg: ExperimentCfg, kinematics: KinematicsLayer) -> None:
        b = cfg.baselines
        self.ik_iterations = b.grid_ik_iterations
        self._ik = ik_layer(kinematics, b.grid_ik_iterations)
        self._cfg, self._penalty = cfg, failure_penalty(kinematics)
        self.last: Candidates | None = None

    def __call__(self, p: torch.Tensor, q0: torch.Tensor) -> torch.Tensor:
        b = self._cfg.baselines
        result = angular_grid(self._ik, p, q0, b.grid_yaws, self._cfg.weights, self._penalty, b.grid_anchor)
        self.last = result.candidates
        return result.yaw


@dataclass
class Landscape:
    """What the plot shows: the grid's yaws (degrees, wrapped to [-180, 180), sorted), their displacement and
    success, and each drawn method's ``(yaw degrees, displacement)`` by method key."""

    yaw_deg: np.ndarray = field(default_factory=lambda: np.zeros(0))
    displacement: np.ndarray = field(default_factory=lambda: np.zeros(0))
    success: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    markers: dict[str, tuple[float, float]] = field(default_factory=dict)
    pending: bool = True
    ik_iterations: int = 0

    @staticmethod
    def wrap_deg(yaw_rad: float | np.ndarray) -> float | np.ndarray:
        return (np.degrees(yaw_rad) + 180.0) % 360.0 - 180.0

    def set_grid(self, candidates: Candidates, ik_iterations: int) -> None:
        """The grid's evaluations of the current question (its first goal)."""
        yaw = self.wrap_deg(candidates.psi[0].double().cpu().numpy())
        order = np.argsort(yaw, kind="stable")
        self.yaw_deg = yaw[order]
        self.displacement = candidates.displacement[0].double().cpu().numpy()[order]
        self.success = candidates.success[0].cpu().numpy().astype(bool)[order]
        self.ik_iterations, self.pending = ik_iterations, False

    def set_marker(self, key: str, yaw_rad: float, displacement: float) -> None:
        self.markers[key] = (float(self.wrap_deg(yaw_rad)), float(displacement))


def render(landscape: Landscape, shown: set[str]) -> np.ndarray:
    """``(H, W, 3)`` uint8: the landscape with the markers of the methods in ``shown``."""
    fig = Figure(figsize=FIGURE_INCHES, dpi=FIGURE_DPI)  # no pyplot: rendered from the viewer's threads
    ax = fig.subplots()
    solved = landscape.success
    if landscape.yaw_deg.size:
        curve = np.where(solved, landscape.displacement, np.nan)
        ax.plot(landscape.yaw_deg, curve, color="0.35", lw=1.2, label="grid, solved")
        if (~solved).any():
            top = np.nanmax(curve) if solved.any() else 1.0
            ax.plot(
                landscape.yaw_deg[~solved],
                np.full(int((~solved).sum()), top * 1.05),
                "x",
                color="crimson",
                ms=4,
                label="grid, failed",
            )
    for key, (yaw, displacement) in landscape.markers.items():
        if key in shown:
            rgb = tuple(c / 255 for c in BY_KEY[key].rgb)
            ax.plot([yaw], [displacement], "o", color=rgb, ms=7, mec="black", mew=0.6, label=BY_KEY[key].label)
    ax.set(xlim=(-180, 180), xlabel="yaw (deg)", ylabel="|q_ik - q0|² (rad²)")
    ax.set_xticks(range(-180, 181, 90))
    title = f"yaw landscape ({landscape.ik_iterations}-step grid solves)"
    ax.set_title(title + (": pending…" if landscape.pending else ""), fontsize=9)
    ax.tick_params(labelsize=7)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6, loc="upper right", ncol=2, framealpha=0.7)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="rgba", dpi=FIGURE_DPI)
    width, height = (int(v) for v in fig.canvas.get_width_height())
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8).reshape(height, width, 4)[..., :3].copy()


class LandscapePanel:
    """The plot in the page, rendered on a thread of its own: ``request(landscape, shown)`` hands it the newest
    state (the drawing paths call it under their locks and must not wait ~50 ms for matplotlib); a request that
    arrives while one renders replaces any still waiting. A failed render is reported through ``supervisor``."""

    PART = "landscape"

    def __init__(self, server: viser.ViserServer, supervisor: Supervisor) -> None:
        with server.gui.add_folder("Yaw landscape", expand_by_default=True):
            self.image = server.gui.add_image(render(Landscape(), set()), format="png")
        self._supervisor = supervisor
        self._wanted: tuple[Landscape, frozenset[str]] | None = None
        self._closed = False
        self._wake = threading.Condition()
        self.rendered: Landscape | None = None  # the state on screen (tests read it)
        self._thread = threading.Thread(target=self._run, name="landscape", daemon=True)
        self._thread.start()

    def request(self, landscape: Landscape, shown: set[str]) -> None:
        snapshot = replace(landscape, markers=dict(landscape.markers))
        with self._wake:
            self._wanted = (snapshot, frozenset(shown))
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._wanted is None and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                landscape, shown = self._wanted
                self._wanted = None
            with self._supervisor.guard(self.PART, "drawing the yaw landscape"):
                self.image.image = render(landscape, set(shown))
                self.rendered = landscape

    def close(self, timeout: float = 5.0) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout)
