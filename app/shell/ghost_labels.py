"""What every ghost shares, whatever it draws: a label with a dot in its method's colour that says *pending* while the
drawn answer is for earlier inputs, whether it has an answer and whether the picker shows it; and the column of
labels beside the target (a scene's ghosts reach the same point, so labels placed there would print over each other).

The column stands above the target and ``LABEL_SIDE_M`` to its left as the scene's initial camera sees it, each
label ending at its point (``LABEL_ANCHOR``), its dot after it: off the target gizmo's z arrow, and running away from
the control panel on the page's right (a column above the target, its text running right, covered the z arrow and
ran under the panel).
"""

from __future__ import annotations

import numpy as np
import viser

from app.shell.stage import Camera

LABEL_BASE_M = 0.08  # the lowest label's height above the target
LABEL_SPACING_M = 0.035  # between stacked labels
LABEL_SCALE = 0.7  # the labels' font, times viser's 12 px
LABEL_ANCHOR = "bottom-right"  # the text stands on its point and ends there: the column stays above LABEL_BASE_M
LABEL_SIDE_M = 0.08  # the column's offset to the target's left, as the initial camera sees it
SWATCH_RADIUS_M = 0.014  # the dot in the method's colour after its label (viser's labels are black text)


def screen_right(camera: Camera) -> np.ndarray:
    """``(3,)`` the unit vector pointing right on the screen of ``camera`` (horizontal: the world's z is up)."""
    right = np.cross(np.subtract(camera.look_at, camera.position, dtype=float), [0.0, 0.0, 1.0])
    return right / np.linalg.norm(right)


class LabelledGhost:
    """What every ghost shares: a label under ``/ghost_labels/<key>`` with a dot in the method's colour ``rgb``
    after it (``right``: the screen's right, ``screen_right``), that says *pending* while the drawn answer is for
    earlier inputs, whether it has an answer and whether it is shown. Subclasses draw in ``_apply``."""

    def __init__(
        self,
        server: viser.ViserServer,
        key: str,
        text: str,
        rgb: tuple[int, int, int],
        enabled: bool,
        right: np.ndarray,
    ) -> None:
        self.key, self._text = key, text
        self._label = server.scene.add_label(
            f"/ghost_labels/{key}", text, font_screen_scale=LABEL_SCALE, anchor=LABEL_ANCHOR
        )
        self.swatch = server.scene.add_icosphere(
            f"/ghost_labels/{key}/swatch",
            radius=SWATCH_RADIUS_M,
            color=rgb,
            position=tuple(float(v) for v in 1.5 * SWATCH_RADIUS_M * np.asarray(right) + [0.0, 0.0, SWATCH_RADIUS_M]),
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


def label_position(target: np.ndarray, row: int, right: np.ndarray) -> np.ndarray:
    """Where the ``row``-th label of the column beside ``target`` stands (m, root frame; ``right``: the screen's)."""
    up = [0.0, 0.0, LABEL_BASE_M + LABEL_SPACING_M * row]
    return np.asarray(target, dtype=float) - LABEL_SIDE_M * np.asarray(right) + up


def stack_labels(ghosts: list[LabelledGhost], target: np.ndarray, right: np.ndarray) -> None:
    """Put the drawn ghosts' labels in a column beside ``target``, in the order given, one row each."""
    row = 0
    for ghost in ghosts:
        if ghost.drawn:
            ghost.place_label(label_position(target, row, right))
            row += 1
