"""The counterweight methods the G1 scene compares: reach only and the learned policy (answered at once, in one
batch) and the per-goal optimisation (the reference, after the goal rests); named as the experiment's report
names them (``experiment_name``)."""

from __future__ import annotations

from app.counterweight_answers import ONLINE, POLICY, REACH_ONLY
from app.methods import LEARNED, RULES, SEARCH, Method

BODY_METHODS: tuple[Method, ...] = (
    Method(REACH_ONLY, "reach only", (120, 130, 150), RULES, True, "reach_only"),
    Method(POLICY, "learned policy", (30, 170, 90), LEARNED, True, "gradient"),
    Method(ONLINE, "per-goal optimisation", (245, 130, 20), SEARCH, True, "online"),
)
BODY_KEYS = tuple(m.key for m in BODY_METHODS)
FAST_BODY_KEYS = (REACH_ONLY, POLICY)
