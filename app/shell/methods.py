"""What a scene's method is to the viewer: a key, a label, a colour, a group of the picker and the table, whether its
ghost is drawn by default, and its name in the experiment's evaluation (so the viewer's answer is the experiment's)."""

from __future__ import annotations

from dataclasses import dataclass

RULES, LEARNED, SEARCH = "rules", "learned", "search"


@dataclass(frozen=True)
class Method:
    key: str
    label: str
    rgb: tuple[int, int, int]
    group: str  # RULES, LEARNED or SEARCH
    shown: bool  # its ghost is drawn by default
    experiment_name: str  # the method's name in learning's evaluation and reports
