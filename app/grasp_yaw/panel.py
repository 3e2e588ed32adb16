"""The grasp panel: the target and ``q0`` inputs, and each method's answer (yaw, success, displacement, residuals,
latency) as a table whose rows carry the ghosts' colours.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Set

import numpy as np
import viser

import assets
from app.grasp_yaw.inference import MethodResult
from app.grasp_yaw.methods import BY_KEY, KEYS
from app.shell.answers_table import PENDING_LEGEND, answer_row, dimmed
from app.shell.status import StatusLine
from app.shell.typed_numbers import Guard, TypedNumbers, parse_value

ANSWER_COLUMNS = 5  # yaw, ok, displacement, residual, latency
TYPED_TARGET, TYPED_Q0 = "typed target", "typed q0"  # status keys of refused typed text


def _cells(result: MethodResult) -> tuple[str, str, str]:
    """The displacement, residual and latency cells of an answer, as the table prints them."""
    return (
        f"{result.displacement:.3f}",
        f"{1e3 * result.position_error:.1f} / {1e3 * result.rotation_error:.1f}",
        f"{result.latency_ms:.0f}",
    )


def _best(results: Mapping[str, MethodResult | str | None]) -> dict[str, str]:
    """The best cell of each numeric column among the answers shown (displacement and residual over successful
    ones), as printed: every row that prints it is marked. Pending answers take part, so that a row going
    pending moves no bold mark (bold is wider: a column could change width and its cells wrap)."""
    answers = [r for r in results.values() if isinstance(r, MethodResult)]
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
    """One table row; ``pending``: ``result`` answers earlier inputs and the new answer is being computed: the
    swatch is hollow and the values dimmed, and nothing else changes, so the table keeps its layout; values equal
    to ``best`` are bold."""
    method = BY_KEY[key]
    if result is None or isinstance(result, str):
        return answer_row(method.label, method.rgb, None if result is None else f"{result}…", pending, ANSWER_COLUMNS)
    best = {} if best is None else best

    def mark(text: str, column: str, eligible: bool = True) -> str:
        return f"**{text}**" if eligible and best.get(column) == text else text

    displacement, residual, latency = _cells(result)
    cells = (
        f"{math.degrees(result.yaw):.1f}",
        "✔" if result.success else "✘",
        mark(displacement, "displacement", result.success),
        mark(residual, "residual", result.success),
        mark(latency, "latency"),
    )
    return answer_row(method.label, method.rgb, cells, pending, ANSWER_COLUMNS)


def gap_line(results: Mapping[str, MethodResult | str | None], pending: Set[str], previous: str | None = None) -> str:
    """The learned predictor against the teacher once both answered, dimmed while either is pending (its text
    stays: a shorter one would change the panel's height). While either has no answer for this question (the
    teacher's search, hidden while the target moves), ``previous`` (the last line for an answered question) dimmed,
    for the same reason; before any, a line saying both are awaited."""
    learned, teacher = results.get("learned"), results.get("reference")
    if not isinstance(learned, MethodResult) or not isinstance(teacher, MethodResult):
        return dimmed(previous) if previous else "Learned predictor vs teacher: waiting for both answers."
    apart = abs(math.degrees(math.remainder(learned.yaw - teacher.yaw, 2 * math.pi)))
    extra = learned.displacement - teacher.displacement
    relative = f" ({100 * extra / teacher.displacement:+.0f} %)" if teacher.displacement > 0 else ""
    verdict = (
        "both solve"
        if learned.success and teacher.success
        else ("**learned fails**" if teacher.success else "teacher fails")
    )
    line = f"Learned predictor vs teacher: yaw {apart:.1f}° apart, Δq {extra:+.3f} rad²{relative}, {verdict}."
    return dimmed(line) if {"learned", "reference"} & pending else line


def results_table(
    results: Mapping[str, MethodResult | str | None], pending: Set[str] = frozenset(), previous_gap: str | None = None
) -> str:
    """Markdown table of every method's answer (``PENDING`` while computing, None before the first); methods in
    ``pending`` show their previous answer, marked pending without changing the layout; the best value of each
    column is bold; ``previous_gap``: ``gap_line``'s last line for an answered question."""
    lines = [
        "| method | yaw ° | ok | Δq rad² | pos mm / rot mrad | ms |",
        "|:--|--:|:-:|--:|--:|--:|",
    ]
    best = _best(results)
    rows = [format_row(key, results.get(key), key in pending, best) for key in KEYS]
    return "\n".join(lines + rows) + "\n\n" + gap_line(results, pending, previous_gap) + "\n\n" + PENDING_LEGEND


class GraspPanel:
    """Inputs of the grasp question and the answers' table.

    The panel does not own the question: it hands what the user typed to ``on_target`` / ``on_q0`` when they
    commit it, and ``show_question`` writes the current question back into the boxes. The target and ``q0`` are
    typed into ``TypedNumbers`` boxes (Enter commits them; nothing is rewritten under the cursor); what
    was refused or moved is said right under the boxes (``target_notes``, ``q0_notes``: keyed lines, as the page's
    status), not at the top of the page, out of view while typing in the joint boxes further down.

    Args:
        server: the viser server.
        target: initial grasp point ``(3,)`` metres.
        q0: initial start joints ``(7,)`` radians.
        limits: per arm joint ``(lower, upper)`` radians (the boxes' hints).
        on_target: called with the three typed target values ``(3,)`` m when the user commits them; returns the
            target in force ``(3,)`` (moved into reach if it was outside).
        on_q0: the same for the seven start joints (clipped to their limits).
        guard: ``guard(doing)`` runs a commit so that a failure is shown in the page.
        on_random_target, on_random_q0, on_ready: the buttons.
    """

    def __init__(
        self,
        server: viser.ViserServer,
        target: np.ndarray,
        q0: np.ndarray,
        limits: dict[str, tuple[float, float]],
        on_target: Callable[[np.ndarray], np.ndarray],
        on_q0: Callable[[np.ndarray], np.ndarray],
        guard: Guard,
        on_random_target: Callable[[], None],
        on_random_q0: Callable[[], None],
        on_ready: Callable[[], None],
    ) -> None:
        self._gap: str | None = None
        with server.gui.add_folder("Grasp"):
            self.table = server.gui.add_markdown(results_table({}))
            self.targets = TypedNumbers(
                server,
                "Target (Enter commits)",
                [f"target {axis} (m)" for axis in "xyz"],
                target,
                on_target,
                lambda message: self.target_notes.set(TYPED_TARGET, None if message is None else f"⚠ {message}"),
                guard,
            )
            self.target_notes = StatusLine(server, empty="")  # under the boxes, where the user types
            set_target = server.gui.add_button("Set target", hint="Takes the typed target (as Enter in a box does)")
            random_target = server.gui.add_button("Random target", icon=viser.Icon.TARGET)
            with server.gui.add_folder("Start joints q0", expand_by_default=False):
                self.joints = TypedNumbers(
                    server,
                    "q0, rad (Enter commits)",
                    assets.PANDA.joints,
                    q0,
                    on_q0,
                    lambda message: self.q0_notes.set(TYPED_Q0, None if message is None else f"⚠ {message}"),
                    guard,
                    hints=[f"{limits[name][0]:.4f} to {limits[name][1]:.4f} rad" for name in assets.PANDA.joints],
                )
                self.q0_notes = StatusLine(server, empty="")
                set_q0 = server.gui.add_button("Set q0", hint="Takes the typed joints (as Enter in a box does)")
                random_q0 = server.gui.add_button("Random q0", icon=viser.Icon.DICE)
                ready = server.gui.add_button("Ready pose")
        set_target.on_click(lambda _: self.targets.form.submit())  # as Enter: the form's unsubmitted mark goes
        set_q0.on_click(lambda _: self.joints.form.submit())
        random_target.on_click(lambda _: on_random_target())
        random_q0.on_click(lambda _: on_random_q0())
        ready.on_click(lambda _: on_ready())

    @property
    def target(self) -> np.ndarray:
        """What the target boxes say ``(3,)`` m (NaN where a box holds no number)."""
        return _said(self.targets)

    @property
    def q0(self) -> np.ndarray:
        """What the joint boxes say ``(7,)`` rad (NaN where a box holds no number)."""
        return _said(self.joints)

    def clear_notes(self) -> None:
        """The notes under the boxes gone (a new tab opened: they told another tab what its input did)."""
        self.target_notes.clear()
        self.q0_notes.clear()

    def show_question(self, target: np.ndarray, q0: np.ndarray) -> None:
        """Write the current question into the boxes not being typed in (unchanged values send nothing)."""
        self.targets.show(target)
        self.joints.show(q0)

    def show(self, results: Mapping[str, MethodResult | str | None], pending: Set[str] = frozenset()) -> None:
        if all(isinstance(results.get(key), MethodResult) for key in ("learned", "reference")):
            self._gap = gap_line(results, set())  # the line while both answer: shown dimmed while they do not
        self.table.content = results_table(results, pending, self._gap)


def _said(numbers: TypedNumbers) -> np.ndarray:
    parsed = (parse_value(box.value) for box in numbers.boxes)
    return np.array([math.nan if v is None else v for v in parsed], dtype=float)
