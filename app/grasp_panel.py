"""The grasp panel: the target and ``q0`` inputs, and each method's answer (yaw, success, displacement, residuals,
latency) as a table whose rows carry the ghosts' colours.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Set

import numpy as np
import viser

import assets
from app.inference import MethodResult
from app.methods import BY_KEY, KEYS

PENDING = "pending"
SLIDER_STEP = 1e-3  # radians
TARGET_STEP = 1e-3  # metres


def _cells(result: MethodResult) -> tuple[str, str, str]:
    """The displacement, residual and latency cells of an answer, as the table prints them."""
    return (
        f"{result.displacement:.3f}",
        f"{1e3 * result.position_error:.1f} / {1e3 * result.rotation_error:.1f}",
        f"{result.latency_ms:.0f}",
    )


def _best(results: Mapping[str, MethodResult | str | None], pending: Set[str]) -> dict[str, str]:
    """The best cell of each numeric column among current answers (displacement and residual over successful
    ones), as printed: every row that prints it is marked."""
    answers = [r for k, r in results.items() if isinstance(r, MethodResult) and k not in pending]
    solved = [r for r in answers if r.success]
    best: dict[str, str] = {}
    if solved:
        best["displacement"] = _cells(min(solved, key=lambda r: r.displacement))[0]
        best["residual"] = _cells(min(solved, key=lambda r: r.position_error + r.rotation_error))[1]
    if answers:
        best["latency"] = _cells(min(answers, key=lambda r: r.latency_ms))[2]
    return best


def format_row(
    key: str, result: MethodResult | str | None, pending: bool = False, best: Mapping[str, str] | None = None
) -> str:
    """One table row; ``pending``: ``result`` answers earlier inputs and the new answer is being computed (its
    values are shown in italics, the ok column says so); values equal to ``best`` are bold."""
    method = BY_KEY[key]
    swatch = f"<span style='color:rgb{method.rgb}'>■</span> {method.label}"
    if result is None:
        return f"| {swatch} | {PENDING}… | | | | |" if pending else f"| {swatch} | – | | | | |"
    if isinstance(result, str):
        return f"| {swatch} | {result}… | | | | |"
    best = {} if pending or best is None else best

    def mark(text: str, column: str, eligible: bool = True) -> str:
        return f"**{text}**" if eligible and best.get(column) == text else text

    ok = f"{PENDING}…" if pending else ("✔" if result.success else "✘")
    displacement, residual, latency = _cells(result)
    cells = (
        f"{math.degrees(result.yaw):.1f}",
        ok,
        mark(displacement, "displacement", result.success),
        mark(residual, "residual", result.success),
        mark(latency, "latency"),
    )
    if pending:
        cells = tuple(f"*{cell}*" for cell in cells)
    return f"| {swatch} | " + " | ".join(cells) + " |"


def gap_line(results: Mapping[str, MethodResult | str | None], pending: Set[str]) -> str:
    """The learned predictor against the teacher, once both answered the current inputs."""
    learned, teacher = results.get("learned"), results.get("reference")
    if (
        not isinstance(learned, MethodResult)
        or not isinstance(teacher, MethodResult)
        or {"learned", "reference"} & pending
    ):
        return "Learned predictor vs teacher: waiting for both answers."
    apart = abs(math.degrees(math.remainder(learned.yaw - teacher.yaw, 2 * math.pi)))
    extra = learned.displacement - teacher.displacement
    relative = f" ({100 * extra / teacher.displacement:+.0f} %)" if teacher.displacement > 0 else ""
    verdict = (
        "both solve"
        if learned.success and teacher.success
        else ("**learned fails**" if teacher.success else "teacher fails")
    )
    return f"Learned predictor vs teacher: yaw {apart:.1f}° apart, Δq {extra:+.3f} rad²{relative}, {verdict}."


def results_table(results: Mapping[str, MethodResult | str | None], pending: Set[str] = frozenset()) -> str:
    """Markdown table of every method's answer (``PENDING`` while computing, None before the first); methods in
    ``pending`` show their previous answer marked as pending; the best current value of each column is bold."""
    lines = [
        "| method | yaw ° | ok | Δq rad² | pos mm / rot mrad | ms |",
        "|:--|--:|:-:|--:|--:|--:|",
    ]
    best = _best(results, pending)
    rows = [format_row(key, results.get(key), key in pending, best) for key in KEYS]
    return "\n".join(lines + rows) + "\n\n" + gap_line(results, pending)


class GraspPanel:
    """Inputs of the grasp question and the answers' table.

    The panel does not own the question: it reports what the user typed or slid (``on_target``, ``on_q0``) and
    ``show_question`` writes the current question back into its inputs. Writes made by ``show_question`` do not
    report themselves (viser runs an input's callbacks in the thread that sets it; the guard is per thread, so a
    user's change arriving meanwhile on another thread is never swallowed).

    Args:
        server: the viser server.
        target: initial grasp point ``(3,)`` metres.
        q0: initial start joints ``(7,)`` radians.
        limits: per arm joint ``(lower, upper)`` radians (the sliders' range).
        target_box: per axis ``(lower, upper)`` metres (the target inputs' range).
        on_target: called with the three target inputs ``(3,)`` after the user changes one.
        on_q0: called with the seven sliders ``(7,)`` after the user changes one.
        on_random_target, on_random_q0, on_ready: the buttons.
    """

    def __init__(
        self,
        server: viser.ViserServer,
        target: np.ndarray,
        q0: np.ndarray,
        limits: dict[str, tuple[float, float]],
        target_box: tuple[tuple[float, float], ...],
        on_target: Callable[[np.ndarray], None],
        on_q0: Callable[[np.ndarray], None],
        on_random_target: Callable[[], None],
        on_random_q0: Callable[[], None],
        on_ready: Callable[[], None],
    ) -> None:
        self._writing = threading.local()
        with server.gui.add_folder("Grasp"):
            self.table = server.gui.add_markdown(results_table({}))
            self.targets = tuple(
                server.gui.add_number(
                    f"target {axis} (m)",
                    initial_value=round(float(v), 4),
                    min=bounds[0],
                    max=bounds[1],
                    step=TARGET_STEP,
                )
                for axis, v, bounds in zip("xyz", target, target_box, strict=True)
            )
            random_target = server.gui.add_button("Random target", icon=viser.Icon.TARGET)
            with server.gui.add_folder("Start joints q0", expand_by_default=False):
                self.sliders = tuple(
                    server.gui.add_slider(
                        name, min=limits[name][0], max=limits[name][1], step=SLIDER_STEP, initial_value=float(v)
                    )
                    for name, v in zip(assets.PANDA.joints, q0, strict=True)
                )
                random_q0 = server.gui.add_button("Random q0", icon=viser.Icon.DICE)
                ready = server.gui.add_button("Ready pose")
        for handle in self.targets:
            handle.on_update(lambda _: self._user_changed(on_target, self.target))
        for handle in self.sliders:
            handle.on_update(lambda _: self._user_changed(on_q0, self.q0))
        random_target.on_click(lambda _: on_random_target())
        random_q0.on_click(lambda _: on_random_q0())
        ready.on_click(lambda _: on_ready())

    @property
    def target(self) -> np.ndarray:
        return np.array([h.value for h in self.targets], dtype=float)

    @property
    def q0(self) -> np.ndarray:
        return np.array([h.value for h in self.sliders], dtype=float)

    def show_question(self, target: np.ndarray, q0: np.ndarray) -> None:
        """Write the current question into the inputs (unchanged values send nothing)."""
        self.show_target(target)
        self.show_q0(q0)

    def show_target(self, target: np.ndarray) -> None:
        self._write(self.targets, [round(float(v), 4) for v in target])

    def show_q0(self, q0: np.ndarray) -> None:
        self._write(self.sliders, [float(v) for v in q0])

    def _write(self, handles, values) -> None:
        self._writing.active = True
        try:
            for handle, v in zip(handles, values, strict=True):
                handle.value = v
        finally:
            self._writing.active = False

    def show(self, results: Mapping[str, MethodResult | str | None], pending: Set[str] = frozenset()) -> None:
        self.table.content = results_table(results, pending)

    def _user_changed(self, callback: Callable[[np.ndarray], None], values: np.ndarray) -> None:
        if not getattr(self._writing, "active", False):
            callback(values)
