"""The reach panel of the G1 scene: every method's answer (success, hand error, balance margin, which answer is
shown: *moving* or *rested*, latency) in one table whose rows carry the ghosts' colours, and the goal's controls.

The goal is typed into three text boxes (``app.shell.typed_numbers.TypedNumbers``, the Franka scene's: a number typed
key by key keeps its minus sign, a refused text says why under the boxes): what is typed is taken when committed
(Enter in a box, or the Set goal button: a pause takes nothing, so a half-typed number never moves the goal), and
nothing is written into a box while a user types in it: the boxes are written when the goal moves by other means (the gizmo, a button) and after a commit that
had to move the typed goal into the task's region (they then show where it went).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set

import numpy as np
import viser

from app.counterweight.answers import BodyAnswer
from app.counterweight.methods import BODY_METHODS
from app.shell.answers_table import PENDING, PENDING_LEGEND, answer_row
from app.shell.typed_numbers import Guard, TypedNumbers

Drawn = Mapping[str, BodyAnswer | str | None]  # an answer, a message (why there is none), or None before the first


def format_row(label: str, rgb: tuple[int, int, int], answer: BodyAnswer | str | None, pending: bool) -> str:
    """One row; ``pending``: ``answer`` is for an earlier question and the new one is being computed: the swatch is
    hollow and the values dimmed, and nothing else changes, so the table keeps its layout."""
    if answer is None or isinstance(answer, str):  # before the first answer, or why there is none
        return answer_row(label, rgb, f"{PENDING}…" if answer == PENDING else answer, pending, 5)
    margin = f"{1e3 * answer.balance_margin:.1f}" + ("" if answer.balanced else " ⚠")
    cells = (
        "✔" if answer.success else " ".join(("✘", *answer.failed)),
        f"{1e3 * answer.hand_error:.1f}",
        margin,
        f"{answer.phase} ({answer.iterations} it.{'' if answer.snapshot is None else f', v{answer.snapshot}'})",
        f"{answer.latency_ms:.0f}",
    )
    return answer_row(label, rgb, cells, pending, 5)


def verdict_legend(tolerance: float, margin: float, feet_tolerance: float) -> str:
    """What ✔ and ✘ mean: the experiment's success (``CounterweightProblem.outcome``), with its numbers (m)."""
    return (
        f"✔: the experiment's success: the hand within {1e3 * tolerance:g} mm of the goal, both feet held (within "
        f"{1e3 * feet_tolerance:g} mm), every joint within its limits and the centre of mass at least "
        f"{1e3 * (margin - feet_tolerance):g} mm inside the support polygon. ✘ names what was missed: *hand*, *margin*, "
        "*feet*, *limits*."
    )


def answers_table(drawn: Drawn, pending: Set[str] = frozenset(), verdict: str = "") -> str:
    """The table and its legend (``verdict``: ``verdict_legend``'s sentence, first)."""
    lines = [
        "| method | ok | hand error mm | balance margin mm | answer | ms |",
        "|:--|:-:|--:|--:|:--|--:|",
    ]
    rows = [format_row(m.label, m.rgb, drawn.get(m.key), m.key in pending) for m in BODY_METHODS]
    legend = (
        verdict
        + (" " if verdict else "")
        + (
            "*moving*: one warm-started chunk from the previous answer while the goal moves; *rested*: the full solve "
            "from standing once it rests (v*N*: the live policy's snapshot it answers; a new snapshot re-answers the "
            "policy alone, by the full solve). ⚠: the centre of mass is outside the support polygon's margin (its marker "
            "turns red). Each drawn ghost's body targets are frames in its colour: the pelvis pose, the torso "
            f"orientation (at the torso), the free hand's position. {PENDING_LEGEND}"
        )
    )
    return "\n".join(lines + rows) + "\n\n" + legend


class ReachPanel:
    """The answers table and the goal's controls (the goal is also dragged in the scene).

    Args:
        server: the viser server.
        goal: the initial goal ``(3,)`` m, world frame.
        on_goal: called with the three boxes' values ``(3,)`` when the user commits them; returns the goal now in
            force (moved into the task's region where it had to be).
        on_random_goal: the Random goal button.
        guard: runs a commit so that a failure is shown in the page.
        verdict: what ✔ and ✘ mean (``verdict_legend``).
    """

    def __init__(
        self,
        server: viser.ViserServer,
        goal: np.ndarray,
        on_goal: Callable[[np.ndarray], np.ndarray],
        on_random_goal: Callable[[], None],
        guard: Guard,
        verdict: str = "",
    ) -> None:
        self.verdict = verdict
        with server.gui.add_folder("Reach"):
            self.table = server.gui.add_markdown(answers_table({}, verdict=verdict))
            self.where = server.gui.add_markdown("")
            self.bounds = server.gui.add_markdown("")
            self.typed = TypedNumbers(
                server,
                "Goal (Enter or Set goal commits)",
                [f"goal {axis} (m)" for axis in "xyz"],
                goal,
                on_goal,
                self.show_refused,
                guard,
                hints=[
                    f"the goal's {axis} (m, world frame); a goal outside the task's region is moved into it"
                    for axis in "xyz"
                ],  # fmt: skip
            )
            self.refused = server.gui.add_markdown("")
            commit = server.gui.add_button("Set goal", icon=viser.Icon.TARGET)
            self.random = server.gui.add_button("Random goal", hint="a validation goal, from either sector")
        commit.on_click(lambda _: self.typed.form.submit())  # as Enter: the form's unsubmitted mark goes
        self.random.on_click(lambda _: on_random_goal())

    @property
    def goal(self) -> np.ndarray:
        """The goal in force ``(3,)`` m, as last committed or shown (not the uncommitted text)."""
        return self.typed.values

    def show_goal(self, p: np.ndarray) -> None:
        """The goal moved by other means: written into every box that holds no uncommitted text."""
        self.typed.show(p)

    def show_refused(self, message: str | None) -> None:
        """Why typed text was refused, under the boxes (None: nothing was)."""
        self.refused.content = "" if message is None else f"⚠ {message}"

    def show_where(self, text: str) -> None:
        self.where.content = f"**Goal:** {text}"

    def show_bounds(self, message: str | None) -> None:
        """What the last clamp of the goal into the task's region did (None: nothing was clamped)."""
        self.bounds.content = "" if message is None else f"⚠ {message}"

    def clear_notes(self) -> None:
        """The notes under the boxes and the answers gone (a new tab opened: they told another tab what its input
        did; the goal line says where the goal is)."""
        self.show_refused(None)
        self.show_bounds(None)

    def show(self, drawn: Drawn, pending: Set[str]) -> None:
        self.table.content = answers_table(drawn, pending, self.verdict)
