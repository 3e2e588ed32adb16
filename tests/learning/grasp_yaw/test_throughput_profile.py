"""The grasp predictor's throughput profile (``python -m learning throughput-profile``) on the smoke preset: every row
timed, each method's IK iterations per goal counted from its configuration, the ratios to the grid, and the files
it writes (JSON with provenance, the table under its provenance line)."""

from __future__ import annotations

import json

from learning.__main__ import main
from learning.grasp_yaw import throughput


def test_every_row_is_timed_and_the_ik_work_counted() -> None:
    doc = throughput.run("smoke", batch=8, rounds=1)
    result = {r["row"]: r for r in doc["results"]}
    assert set(result) == set(throughput.ROWS) and doc["batch"] == 8
    s = doc["settings"]
    assert result["angular_grid"]["ik_iterations_per_goal"] == s["grid_yaws"] * s["grid_iterations"] + 64
    assert result["ik_trained"]["ik_iterations_per_goal"] == s["hypotheses"] * s["check_iterations"] + 64
    assert all(r["per_goal_s"] > 0 for r in doc["results"])
    table = throughput.markdown(doc)
    assert "| `angular_grid` |" in table and "| 1.00 |" in table


def test_the_command_writes_the_table_and_its_record(tmp_path) -> None:
    out = tmp_path / "throughput-profile"
    assert main(["throughput-profile", "--preset", "smoke", "--batch", "4", "--out", str(out)]) == 0
    doc = json.loads(out.with_suffix(".json").read_text())
    assert doc["provenance"]["command"].endswith("--batch 4 --out " + str(out))
    assert out.with_suffix(".md").read_text().startswith("Produced by `")
