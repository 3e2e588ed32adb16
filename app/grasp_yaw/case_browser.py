"""Browsing saved cases: a split picker and a case slider over the test goals of the loaded run (or, without a
run, the preset's splits, which are the same goals a run of it saves). Picking a case asks for its target and start
joints together, so every method answers exactly that case."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import viser

from learning.grasp_yaw.splits import GoalSet

CASE_SPLITS = ("test_iid", "test_spatial", "test_shift", "validation")


class CaseBrowser:
    """Args: ``splits`` by name (those of ``CASE_SPLITS`` present are offered); ``source`` says where they come
    from; ``on_case(p (3,), q0 (dof,))`` is called with the picked case."""

    def __init__(
        self,
        server: viser.ViserServer,
        splits: Mapping[str, GoalSet],
        source: str,
        on_case: Callable[[np.ndarray, np.ndarray], None],
    ) -> None:
        self._splits = {name: splits[name] for name in CASE_SPLITS if name in splits}
        self._on_case = on_case
        with server.gui.add_folder("Test cases", expand_by_default=True):
            self.source = server.gui.add_markdown(source)
            self.split = server.gui.add_dropdown("held-out split", tuple(self._splits), initial_value=CASE_SPLITS[0])
            self.case = server.gui.add_slider(
                "case", min=0, max=len(self._splits[CASE_SPLITS[0]]) - 1, step=1, initial_value=0
            )
            with server.gui.add_folder("step", expand_by_default=True):
                self.previous = server.gui.add_button("Previous case")
                self.next = server.gui.add_button("Next case")
            self.shown = server.gui.add_markdown("*no case shown yet*")
        self.split.on_update(lambda _: self._split_changed())
        self.case.on_update(lambda _: self.show())
        self.previous.on_click(lambda _: self.step(-1))
        self.next.on_click(lambda _: self.step(+1))

    def _split_changed(self) -> None:
        self.case.max = len(self._splits[self.split.value]) - 1
        if self.case.value != 0:
            self.case.value = 0  # its update shows the case
        else:
            self.show()

    def step(self, by: int) -> None:
        self.case.value = int(np.clip(int(self.case.value) + by, 0, self.case.max))

    def show(self) -> None:
        """Ask for the picked case."""
        goals, index = self._splits[self.split.value], int(self.case.value)
        p, q0 = goals.p[index].double().cpu().numpy(), goals.q0[index].double().cpu().numpy()
        self.shown.content = (
            f"**{self.split.value} #{index}** of {len(goals)}: target ({p[0]:.3f}, {p[1]:.3f}, {p[2]:.3f}) m, "
            f"q0 [{', '.join(f'{v:.2f}' for v in q0)}] rad"
        )
        self._on_case(p, q0)
