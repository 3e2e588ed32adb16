"""The reach panel of the G1 scene: every method's answer (success, hand error, balance margin, which answer is
shown: *moving* or *rested*, latency) in one table whose rows carry the ghosts' colours, and the goal's controls.

The goal is typed into three number inputs inside a viser form: what is typed is a draft until the form is
committed (Enter in an input, or the Set goal button), so a half-typed number never moves the goal, and nothing
writes into the inputs while a user types: they are written only when the goal moves by other means (the gizmo, a
button) or after a commit that had to clamp the typed goal (they then show where it went). viser's inputs report
no blur, so leaving an input without Enter keeps the draft (the form's title marks it unsubmitted) until the next
commit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set

import numpy as np
import viser

from app.counterweight.answers import BodyAnswer
from app.counterweight.methods import BODY_METHODS
from app.shell.answers_table import PENDING, PENDING_LEGEND, answer_row

Drawn = Mapping[str, BodyAnswer | str | None]  # an answer, a message (why there is none), or None before the first
GOAL_STEP = 1e-4  # m: the inputs' step and precision (0.1 mm)


def format_row(label: str, rgb: tuple[int, int, int], answer: BodyAnswer | str | None, pending: bool) -> str:
    """One row; ``pending``: ``answer`` is for an earlier question and the new one is being computed: the swatch is
    hollow and the values dimmed, and nothing else changes, so the table keeps its layout."""
    if answer is None or isinstance(answer, str):  # before the first answer, or why there is none
        return answer_row(label, rgb, f"{PENDING}…" if answer == PENDING else answer, pending, 5)
    margin = f"{1e3 * answer.balance_margin:.1f}" + ("" if answer.balanced else " ⚠")
    cells = (
        "✔" if answer.success else "✘",
        f"{1e3 * answer.hand_error:.1f}",
        margin,
        f"{answer.phase} ({answer.iterations} it.{'' if answer.snapshot is None else f', v{answer.snapshot}'})",
        f"{answer.latency_ms:.0f}",
    )
    return answer_row(label, rgb, cells, pending, 5)


def answers_table(drawn: Drawn, pending: Set[str] = frozenset()) -> str:
    lines = [
        "| method | ok | hand error mm | balance margin mm | answer | ms |",
        "|:--|:-:|--:|--:|:--|--:|",
    ]
    rows = [format_row(m.label, m.rgb, drawn.get(m.key), m.key in pending) for m in BODY_METHODS]
    legend = (
        "*moving*: one warm-started chunk from the previous answer while the goal moves; *rested*: the full solve "
        "from standing once it rests (v*N*: the live policy's snapshot it answers; a new snapshot re-answers the "
        "policy alone, by the full solve). ⚠: the centre of mass is outside the support polygon's margin (its marker "
        "turns red). Each drawn ghost's body targets are frames in its colour: the pelvis pose, the torso "
        f"orientation (at the torso), the free hand's position. {PENDING_LEGEND}"
    )
    return "\n".join(lines + rows) + "\n\n" + legend


class ReachPanel:
    """The answers table and the goal's controls (the goal is also dragged in the scene).

    Args:
        server: the viser server.
        goal: the initial goal ``(3,)`` m, world frame.
        box: per axis ``(lower, upper)`` m: the inputs' range (the gizmo's box).
        on_goal: called with the three inputs ``(3,)`` when the user commits them.
        on_random_goal: the Random goal button.
    """

    def __init__(
        self,
        server: viser.ViserServer,
        goal: np.ndarray,
        box: tuple[tuple[float, float], ...],
        on_goal: Callable[[np.ndarray], None],
        on_random_goal: Callable[[], None],
    ) -> None:
        with server.gui.add_folder("Reach"):
            self.table = server.gui.add_markdown(answers_table({}))
            self.where = server.gui.add_markdown("")
            self.bounds = server.gui.add_markdown("")
            with server.gui.add_form("Goal (Enter or Set goal commits)") as self.form:
                self.inputs = tuple(
                    server.gui.add_number(
                        f"goal {axis} (m)", initial_value=round(float(v), 4), min=lo, max=hi, step=GOAL_STEP
                    )
                    for axis, v, (lo, hi) in zip("xyz", goal, box, strict=True)
                )
                commit = server.gui.add_button("Set goal", icon=viser.Icon.TARGET)
            self.random = server.gui.add_button("Random goal", hint="a validation goal, from either sector")
        self.form.on_submit(lambda _: on_goal(self.goal))
        commit.on_click(lambda _: self.form.submit())
        self.random.on_click(lambda _: on_random_goal())

    @property
    def goal(self) -> np.ndarray:
        """The inputs' values ``(3,)`` m (a draft until committed)."""
        return np.array([handle.value for handle in self.inputs], dtype=float)

    def show_goal(self, p: np.ndarray) -> None:
        """Write the goal into the inputs (unchanged values send nothing)."""
        for handle, v in zip(self.inputs, p, strict=True):
            handle.value = round(float(v), 4)

    def show_where(self, text: str) -> None:
        self.where.content = f"**Goal:** {text}"

    def show_bounds(self, message: str | None) -> None:
        """What the last clamp of the goal into the task's region did (None: nothing was clamped)."""
        self.bounds.content = "" if message is None else f"⚠ {message}"

    def show(self, drawn: Drawn, pending: Set[str]) -> None:
        self.table.content = answers_table(drawn, pending)
