"""The methods the Franka scene compares: how each is named, coloured and grouped, and which are answered at once.

Fast methods (a rule or a network plus one IK check) are answered together by the inference worker; search
methods (the angular grid, online optimisation, the teacher) run on the search worker, off the fast path. Each
``key`` maps to the name ``learning.grasp_yaw.evaluation`` gives the same method (``EXPERIMENT_NAMES``), so the viewer's
answer is the experiment's answer for the same goal and start joints.
"""

from __future__ import annotations

from app.shell.methods import LEARNED, RULES, SEARCH, Method

# Distinct hues that read well over the grey arm and the white floor, one per method.
METHODS: tuple[Method, ...] = (
    Method("radial", "radial rule", (245, 130, 20), RULES, True, "radial"),
    Method("heading", "heading", (200, 170, 0), RULES, True, "heading"),
    Method("learned", "learned predictor", (30, 170, 90), LEARNED, True, "ik_trained"),
    Method("teacher_supervised", "teacher-supervised", (0, 150, 170), LEARNED, False, "teacher_supervised"),
    Method("zero_order", "zero-order (ES)", (120, 120, 120), LEARNED, False, "zero_order"),
    Method("shared_constant", "shared constant", (150, 100, 60), LEARNED, False, "shared_constant"),
    Method("angular_grid", "angular grid", (40, 110, 220), SEARCH, True, "angular_grid"),
    Method("online_optimization", "online optimization", (220, 50, 120), SEARCH, True, "online_optimization"),
    Method("reference", "teacher (numerical reference)", (130, 60, 220), SEARCH, True, "teacher"),
)
GROUP_TITLES = {RULES: "Rules", LEARNED: "Learned", SEARCH: "Search"}
BY_KEY = {m.key: m for m in METHODS}
KEYS = tuple(m.key for m in METHODS)
SEARCH_KEYS = tuple(m.key for m in METHODS if m.group == SEARCH)  # in the order the search worker runs them
FAST_KEYS = tuple(m.key for m in METHODS if m.group != SEARCH)
TRAINED_KEYS = tuple(m.key for m in METHODS if m.group == LEARNED)
