"""The model picker: which predictor answers as *learned*: the live trainer's, or any trained method and seed of the
loaded run (its validation-selected checkpoint)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import viser

from learning.grasp_yaw.report import LABELS

LIVE = "live trainer"


def model_name(method: str, seed: int) -> str:
    return f"{LABELS.get(method, method)} · seed {seed}"


class ModelPicker:
    """Args: ``models`` the run's ``(method, seed)`` checkpoints; ``on_pick(method, seed)`` with ``(None, None)``
    for the live trainer."""

    def __init__(
        self,
        server: viser.ViserServer,
        models: Sequence[tuple[str, int]],
        on_pick: Callable[[str | None, int | None], None],
        initial: tuple[str, int] | None = None,
    ) -> None:
        self._by_name = {model_name(method, seed): (method, seed) for method, seed in models}
        options = (LIVE, *self._by_name)
        start = LIVE if initial is None else model_name(*initial)
        self.dropdown = server.gui.add_dropdown("learned = model", options, initial_value=start)
        self.dropdown.disabled = not models
        self.dropdown.on_update(lambda _: on_pick(*self._by_name.get(self.dropdown.value, (None, None))))
