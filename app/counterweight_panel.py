"""The reach panel of the G1 scene: a random-goal button and every method's answer (success, hand error, balance
margin, which answer is shown: *moving* or *rested*, latency) in one table whose rows carry the ghosts' colours."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set

import viser

from app.counterweight_answers import BodyAnswer
from app.counterweight_methods import BODY_METHODS
from app.grasp_panel import PENDING

Drawn = Mapping[str, BodyAnswer | str | None]  # an answer, a message (why there is none), or None before the first


def format_row(label: str, rgb: tuple[int, int, int], answer: BodyAnswer | str | None, pending: bool) -> str:
    """One row; ``pending``: ``answer`` is for an earlier question (italics, the ok column says so)."""
    swatch = f"<span style='color:rgb{rgb}'>■</span> {label}"
    if answer is None:
        return f"| {swatch} | {PENDING}… | | | | |" if pending else f"| {swatch} | – | | | | |"
    if isinstance(answer, str):
        return f"| {swatch} | {answer}… | | | | |"
    ok = f"{PENDING}…" if pending else ("✔" if answer.success else "✘")
    margin = f"{1e3 * answer.balance_margin:.1f}" + ("" if answer.balanced else " ⚠")
    cells = (
        ok,
        f"{1e3 * answer.hand_error:.1f}",
        margin,
        f"{answer.phase} ({answer.iterations} it.)",
        f"{answer.latency_ms:.0f}",
    )
    if pending:
        cells = tuple(f"*{cell}*" for cell in cells)
    return f"| {swatch} | " + " | ".join(cells) + " |"


def answers_table(drawn: Drawn, pending: Set[str] = frozenset()) -> str:
    lines = [
        "| method | ok | hand error mm | balance margin mm | answer | ms |",
        "|:--|:-:|--:|--:|:--|--:|",
    ]
    rows = [format_row(m.label, m.rgb, drawn.get(m.key), m.key in pending) for m in BODY_METHODS]
    legend = (
        "*moving*: one warm-started chunk from the previous answer while the goal moves; *rested*: the full solve "
        "from standing once it rests. ⚠: the centre of mass is outside the support polygon's margin (its marker "
        "turns red)."
    )
    return "\n".join(lines + rows) + "\n\n" + legend


class ReachPanel:
    """The goal's controls and the answers table (the goal itself is dragged in the scene)."""

    def __init__(self, server: viser.ViserServer, on_random_goal: Callable[[], None]) -> None:
        with server.gui.add_folder("Reach"):
            self.random = server.gui.add_button("Random goal", hint="a goal from the validation region")
            self.table = server.gui.add_markdown(answers_table({}))
        self.random.on_click(lambda _: on_random_goal())

    def show(self, drawn: Drawn, pending: Set[str]) -> None:
        self.table.content = answers_table(drawn, pending)
