"""The seed's own run of its protocol, as measured on this project's machine: the table that the reference preset's
report is laid beside (``seed_run.json``, with how it was produced)."""

from __future__ import annotations

import json
from pathlib import Path

SEED_RUN = Path(__file__).with_name("seed_run.json")


def load_seed_run() -> dict:
    """``{"source": str, "rows": [{"split", "method", "success_rate", "mean_cost_valid", "grid_gap_pct"}, ...]}``."""
    return json.loads(SEED_RUN.read_text())
