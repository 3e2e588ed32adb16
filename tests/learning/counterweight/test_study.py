"""The counterweight study (``docs/counterweight-study.md``): its design as the pre-registration fixes it, the edge
rule, reading a run at a budget, the verdict rule, the intervals, and the whole smoke study through its command
line (resumed, it runs nothing again and retraces the same choices)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import assets
from kinematics.errors import ConfigError
from learning.counterweight.config import PRESETS
from learning.counterweight.problem import CounterweightProblem
from learning.counterweight.selection import Checkpoints, train_with_checkpoints
from learning.counterweight.study.analysis import summary, verdict
from learning.counterweight.study.budgets import at_budget, evaluations_to_reach
from learning.counterweight.study.design import ARCS, SECTOR_WIDTH, azimuth_intervals, study_preset
from learning.counterweight.study.regions import arc_of
from learning.counterweight.study.tuning import Search, extended_value, neighbourhood


def test_the_levels_are_the_pre_registered_ones():
    cfg = study_preset("full")
    names = [cell.name for cell in cfg.cells()]
    assert names == [
        "base",
        "sectors-1",
        "sectors-2",
        "sectors-4",
        "sectors-8",
        "width-16",
        "width-256",
        "tolerance-5mm",
        "tolerance-2mm",
    ]
    assert cfg.one_x() == 928 and cfg.multiple * cfg.one_x() == 9280  # amendment 1
    assert len(cfg.seeds) == 10 and len(cfg.tuning_seeds) == 2
    assert cfg.cell("width-256").task == cfg.cell("base").task  # the width cells share the base cell's goals
    assert cfg.axes()["tolerance"] == ("base", "tolerance-5mm", "tolerance-2mm")
    for method, grid in cfg.grids("A").items():
        count = math.prod(len(values) for _, values in grid)
        count_b = math.prod(len(values) for _, values in cfg.grids("B")[method])
        assert count == count_b == 12, method  # the same number of configurations for every method, per stage
    assert min(dict(cfg.grids("A")["sep_cma"])["sep_cma_sigma"]) == 0.002
    assert min(dict(cfg.grids("A")["gradient"])["learning_rate"]) == 1e-4
    assert len(cfg.grids("A")["es"]) == 2  # sigma x learning rate


def test_sectors_spread_over_the_counterweight_arcs():
    (front,) = azimuth_intervals(1)
    assert front[1] - front[0] == pytest.approx(SECTOR_WIDTH)
    assert sum(front) / 2 == pytest.approx(sum(ARCS[0]) / 2)
    for k in (2, 4, 8):
        intervals = azimuth_intervals(k)
        assert len(intervals) == k
        centres = torch.tensor([sum(i) / 2 for i in intervals])
        assert (arc_of(centres) == torch.tensor([0] * (k // 2) + [1] * (k // 2))).all()
    assert azimuth_intervals(None) == ((-math.pi, math.pi),)
    assert arc_of(torch.tensor([3.5 - 2 * math.pi, 1.57])).tolist() == [1, 2]  # another branch; the side
    with pytest.raises(ConfigError, match="1 or even"):
        azimuth_intervals(3)


def test_the_edge_rule_extends_at_the_grids_ratio_as_far_as_a_setting_admits():
    assert extended_value((0.01, 0.02, 0.05), -1, "es_sigma") == 0.005
    assert extended_value((0.01, 0.02, 0.05), 1, "es_sigma") == 0.125
    assert extended_value((4, 8, 16), -1, "es_pairs") == 2
    assert extended_value((1, 4, 16), -1, "es_batch_size") is None  # below one goal per candidate
    assert extended_value((8, 16), -1, "pgpe_population") == 4
    assert extended_value((4, 6), -1, "pgpe_population") == 2  # rounded to an even population
    assert extended_value((4, 8), -1, "sep_cma_population") is None  # CMA needs 4
    assert neighbourhood((1, 2, 3, 4), 1) == (1, 2) and neighbourhood((1, 2, 3, 4), 3) == (2, 3, 4)


def fake_run(probe_success: list[float], selection: list[float] | None = None, step: int = 10) -> dict:
    """A run's result with one probe goal set of 10 goals, checkpoints every ``step`` evaluations."""
    n = len(probe_success)
    selection = probe_success if selection is None else selection
    probe = torch.zeros(n, 10, dtype=torch.bool)
    for i, s in enumerate(probe_success):
        probe[i, : round(10 * s)] = True
    curve = {
        "evaluations": [step * (i + 1) for i in range(n)],
        "training_evaluations": [step * i for i in range(n)],
        "seconds": [0.5 * (i + 1) for i in range(n)],
        "validation_success": list(selection),
        "validation_error": [0.01] * n,
        "train_loss": [1.0] * n,
        "probe_success": list(probe_success),
        "probe_error": [0.01] * n,
        "probed": [True] * n,
    }
    return {"curve": curve, "probe": probe}


def test_a_search_extends_an_edge_choice_and_stops_when_it_is_interior():
    scores = {0.01: 0.2, 0.02: 0.5, 0.05: 0.9, 0.125: 0.7}  # the best at the grid's top, then interior

    def results(settings: dict) -> list[dict]:
        return [fake_run([0.0, scores[settings["es_sigma"]]])] * 2

    search = Search("base", "es", "A", (("es_sigma", (0.01, 0.02, 0.05)),), {}, ("1x",), max_rounds=3)
    limits = {"1x": {"max_evaluations": 20}}
    search.update(results, limits)
    assert search.choices["1x"] == {"es_sigma": 0.05} and not search.done
    assert search.extensions == [{"round": 1, "setting": "es_sigma", "from": 0.05, "to": 0.125}]
    search.update(results, limits)
    assert search.done and search.choices["1x"] == {"es_sigma": 0.05}
    assert [row["settings"]["es_sigma"] for row in search.scores] == [0.01, 0.02, 0.05, 0.125]


def test_a_run_is_read_within_a_budget_by_its_selection_not_its_test_goals():
    run = fake_run([0.2, 0.9, 0.4, 0.6], selection=[0.1, 0.5, 0.8, 0.3])
    read = at_budget(run, max_evaluations=40)
    assert (read.selected, read.last) == (2, 3)  # selected on the selection goals, whatever the test says
    assert (read.success, read.last_success) == (0.4, 0.6)
    assert at_budget(run, max_evaluations=25).selected == 1  # within a shorter budget
    assert at_budget(run, max_seconds=1.0).last == 1 and not at_budget(run, max_seconds=1.0).exhausted
    run["curve"]["probed"][3] = False
    assert at_budget(run, max_evaluations=40).last == 2  # the latest probed checkpoint
    assert evaluations_to_reach(fake_run([0.2, 0.95, 0.4]), 0.9) == 20
    assert evaluations_to_reach(fake_run([0.2, 0.5]), 0.9) is None


def test_the_verdict_rule():
    def row(iqm: float, low: float, high: float) -> dict:
        return {"selected": {"iqm": iqm, "low": low, "high": high}}

    gradient = {"1x": row(0.95, 0.9, 1.0)}
    failing = {
        "gradient": gradient,
        **{m: {"10x": row(0.3, 0.2, 0.4)} for m in ("es", "sep_cma", "linear_cma", "pgpe")},
    }
    assert verdict(failing, "10x", constant=0.1)["outcome"] == "holds"
    failing["pgpe"]["10x"] = row(0.6, 0.5, 0.7)  # above 50 %, but 35 points below and apart
    assert verdict(failing, "10x", constant=0.1)["outcome"] == "holds as a gap"
    assert verdict(failing, "10x", constant=0.65)["outcome"] == "holds"  # at or below the best constant fails
    failing["pgpe"]["10x"] = row(0.85, 0.75, 0.92)
    result = verdict(failing, "10x", constant=0.1)
    assert result["outcome"] == "does not hold" and result["closest"] == "pgpe"
    assert result["closest_gap"] == pytest.approx(0.10)


def test_intervals_come_from_rlibles_stratified_bootstrap_over_seeds_and_goals():
    rng = np.random.default_rng(0)
    matrix = (rng.random((10, 64)) < 0.7).astype(float)
    stat = summary(matrix)
    assert stat["low"] <= stat["iqm"] <= stat["high"] and stat["high"] - stat["low"] > 0.02
    assert summary(np.ones((10, 8))) | {"per_seed": None} == {
        "iqm": 1.0,
        "low": 1.0,
        "high": 1.0,
        "mean": 1.0,
        "per_seed": None,
    }
    # seeds that disagree: the interval resamples whole seeds, so it carries their spread (a per-entry bootstrap of
    # seeds gave [47, 53] here)
    split = np.concatenate((np.ones((5, 128)), np.zeros((5, 128))))
    spread = summary(split)
    assert spread["iqm"] == 0.5 and spread["low"] < 0.25 and spread["high"] > 0.75


def test_the_gap_interval_resamples_seeds_of_both_methods():
    from learning.counterweight.study.analysis import gap_interval

    rng = np.random.default_rng(1)
    same = (rng.random((10, 64)) < 0.6).astype(float)
    gap, low, high = gap_interval(same, same)
    assert gap == 0.0 and low < 0.0 < high
    better = (rng.random((10, 64)) < 0.95).astype(float)
    gap, low, high = gap_interval(better, same)
    assert 0.25 < gap < 0.45 and 0.0 < low < gap < high


def test_sparse_probes_keep_every_selected_checkpoint_and_the_last():
    cfg = PRESETS["smoke"]
    problem = CounterweightProblem(assets.G1, cfg.problem)
    goals = problem.shoulder + torch.tensor([[0.38, -0.05, -0.1], [0.36, 0.02, -0.2]])
    policy = torch.nn.Linear(3, 18)
    torch.nn.init.zeros_(policy.weight)
    torch.nn.init.zeros_(policy.bias)
    policy.parameterisation = "r9"
    checkpoints = Checkpoints(problem, goals, 1, goals, probe_dense=2, probe_every=3)

    def step() -> float:
        with torch.no_grad():
            policy.bias.add_(0.01)
        return 0.0

    trained = train_with_checkpoints(policy, step, 1, checkpoints, max_evaluations=2 + 9 * 3)
    probed, curve = trained.curve.probed, trained.curve
    assert len(probed) == 10 and probed[0] and probed[1] and probed[3] and probed[-1]
    for within in range(1, len(probed) + 1):
        assert probed[at_budget(trained.to_dict(), max_evaluations=curve.evaluations[within - 1]).selected]
    assert all(math.isnan(s) for s, p in zip(curve.probe_success, probed, strict=True) if not p)


@pytest.mark.slow
def test_the_smoke_study_runs_reports_and_resumes_without_running_again(tmp_path, capsys):
    from learning.counterweight.study.__main__ import main

    out = tmp_path / "study"
    assert main(["--out", str(out), "--preset", "smoke"]) == 0
    study = json.loads((out / "study.json").read_text())
    report = json.loads((out / "report.json").read_text())
    cfg = study_preset("smoke")
    assert json.loads((out / "diagnostics.json").read_text()) == study["diagnostics"]
    assert set(study["runs"]) == {cell.name for cell in cfg.cells()}
    for cell, methods in study["runs"].items():
        assert set(methods) >= {"gradient", "es", "sep_cma", "linear_cma", "pgpe"}, cell
        for method, budgets in methods.items():
            assert set(budgets) == ({"1x"} if method.startswith("gradient") else {"1x", "equal_time", "10x"})
            assert all(len(seeds) == len(cfg.seeds) for seeds in budgets.values())
    assert "gradient_implicit" in study["runs"]["base"] and "gradient_implicit" not in study["runs"]["sectors-2"]
    stages = {(s["cell"], s["stage"]) for s in study["tuning"]}
    assert {("base", "A"), ("base", "B"), ("width-8", "level")} <= stages
    assert any(s["extensions"] for s in study["tuning"])  # the smoke grids' choices sit on edges
    text = (out / "report.md").read_text()
    for heading in ("## Verdict", "## The verdict per cell and budget", "## Along each axis", "## Tuning", "H2"):
        assert heading in text
    assert all((out / figure).is_file() for figure in report["figures"])
    verdicts = report["analysis"]["cells"]["base"]["verdicts"]["gradient"]
    assert set(verdicts) == {"1x", "equal_time", "10x"}
    runs = sorted((out / "jobs" / "runs").glob("*.pt"))
    stamps = {path: path.stat().st_mtime_ns for path in runs}
    capsys.readouterr()
    assert main(["--out", str(out), "--preset", "smoke", "--resume"]) == 0
    assert {path: path.stat().st_mtime_ns for path in runs} == stamps  # nothing ran again
    assert json.loads((out / "study.json").read_text())["choices"] == study["choices"]
    with pytest.raises(ConfigError, match="not empty"):
        main(["--out", str(out), "--preset", "smoke"])


def test_a_retuned_level_that_is_not_kept_passes_to_the_hardest_kept_level_of_its_axis():
    from learning.counterweight.study.protocol import retuned_levels

    cfg = study_preset("full")
    every = [cell.name for cell in cfg.cells()]
    assert retuned_levels(cfg, every) == ("width-256", "tolerance-2mm")
    kept = [name for name in every if name not in ("sectors-1", "sectors-2", "tolerance-2mm")]
    assert retuned_levels(cfg, kept) == ("width-256", "tolerance-5mm")
    assert retuned_levels(cfg, ["base", "width-16"]) == ()  # nothing harder than the base kept on either axis
