"""The G1 viewer's latency benchmark (``python -m app.counterweight.latency``): its summary and report, and one short
run of the real scene that writes the results files it reports."""

from __future__ import annotations

import json

import pytest

from app.counterweight import latency


def test_the_summary_and_the_report_say_the_targets_as_measured():
    first = latency.summary([12.0, 20.0, 28.0, 30.0, 250.0])
    assert first == {"count": 5, "median_ms": 28.0, "p95_ms": pytest.approx(206.0), "max_ms": 250.0}
    doc = {
        "provenance": {
            "command": "python -m app.counterweight.latency",
            "commit": "abc",
            "timestamp": "now",
            "machine": {"cpu": "cpu", "logical_cores": 2, "os": "os", "python": "3", "torch": "2", "torch_threads": 1},
        },
        "goals": 5,
        "interval_s": 1.0,
        "trainer_steps": [3, 9],
        "race_method": "es",
        "race_steps": [2, 5],
        "first": first,
        "rested": latency.summary([300.0, 400.0]),
    }
    report = latency.markdown(doc)
    assert "| first (reach only, both live policies) | 5 | 28 ms | 206 ms | 250 ms |" in report
    assert "| first answer: median <= 30 ms | 28 ms | met |" in report
    assert "| first answer: p95 <= 100 ms | 206 ms | NOT met |" in report
    assert "steps 3 to 9" in report and "es trainer generations 2 to 5" in report
    with pytest.raises(ValueError, match="no latency was measured"):
        latency.summary([])


def test_bad_arguments_end_with_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        latency.main(["--goals", "0"])
    assert exit_info.value.code == 2
    assert "--goals must be at least 1" in capsys.readouterr().err


@pytest.mark.slow
def test_a_short_run_writes_the_results_it_reports(tmp_path):
    assert latency.main(["--goals", "3", "--interval", "0.5", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "g1_latency.json").read_text())
    assert doc["goals"] == 3 and doc["first"]["count"] >= 1 and doc["rested"]["count"] >= 1
    assert doc["trainer_steps"][1] >= doc["trainer_steps"][0] >= 1
    assert doc["race_steps"][1] >= doc["race_steps"][0] >= 1
    assert 0 < doc["first"]["median_ms"] <= doc["first"]["max_ms"]
    report = (tmp_path / "g1_latency.md").read_text()
    assert f"| first (reach only, both live policies) | {doc['first']['count']} |" in report
    assert "python -m app.counterweight.latency --goals 3 --interval 0.5" in doc["provenance"]["command"]
