"""The counterweight methods the G1 scene compares, named, coloured and grouped for its table, ghosts and picker.

Reach only and every policy (the gradient policy, live or a run's; the live race's zero-order policy; the run's
``gradient_axes`` ablation, its zero-order policies at both budgets and its best constant offset) are answered at
once, in one batch; the
per-goal optimisation (the reference) after the goal rests. Each ``key`` but ``policy`` is the experiment's own
name of the method (``experiment_name``: its checkpoint's key and its row in the report), so the scene's answer is
the experiment's answer for the same goal. By default the ghosts of reach only, the gradient policy, the
zero-order policies at equal wall time and the per-goal optimisation are drawn; the picker draws the others.
"""

from __future__ import annotations

from app.counterweight.answers import ONLINE, POLICY, RACE, REACH_ONLY
from app.shell.methods import LEARNED, RULES, SEARCH, Method

ZERO_ORDER = "zero-order"  # a picker group of its own: the claim compares these with the gradient policy
GROUP_TITLES = {
    RULES: "Rules",
    LEARNED: "Trained through the layer",
    ZERO_ORDER: "Zero-order (forward solves only)",
    SEARCH: "Per-goal search",
}

BODY_METHODS: tuple[Method, ...] = (
    Method(REACH_ONLY, "reach only", (120, 130, 150), RULES, True, "reach_only"),
    Method(POLICY, "learned policy (R^9)", (30, 170, 90), LEARNED, True, "gradient"),
    Method("gradient_axes", "7-D axes ablation", (0, 150, 170), LEARNED, False, "gradient_axes"),
    Method("constant", "best constant offset", (150, 100, 60), LEARNED, False, "constant"),
    Method("es_seconds", "ES (equal time)", (220, 50, 120), ZERO_ORDER, True, "es_seconds"),
    Method("es_evaluations", "ES (equal evaluations)", (240, 140, 190), ZERO_ORDER, False, "es_evaluations"),
    Method("sep_cma_seconds", "sep-CMA-ES (equal time)", (130, 60, 220), ZERO_ORDER, True, "sep_cma_seconds"),
    Method(
        "sep_cma_evaluations",
        "sep-CMA-ES (equal evaluations)",
        (180, 150, 240),
        ZERO_ORDER,
        False,
        "sep_cma_evaluations",
    ),
    Method("linear_cma_seconds", "linear CMA-ES (equal time)", (40, 110, 220), ZERO_ORDER, True, "linear_cma_seconds"),
    Method(
        "linear_cma_evaluations",
        "linear CMA-ES (equal evaluations)",
        (130, 180, 240),
        ZERO_ORDER,
        False,
        "linear_cma_evaluations",
    ),
    Method(RACE, "zero-order policy (live race)", (192, 48, 106), ZERO_ORDER, True, "race"),
    Method(ONLINE, "per-goal optimisation", (245, 130, 20), SEARCH, True, "online"),
)
BODY_KEYS = tuple(m.key for m in BODY_METHODS)
BODY_BY_KEY = {m.key: m for m in BODY_METHODS}
LIVE_KEYS = (POLICY, RACE)  # the policies trained live: their snapshots come with the question
RUN_KEYS = tuple(m.key for m in BODY_METHODS if m.group in (LEARNED, ZERO_ORDER) and m.key not in LIVE_KEYS)
FAST_BODY_KEYS = tuple(key for key in BODY_KEYS if key != ONLINE)  # in the order of the batch
