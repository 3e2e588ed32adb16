"""The method picker: which ghosts are drawn, one checkbox per method, grouped as rules / learned / search.

The answers table lists every method whatever is picked; the picker only chooses the ghost arms, so that nine
translucent arms never have to be read at once.
"""

from __future__ import annotations

from collections.abc import Callable

import viser

from app.methods import LEARNED, METHODS, RULES, SEARCH

GROUP_TITLES = {RULES: "Rules", LEARNED: "Learned", SEARCH: "Search"}


class MethodPicker:
    """Args: ``on_change(key, shown)`` after the user ticks or unticks a method."""

    def __init__(self, server: viser.ViserServer, on_change: Callable[[str, bool], None]) -> None:
        self.boxes: dict[str, viser.GuiCheckboxHandle] = {}
        with server.gui.add_folder("Ghosts shown", expand_by_default=False):
            for group, title in GROUP_TITLES.items():
                server.gui.add_markdown(f"**{title}**")
                for method in (m for m in METHODS if m.group == group):
                    box = server.gui.add_checkbox(method.label, initial_value=method.shown)
                    box.on_update(lambda _, key=method.key, box=box: on_change(key, bool(box.value)))
                    self.boxes[method.key] = box
