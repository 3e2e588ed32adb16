"""The method picker: which ghosts are drawn, one checkbox per method, grouped (rules / learned / search for the
Franka scene; the G1 scene passes its own methods and groups).

The answers table lists every method whatever is picked; the picker only chooses the ghosts, so that nine
translucent arms (or a dozen G1 stick figures) never have to be read at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import viser

from app.shell.methods import Method


class MethodPicker:
    """Args: ``on_change(key, shown)`` after the user ticks or unticks a method; ``methods`` (each ticked if
    ``shown``) under the titles of ``groups``, in that order (a group without methods is left out);
    ``unavailable``: why a method has no ghost to draw, by key (its box is unticked, disabled and says why)."""

    def __init__(
        self,
        server: viser.ViserServer,
        on_change: Callable[[str, bool], None],
        methods: Sequence[Method],
        groups: Mapping[str, str],
        unavailable: Mapping[str, str] | None = None,
    ) -> None:
        unavailable = unavailable or {}
        self.boxes: dict[str, viser.GuiCheckboxHandle] = {}
        with server.gui.add_folder("Ghosts shown", expand_by_default=False):
            for group, title in groups.items():
                members = [m for m in methods if m.group == group]
                if members:
                    server.gui.add_markdown(f"**{title}**")
                for method in members:
                    why = unavailable.get(method.key)
                    box = server.gui.add_checkbox(
                        method.label if why is None else f"{method.label} ({why})",
                        initial_value=method.shown and why is None,
                        disabled=why is not None,
                        hint=why,
                    )
                    box.on_update(lambda _, key=method.key, box=box: on_change(key, bool(box.value)))
                    self.boxes[method.key] = box
