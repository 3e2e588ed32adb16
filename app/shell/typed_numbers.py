"""Numbers a user types: a group of text boxes in one viser form whose text is taken only when the user commits it
(Enter in a box, or the owner's button calling ``commit``), and never rewritten under the cursor.

Why text boxes: viser 1.1.1's number inputs (and a slider's number box) hold a number, not the text typed. After
``-`` then ``0`` they hold -0, which shows as ``0``: the minus sign is gone before the next key, and ``-0.25``
typed key by key ends as 0.25. A text box keeps every keystroke as typed.

Why only at a commit: a pause in the keys is no sign that a number is finished. Under a loaded machine (a page
drawn in software takes seconds a frame, and sends nothing meanwhile) the keys of ``1e9`` reached the server more
than a pause apart, and the pause took ``1``: the target moved, and moved again when the rest arrived. So what is
typed is a draft (viser marks the form's title ``*``) until Enter or the button; a half-typed number never moves
anything.

What is written back into a box, and when (``TypedNumbers`` owns these rules):

- a commit rewrites every box whose text does not say the value in force: the owner moved the value (a clamp), or
  the text is not a finite number (refused, with a message: ``on_message``); a box that says the value in force
  keeps its text;
- ``show`` writes values changed by other means (a drag, a button) into every box that holds no uncommitted text:
  a box being typed in is left alone, and its text is taken when it is committed.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import numpy as np
import viser

DECIMALS = 4  # digits after the point of a value written into a box

Guard = Callable[[str], AbstractContextManager]  # (what is being done) -> a context that shows a failure in the page


def format_value(value: float) -> str:
    """``value`` as a box shows it: at most ``DECIMALS`` decimals, no trailing zeros (0.15, -0.0698, 1)."""
    text = f"{value:.{DECIMALS}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def parse_value(text: str) -> float | None:
    """The finite number ``text`` says (surrounding spaces allowed), or None if it says none (empty, ``abc``,
    ``nan``, ``inf``)."""
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


class TypedNumbers:
    """Text boxes for a few numbers, committed together.

    Args:
        server: the viser server (the boxes go into the GUI container open when this is built).
        title: the form's title (it says how to commit; viser marks it ``*`` while a box holds uncommitted text).
        labels: one label per box.
        values: the values in force at first.
        on_commit: called with every box's value ``(n,)`` (the typed ones parsed, the others the values in force)
            when the user commits; returns the values now in force ``(n,)`` (the owner may have moved them).
        on_message: called with why typed text was refused, or None once a commit refused nothing.
        guard: runs a commit (on viser's thread) so that a failure is shown in the page.
        hints: one hover hint per box (e.g. its range), or None.
    """

    def __init__(
        self,
        server: viser.ViserServer,
        title: str,
        labels: Sequence[str],
        values: Sequence[float],
        on_commit: Callable[[np.ndarray], np.ndarray],
        on_message: Callable[[str | None], None],
        guard: Guard,
        hints: Sequence[str] | None = None,
    ) -> None:
        self.labels = tuple(labels)
        self._on_commit, self._on_message, self._guard = on_commit, on_message, guard
        self._lock = threading.Lock()  # the boxes' texts and the values in force
        self._commit_lock = threading.Lock()  # one commit at a time; taken before the owner's locks
        self._in_force = [float(v) for v in values]
        self._shown = [format_value(v) for v in self._in_force]  # the text each box had when last taken or written
        with server.gui.add_form(title) as self.form:
            self.boxes = tuple(
                server.gui.add_text(label, initial_value=text, hint=None if hints is None else hints[i])
                for i, (label, text) in enumerate(zip(self.labels, self._shown, strict=True))
            )
        self.form.on_submit(lambda _: self.commit())

    @property
    def values(self) -> np.ndarray:
        """The values in force ``(n,)``, as last committed or shown (not the uncommitted text)."""
        with self._lock:
            return np.array(self._in_force, dtype=float)

    def show(self, values: Sequence[float]) -> None:
        """The values in force changed by other means: write them into every box that holds no uncommitted text and
        does not already say its value."""
        with self._lock:
            self._in_force = [float(v) for v in values]
            for i, box in enumerate(self.boxes):
                says = parse_value(box.value) == self._in_force[i]  # e.g. "-0" says 0: left as typed
                if box.value == self._shown[i] and not says:  # not being typed in
                    self._write(i, format_value(self._in_force[i]))

    def commit(self) -> None:
        """Enter (or the owner's button): take the typed text, hand the values to the owner, say what was refused and
        write the value in force into every box that does not say it (a refused or moved value)."""
        with self._guard(f"taking the typed {', '.join(self.labels)}"), self._commit_lock:
            with self._lock:
                texts = [box.value for box in self.boxes]
                typed = [i for i, text in enumerate(texts) if text != self._shown[i]]
                values = list(self._in_force)
                refused = [i for i in typed if parse_value(texts[i]) is None]
                for i in typed:
                    if i not in refused:
                        values[i] = parse_value(texts[i])
            in_force = [float(v) for v in self._on_commit(np.array(values, dtype=float))] if typed else values
            with self._lock:
                self._in_force = in_force
                for i in typed:
                    self._shown[i] = texts[i]  # taken: no longer uncommitted text
                for i, box in enumerate(self.boxes):
                    if box.value == texts[i] and parse_value(texts[i]) != in_force[i]:  # not typed on since
                        self._write(i, format_value(in_force[i]))
            if typed:
                self._on_message(self._refusal(texts, refused, in_force))

    def _refusal(self, texts: list[str], refused: list[int], in_force: list[float]) -> str | None:
        if not refused:
            return None
        parts = [
            f"{self.labels[i]}: {f'{texts[i].strip()!r} is not a number' if texts[i].strip() else 'the box is empty'}, "
            f"it stays {format_value(in_force[i])}"
            for i in refused
        ]
        return "typed text refused: " + "; ".join(parts)

    def _write(self, i: int, text: str) -> None:
        """Under ``_lock``: box ``i`` shows ``text``."""
        self._shown[i] = text
        self.boxes[i].value = text
