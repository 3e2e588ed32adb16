"""The answers table's rows, the same in both scenes: a swatch in the method's colour and its label, then the answer's
cells; while the answer to new inputs is computed the swatch is hollow and the previous answer's cells are dimmed,
and nothing else changes, so the table keeps its layout."""

from __future__ import annotations

from collections.abc import Sequence

PENDING = "pending"
ANSWERED_SWATCH, PENDING_SWATCH = "■", "□"  # the row's colour swatch: filled, or hollow while its answer is computed
PENDING_OPACITY = 0.4
PENDING_LEGEND = (
    f"{PENDING_SWATCH} dimmed: the previous answer, shown while the answer to the new inputs is computed. Every method "
    "answers in the table; its ghost and label are drawn while its box under *Ghosts shown* is ticked."
)


def dimmed(text: str) -> str:
    """``text`` greyed out, at the same width (italics or an added word would change the table's layout)."""
    return f"<span style='opacity:{PENDING_OPACITY}'>{text}</span>"


def answer_row(
    label: str, rgb: tuple[int, int, int], cells: Sequence[str] | str | None, pending: bool, width: int
) -> str:
    """One markdown row of ``width`` answer columns after the method's: ``cells`` are the answer's (dimmed when
    ``pending``), or a message in their place (why there is no answer), or None before the first answer."""
    marker = PENDING_SWATCH if pending else ANSWERED_SWATCH
    swatch = f"<span style='color:rgb{rgb}'>{marker}</span> {label}"
    if cells is None:
        cells = f"{PENDING}…" if pending else "–"
    if isinstance(cells, str):
        return f"| {swatch} | {cells} |" + " |" * (width - 1)
    if pending:
        cells = [dimmed(cell) for cell in cells]
    return f"| {swatch} | " + " | ".join(cells) + " |"
