"""The counterweight experiment on the G1: the payload makes balance bind, a counterweight frees the reach,
gradients reach the policy through the whole-body layer, ES keeps its budget, and the smoke run writes a
complete report through the command line."""

from __future__ import annotations

import json
import math

import pytest
import torch

import assets
from kinematics.errors import CheckpointMismatchError, ConfigError
from learning.__main__ import main as learning_main
from learning.counterweight.checkpoints import load_policy
from learning.counterweight.config import PRESETS, CounterweightCfg, ExperimentCfg, TrainCfg
from learning.counterweight.evaluation import METHODS
from learning.counterweight.experiment import checkpoint_path
from learning.counterweight.goals import SPLITS, TEST_SPLITS, goal_points, make_splits
from learning.counterweight.policy import CounterweightPolicy
from learning.counterweight.problem import ACTIONS, CounterweightProblem
from learning.counterweight.report import render_markdown
from learning.counterweight.training import reach_loss, train_es


@pytest.fixture(scope="module")
def problem() -> CounterweightProblem:
    return CounterweightProblem(assets.G1, CounterweightCfg(iterations=24))


def _goal(problem, distance, azimuth=0.0, elevation=-0.2):
    t = lambda v: torch.tensor([v], dtype=torch.float64)  # noqa: E731
    return goal_points(problem.shoulder, t(distance), t(azimuth), t(elevation)).float()


def test_the_payload_is_in_the_tree_and_an_untrained_policy_holds_the_rest_targets(problem):
    plain = problem.tree.total_mass - problem.cfg.payload_kg
    assert plain == pytest.approx(33.3, abs=0.1)
    policy = CounterweightPolicy(problem.shoulder)
    goals = _goal(problem, 0.38)
    assert torch.equal(policy(goals), torch.zeros(1, len(ACTIONS)))
    rest = problem.body_targets(policy(goals))
    for name, T in rest.items():
        torch.testing.assert_close(T[0], problem.rest[name], atol=1e-6, rtol=0)


def test_a_far_goal_fails_because_of_balance_and_a_counterweight_frees_it(problem):
    goals = _goal(problem, 0.39)
    reach = problem.outcome(problem.solve(goals, None, "body"))
    assert not reach.success.item() and reach.hand_error.item() > 0.01
    assert reach.balance_margin.item() == pytest.approx(problem.cfg.margin, abs=1e-3)  # held on the margin
    free_of_balance = problem.outcome(problem.solve(goals, None, "no_balance"))
    assert free_of_balance.reached.item() and not free_of_balance.balanced.item()
    back = torch.zeros(1, len(ACTIONS))
    back[0, 0] = -1.0  # the free hand 0.35 m back
    counterweight = problem.outcome(problem.solve(goals, back, "body"))
    assert counterweight.success.item(), counterweight.hand_error
    # the body tasks are above the reach: at rest targets the pelvis stays where it stands
    result = problem.solve(goals, None, "body")
    pelvis = problem.tree.frame_pose(result.q, assets.G1.frames["pelvis"])
    torch.testing.assert_close(pelvis[0], problem.rest["pelvis"], atol=2e-3, rtol=0)


def test_the_reach_loss_gradient_reaches_the_actions_and_matches_finite_differences():
    problem = CounterweightProblem(assets.G1, CounterweightCfg(iterations=6), dtype=torch.float64)
    goals = _goal(problem, 0.39).double()
    actions = torch.full((1, len(ACTIONS)), -0.2, dtype=torch.float64, requires_grad=True)
    loss = reach_loss(problem, goals, actions, 0.0).sum()
    (grad,) = torch.autograd.grad(loss, actions)
    assert grad.abs().max() > 1e-6
    direction = torch.randn(1, len(ACTIONS), dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    eps = 1e-5
    with torch.no_grad():
        plus = reach_loss(problem, goals, actions + eps * direction, 0.0).sum()
        minus = reach_loss(problem, goals, actions - eps * direction, 0.0).sum()
    assert (grad * direction).sum().item() == pytest.approx(((plus - minus) / (2 * eps)).item(), rel=1e-4, abs=1e-9)


def test_es_spends_at_most_its_budget(problem):
    goals = make_splits(PRESETS["smoke"], problem.shoulder)
    cfg = TrainCfg(es_pairs=2, es_batch_size=2, validate_every=1, batch_size=4)
    trained = train_es(problem, goals["train"], goals["validation"], cfg, seed=0, max_evaluations=20)
    assert trained.evaluations == 16  # two estimates of 2 * 2 * 2; a third would pass 20
    assert trained.curve.evaluations[0] == 0 and trained.curve.evaluations[-1] == 16
    with pytest.raises(ValueError):
        train_es(problem, goals["train"], goals["validation"], cfg, seed=0)


def test_splits_are_deterministic_and_the_held_out_ones_lie_outside_the_training_region(problem):
    cfg = PRESETS["full"]
    a, b = make_splits(cfg, problem.shoulder), make_splits(cfg, problem.shoulder)
    assert set(a) == set(SPLITS) and all(torch.equal(a[k], b[k]) for k in a)
    offset = {k: v - problem.shoulder.double() for k, v in a.items()}
    distance = {k: v.norm(dim=-1) for k, v in offset.items()}
    elevation = {k: torch.asin(v[:, 2] / distance[k]) for k, v in offset.items()}
    assert distance["train"].max() <= cfg.goals.distance[1] + 1e-9
    assert distance["test_far"].min() >= cfg.goals.distance[1] - 1e-9
    assert elevation["train"].max() <= cfg.goals.elevation[1] + 1e-9
    assert elevation["test_high"].min() >= cfg.goals.elevation[1] - 1e-9


def test_config_round_trip_and_errors():
    cfg = PRESETS["full"]
    assert ExperimentCfg.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ConfigError):
        ExperimentCfg.from_dict({"preset": "x"})


def test_the_smoke_run_writes_a_complete_report_through_the_command_line(tmp_path, capsys):
    run = tmp_path / "run"
    assert learning_main(["train", "--task", "counterweight", "--preset", "smoke", "--run", str(run)]) == 0
    report = json.loads((run / "report.json").read_text())
    assert report["task"] == "counterweight" and set(report["results"]) == set(TEST_SPLITS)
    for split in TEST_SPLITS:
        assert set(report["results"][split]) == set(METHODS)
        assert set(report["distribution"][split]) == {"goals", "reach_only", "no_balance", "fails_because_of_balance"}
    assert len(report["results"]["test_iid"]["gradient"]["success"]["per_seed"]) == len(PRESETS["smoke"].train.seeds)
    budget = {method: runs[0]["evaluations"] for method, runs in report["training"].items()}
    assert budget["es_evaluations"] <= budget["gradient"]
    assert (run / "report.md").read_text() == render_markdown(report)
    for figure in report["figures"]:
        assert (run / figure).stat().st_size > 10_000
    assert not math.isnan(report["results"]["test_iid"]["online"]["hand_error_median_mm"]["mean"])
    out = capsys.readouterr().out
    assert "Counterweight experiment" in out and "run folder" in out
    # the report can be printed again and re-made from the run folder
    assert learning_main(["report", "--run", str(run)]) == 0
    assert render_markdown(report) in capsys.readouterr().out
    # checkpoints refuse another payload
    other = CounterweightProblem(assets.G1, CounterweightCfg(payload_kg=2.0, iterations=8))
    with pytest.raises(CheckpointMismatchError):
        load_policy(checkpoint_path(run, 0, "gradient"), other)


def test_check_distribution_prints_the_fractions(capsys, tmp_path):
    out = tmp_path / "distribution"
    assert learning_main(["check-distribution", "--task", "counterweight", "--preset", "smoke", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "fails because of balance" in printed
    saved = json.loads(out.with_suffix(".json").read_text())
    assert set(saved["splits"]) == set(TEST_SPLITS)
