"""The grasp predictor's throughput profile (``python -m learning throughput-profile``) on the smoke preset: every row
timed, each method's IK iterations per goal counted from its configuration, the ratios to the grid, and the files
it writes (JSON with provenance, the table under its provenance line); the round-robin medians that it and the
experiment's latency take."""

from __future__ import annotations

import json

import pytest

from learning.__main__ import main
from learning.common.panda import franka_kinematics
from learning.grasp_yaw import evaluation, throughput
from learning.grasp_yaw.config import preset
from learning.grasp_yaw.evaluation import eval_layer, search_choosers
from learning.grasp_yaw.splits import make_splits


def test_every_row_is_timed_and_the_ik_work_counted() -> None:
    doc = throughput.run("smoke", batch=8, rounds=1)
    result = {r["row"]: r for r in doc["results"]}
    assert set(result) == set(throughput.ROWS) and doc["batch"] == 8
    s = doc["settings"]
    # the final solve continues the chosen yaw's check: 64 steps less the check's
    assert s["final_iterations"] == 64 and s["grid_iterations"] == s["check_iterations"] == 24
    assert result["angular_grid"]["ik_iterations_per_goal"] == s["grid_yaws"] * 24 + 40
    assert result["ik_trained"]["ik_iterations_per_goal"] == s["hypotheses"] * 24 + 40
    assert result["angular_grid.from_q0"]["ik_iterations_per_goal"] == s["grid_yaws"] * 24 + 64
    assert result["ik_trained.from_q0"]["ik_iterations_per_goal"] == s["hypotheses"] * 24 + 64
    assert result["network_floor"]["ik_iterations_per_goal"] == result["ik_trained_one_yaw"]["ik_iterations_per_goal"]
    assert all(r["per_goal_s"] > 0 for r in doc["results"])
    table = throughput.markdown(doc)
    assert "| `angular_grid` |" in table and "| 1.00 |" in table


def test_the_command_writes_the_table_and_its_record(tmp_path) -> None:
    out = tmp_path / "throughput-profile"
    assert main(["throughput-profile", "--preset", "smoke", "--batch", "4", "--rounds", "2", "--out", str(out)]) == 0
    doc = json.loads(out.with_suffix(".json").read_text())
    assert doc["provenance"]["command"].endswith("--batch 4 --rounds 2 --out " + str(out))
    assert doc["rounds"] == 2 and doc["batch"] == 4
    assert out.with_suffix(".md").read_text().startswith("Produced by `")


def test_round_robin_medians_time_every_callable_in_turn() -> None:
    """One warm-up call each, then ``rounds`` rounds of every callable once, in order: a slow minute of the machine
    falls on every method alike."""
    calls: list[str] = []
    fns = {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c")}
    seconds = evaluation.round_robin_medians(fns, rounds=3)
    assert calls == ["a", "b", "c"] * 4
    assert set(seconds) == set(fns) and all(s >= 0 for s in seconds.values())


def test_the_experiments_latency_takes_every_methods_batch_in_rounds() -> None:
    cfg = preset("smoke")
    kinematics = franka_kinematics()
    goals = make_splits(cfg, kinematics)["test_iid"].to(kinematics.device, kinematics.dtype)
    choosers = {name: c for name, c in search_choosers(cfg, kinematics).items() if name in ("radial", "angular_grid")}
    latency = evaluation.measure_latency(choosers, goals, eval_layer(cfg, kinematics), batch=8, singles=2, rounds=3)
    assert set(latency) == {"radial", "angular_grid"}
    for lat in latency.values():
        assert lat["batch"] == 8 and lat["rounds"] == 3 and lat["batch1_ms"] > 0
        assert lat["goals_per_second"] == pytest.approx(8 / (1e-3 * lat["batch_ms_per_goal"] * 8))
    assert latency["radial"]["goals_per_second"] > latency["angular_grid"]["goals_per_second"]


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [("--batch", "0", "0 must be at least 1"), ("--rounds", "-3", "-3 must be at least 1"),
     ("--rounds", "many", "'many' is not a whole number")],
)  # fmt: skip
def test_bad_sizes_get_one_line_and_exit_2(capsys, option, value, message) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["throughput-profile", "--preset", "smoke", option, value])
    assert stopped.value.code == 2
    assert f"argument {option}: {message}" in capsys.readouterr().err
