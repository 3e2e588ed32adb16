"""The study's tuned zero-order settings where a user wants them outside the study (the G1 scene's live race): the
base cell's stage-B choice per method and budget, read from the study's committed store
(``docs/results/counterweight-study/tuning/tuning B.json``, written by ``protocol.Protocol.save_tuning``)."""

from __future__ import annotations

import json
from pathlib import Path

STORE = Path(__file__).resolve().parents[3] / "docs" / "results" / "counterweight-study"
STAGE_B = "tuning B"  # the phase whose choices fix every setting of the base cell


def tuned_settings(method: str, budget: str = "10x", store: Path = STORE) -> dict | None:
    """``method``'s settings as the study chose them on the base cell at ``budget`` (``"1x"``, ``"equal_time"``,
    ``"10x"``), or None where the store holds no such choice (no store, or a method the study did not tune)."""
    path = Path(store) / "tuning" / f"{STAGE_B}.json"
    try:
        searches = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    for search in searches:
        if search.get("cell") == "base" and search.get("method") == method:
            return search.get("choices", {}).get(budget)
    return None
