"""The counterweight experiment on the G1: the payload makes balance bind in front of and behind the robot, a
counterweight in opposite directions frees each, the R^9 policy holds the rest targets untrained and gets exact
gradients through the layer, every goal of a split needs a counterweight, the zero-order trainers keep their
budgets, the statistics and the verdict say what their numbers say, and the smoke run writes a complete report
through the command line."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

import assets
from kinematics.errors import CheckpointMismatchError, ConfigError
from kinematics.lie.r9 import singularity_margin
from learning.__main__ import main as learning_main
from learning.counterweight.checkpoints import load_policy
from learning.counterweight.config import PRESETS, CounterweightCfg, ExperimentCfg
from learning.counterweight.evaluation import METHODS
from learning.counterweight.experiment import checkpoint_path
from learning.counterweight.goals import (
    SPLITS,
    TEST_SPLITS,
    goal_points,
    make_splits,
    needs_counterweight,
    sample_split,
    spherical,
)
from learning.counterweight.methods import make_policy
from learning.counterweight.policy import ConstantPolicy, CounterweightPolicy, LinearPolicy
from learning.counterweight.problem import R9_BLOCKS, R9_SIZE, CounterweightProblem, bound_offsets
from learning.counterweight.report import render_markdown
from learning.counterweight.selection import Checkpoints, Curve, selected_index, with_checkpoints
from learning.counterweight.statistics import claim_verdict, curve_band, iqm, iqm_interval
from learning.counterweight.training import reach_loss, train_gradient
from learning.counterweight.zero_order import PGPE, LibraryCMA, OpenAIES, flat_weights, train_zero_order

FREE_HAND_X = R9_BLOCKS[-1][1].start  # the free hand's x in the R^9 offset


@pytest.fixture(scope="module")
def problem() -> CounterweightProblem:
    return CounterweightProblem(assets.G1, CounterweightCfg())


def _goal(problem, distance, azimuth, elevation):
    t = lambda v: torch.tensor([v], dtype=torch.float64)  # noqa: E731
    return goal_points(problem.shoulder, t(distance), t(azimuth), t(elevation)).float()


def _free_hand(x: float) -> torch.Tensor:
    offsets = torch.zeros(1, R9_SIZE)
    offsets[0, FREE_HAND_X] = x
    return offsets


def test_untrained_policies_hold_the_rest_targets_through_r9(problem):
    assert problem.tree.total_mass - problem.cfg.payload_kg == pytest.approx(33.3, abs=0.1)
    goals = _goal(problem, 0.38, 0.0, -0.2)
    for policy in (
        CounterweightPolicy(problem.shoulder),
        LinearPolicy(problem.shoulder),
        ConstantPolicy(problem.shoulder),
    ):
        assert torch.equal(policy(goals), torch.zeros(1, R9_SIZE))
        for name, T in problem.body_targets(policy(goals)).items():
            torch.testing.assert_close(T[0], problem.rest[name], atol=1e-6, rtol=0)
    assert CounterweightPolicy(problem.shoulder, parameterisation="axes")(goals).shape == (1, 7)
    with pytest.raises(ValueError, match="parameterisation"):
        CounterweightPolicy(problem.shoulder, parameterisation="euler")


def test_the_bound_keeps_every_block_short_and_gram_schmidt_off_its_singular_set():
    raw = 3.0 * torch.randn(4096, R9_SIZE, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    bounded = bound_offsets(raw, 0.45)
    assert bounded.unflatten(-1, (-1, 3)).norm(dim=-1).max() <= 0.45 + 1e-12  # tanh saturates at 1
    small = 1e-4 * raw[:8]
    torch.testing.assert_close(bound_offsets(small, 0.45), small, rtol=1e-5, atol=0)  # the identity near zero
    zero = torch.zeros(1, R9_SIZE, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(bound_offsets(zero, 0.45).sum(), zero)
    assert torch.isfinite(grad).all()
    # at the worst: a rotation's columns each moved 0.45 towards the other; they stay apart
    problem_r9 = torch.cat((torch.zeros(3), torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 1.0, 0.0])))
    worst = problem_r9.double() + torch.cat((torch.zeros(3), 0.45 * torch.tensor([-0.7071, 0.7071, 0.0]),
                                             0.45 * torch.tensor([0.7071, -0.7071, 0.0]))).double()  # fmt: skip
    assert singularity_margin(worst) > 0.1


def test_balance_binds_in_front_and_behind_and_opposite_counterweights_free_each(problem):
    for goal, counterweight in ((_goal(problem, 0.36, 0.0, -0.3), -0.3), (_goal(problem, 0.40, -3.0, 0.0), 0.2)):
        reach = problem.outcome(problem.solve(goal, None, "body"))
        assert not reach.success.item() and reach.hand_error.item() > 0.01
        assert reach.balance_margin.item() == pytest.approx(problem.cfg.margin, abs=1e-3)  # held on the margin
        assert needs_counterweight(problem, goal).item()
        freed = problem.outcome(problem.solve(goal, _free_hand(counterweight), "body"))
        assert freed.success.item(), freed.hand_error
        wrong_way = problem.outcome(problem.solve(goal, _free_hand(-counterweight), "body"))
        assert not wrong_way.success.item()


def test_the_reach_loss_gradient_reaches_the_r9_offsets_and_matches_finite_differences():
    problem = CounterweightProblem(assets.G1, CounterweightCfg(iterations=6), dtype=torch.float64)
    goals = _goal(problem, 0.39, 0.0, -0.2).double()
    offsets = 0.05 * torch.randn(1, R9_SIZE, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    offsets.requires_grad_(True)
    loss = reach_loss(problem, goals, offsets, "r9", 0.0).sum()
    (grad,) = torch.autograd.grad(loss, offsets)
    assert grad[0, FREE_HAND_X].abs() > 1e-6
    direction = torch.randn(1, R9_SIZE, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    eps = 1e-6
    with torch.no_grad():
        plus = reach_loss(problem, goals, offsets + eps * direction, "r9", 0.0).sum()
        minus = reach_loss(problem, goals, offsets - eps * direction, "r9", 0.0).sum()
    assert (grad * direction).sum().item() == pytest.approx(((plus - minus) / (2 * eps)).item(), rel=1e-4, abs=1e-10)


@pytest.mark.slow
def test_every_split_goal_needs_a_counterweight_half_in_each_sector_and_held_out_ones_lie_outside():
    cfg = PRESETS["smoke"]
    problem = CounterweightProblem(assets.G1, cfg.problem)
    a = make_splits(cfg, problem)
    again = sample_split(problem, torch.Generator().manual_seed(cfg.split_seed * 100), 8, cfg.goals, "train")
    assert set(a) == set(SPLITS) and torch.equal(a["train"].goals, again.goals)  # deterministic from the seed
    for name, split in a.items():
        assert needs_counterweight(problem, split.goals).all(), name
        assert split.candidates >= len(split.goals)
        d, azimuth, elevation = spherical(split.goals, problem.shoulder).T
        assert (elevation >= cfg.goals.elevation[0] - 1e-9).all() and (elevation <= cfg.goals.elevation[1] + 1e-9).all()
        if name == "test_between":
            lo, hi = cfg.goals.between_azimuth
            assert ((azimuth >= lo - 1e-9) & (azimuth <= hi + 1e-9)).all() and (split.sector == 2).all()
            continue
        assert (split.sector == 0).sum() == (split.sector == 1).sum()
        for index, (lo, hi) in enumerate(cfg.goals.sectors):
            inside = azimuth[split.sector == index]
            assert ((inside >= lo - 1e-9) & (inside <= hi + 1e-9)).all()
        far = name == "test_far"
        lo, hi = cfg.goals.far_distance if far else cfg.goals.distance
        assert (d >= lo - 1e-9).all() and (d <= hi + 1e-9).all()
    assert a["test_far"].goals.sub(problem.shoulder.double()).norm(dim=-1).min() >= cfg.goals.distance[1] - 1e-9


def test_zero_order_trainers_keep_their_budgets_selection_included_and_use_the_libraries():
    cfg = PRESETS["smoke"]
    problem = CounterweightProblem(assets.G1, cfg.problem)
    goals = problem.shoulder + torch.tensor([[0.38, -0.05, -0.1], [0.36, 0.02, -0.2]])
    probe = problem.shoulder + torch.tensor([[0.37, 0.0, -0.1], [0.35, 0.01, -0.15], [0.39, -0.02, -0.05]])
    for policy, make in (
        (LinearPolicy(problem.shoulder), lambda p: LibraryCMA(flat_weights(p), 0.1, 4, False, seed=0)),
        (LinearPolicy(problem.shoulder), lambda p: LibraryCMA(flat_weights(p), 0.1, 4, True, seed=0)),
        (CounterweightPolicy(problem.shoulder, 8), lambda p: OpenAIES(flat_weights(p), 2, 0.05, 0.01, seed=0)),
        (CounterweightPolicy(problem.shoulder, 8), lambda p: PGPE(flat_weights(p), 4, 0.05, 0.01)),
    ):
        optimiser = make(policy)
        checkpoints = Checkpoints(problem, goals, 8, probe)
        trained = train_zero_order(problem, policy, optimiser, goals, checkpoints, 2, 0.0, 0, max_evaluations=20)
        # a checkpoint at the start (2 selection solves), one generation of 4 x 2 goals, a checkpoint (2), and no
        # second generation: 12 + 8 + the final checkpoint's 2 would pass 20
        assert trained.curve.evaluations == [2, 12] and trained.curve.training_evaluations == [0, 8]
        assert trained.evaluations == 12 and len(trained.curve.probe_success) == 2
        assert trained.probe.shape == (2, 3) and trained.probe.dtype == torch.bool
        assert not torch.equal(flat_weights(policy), torch.zeros_like(flat_weights(policy)))  # it moved
        assert trained.last_state.keys() == trained.state.keys()
        for name, value in trained.last_state.items():  # the last iterate is the policy's final weights
            assert torch.equal(value, policy.state_dict()[name])
    assert type(LibraryCMA(torch.zeros(3), 0.1, None, True, 0).optimizer).__module__.startswith("cmaes")
    assert type(optimiser.state).__module__.startswith("evotorch")
    with pytest.raises(ValueError, match="exactly one budget"):
        train_zero_order(problem, policy, optimiser, goals, Checkpoints(problem, goals, 8), 2, 0.0, 0)
    with pytest.raises(ValueError, match="even population"):
        PGPE(torch.zeros(3), 5, 0.1, 0.01)
    timed = train_zero_order(
        problem, policy, optimiser, goals, Checkpoints(problem, goals, 8), 2, 0.0, 0, max_seconds=0.2
    )
    assert timed.seconds >= 0.2


def test_the_selected_checkpoint_is_the_best_on_selection_and_the_budget_counts_its_solves():
    curve = Curve(validation_success=[0.0, 0.5, 0.5, 0.25], validation_error=[0.1, 0.02, 0.01, 0.2])
    assert selected_index(curve, 4) == 2  # tie on success: the lower error
    assert selected_index(curve, 2) == 1  # within a shorter budget
    curve = Curve(validation_success=[0.5, 0.5], validation_error=[0.01, 0.01])
    assert selected_index(curve, 2) == 0  # a full tie: the earlier
    assert with_checkpoints(1536, 192, 32) == 1824  # the study's 1x: 48 steps of 32 and 9 checkpoints of 32
    cfg = PRESETS["smoke"]
    problem = CounterweightProblem(assets.G1, cfg.problem)
    goals = problem.shoulder + torch.tensor([[0.38, -0.05, -0.1], [0.36, 0.02, -0.2]])
    policy = CounterweightPolicy(problem.shoulder, 8)
    checkpoints = Checkpoints(problem, goals, 4)
    train_cfg = dataclasses.replace(cfg.train, steps=3, batch_size=2)
    trained = train_gradient(problem, policy, goals, checkpoints, train_cfg, 0)
    # 3 steps of 2 and checkpoints at 0, after 4 and at the end: 6 + 3 x 2
    assert trained.evaluations == with_checkpoints(6, 4, 2) == 12
    assert trained.curve.training_evaluations == [0, 4, 6]


def test_statistics_and_the_verdict_say_what_the_numbers_say():
    assert iqm([0.0, 0.5, 0.6, 0.7, 1.0]) == pytest.approx(0.6)
    low, high = iqm_interval([0.9, 0.92, 0.95, 0.97, 1.0])
    assert 0.9 <= low <= iqm([0.9, 0.92, 0.95, 0.97, 1.0]) <= high <= 1.0
    assert iqm_interval([1.0, 1.0, 1.0]) == (1.0, 1.0)

    def stat(values):
        lo, hi = iqm_interval(values)
        return {"success": {"iqm": iqm(values), "iqm_low": lo, "iqm_high": hi}}

    results = {"gradient": stat([0.95, 0.97, 1.0, 0.96, 0.98]), "far": stat([0.3, 0.35, 0.4, 0.32, 0.38])}
    assert claim_verdict(results, ["far"])["holds"]
    results["close"] = stat([0.9, 0.95, 0.99, 0.93, 0.97])
    verdict = claim_verdict(results, ["far", "close"])
    assert not verdict["holds"] and verdict["methods"]["far"]["holds"] and not verdict["methods"]["close"]["holds"]
    band = curve_band([[0, 10, 20], [0, 12, 24]], [[0, 50, 100], [0, 40, 80]], np.array([0.0, 11.0, 30.0]))
    assert band["mean"] == [0.0, 25.0, 90.0] and all(lo <= hi for lo, hi in zip(band["low"], band["high"], strict=True))


def test_config_round_trip_and_errors():
    for cfg in PRESETS.values():
        assert ExperimentCfg.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ConfigError):
        ExperimentCfg.from_dict({"preset": "x"})
    with pytest.raises(ValueError, match="unknown counterweight method"):
        make_policy("random_search", CounterweightProblem(assets.G1, PRESETS["smoke"].problem), PRESETS["smoke"])


@pytest.mark.slow
def test_the_smoke_run_writes_a_complete_report_through_the_command_line(tmp_path, capsys):
    run = tmp_path / "run"
    assert learning_main(["train", "--task", "counterweight", "--preset", "smoke", "--run", str(run)]) == 0
    report = json.loads((run / "report.json").read_text())
    assert report["task"] == "counterweight" and set(report["results"]) == set(TEST_SPLITS)
    for split in TEST_SPLITS:
        assert set(report["results"][split]) == set(METHODS)
    assert set(report["distribution"]["splits"]) == set(SPLITS)
    assert set(report["distribution"]["iid"]["properties"]) == {
        "reach_only <= 0.1", "no_balance >= 0.95", "best_constant <= 0.5", "per_goal >= 0.9"
    }  # fmt: skip
    assert set(report["verdict"]["methods"]) == {
        f"{m}_{b}" for m in ("es", "sep_cma", "linear_cma") for b in ("evaluations", "seconds")
    }
    assert set(report["tuning"]) == {"gradient", "es", "sep_cma", "linear_cma"}
    gradient = report["training"]["gradient"][0]
    for key, runs in report["training"].items():
        if key.endswith("_evaluations"):
            assert runs[0]["evaluations"] <= gradient["evaluations"]
        if key.endswith("_seconds"):
            assert runs[0]["seconds"] >= gradient["seconds"]
    assert (run / "report.md").read_text() == render_markdown(report)
    for figure in report["figures"]:
        assert (run / figure).stat().st_size > 10_000
    assert not math.isnan(report["results"]["test_iid"]["online"]["hand_error_median_mm"]["mean"])
    out = capsys.readouterr().out
    assert "Counterweight experiment" in out and "Verdict" in out and "run folder" in out
    assert learning_main(["report", "--run", str(run)]) == 0
    assert render_markdown(report) in capsys.readouterr().out
    policy, meta = load_policy(
        checkpoint_path(run, 0, "linear_cma_seconds"), CounterweightProblem(assets.G1, PRESETS["smoke"].problem)
    )
    assert isinstance(policy, LinearPolicy) and meta["key"] == "linear_cma_seconds"
    other = CounterweightProblem(assets.G1, CounterweightCfg(payload_kg=2.0, iterations=8))
    with pytest.raises(CheckpointMismatchError):
        load_policy(checkpoint_path(run, 0, "gradient"), other)


@pytest.mark.slow
def test_check_distribution_prints_the_properties(capsys, tmp_path):
    out = tmp_path / "distribution"
    assert learning_main(["check-distribution", "--task", "counterweight", "--preset", "smoke", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "need a counterweight" in printed and "Properties the task must keep" in printed
    saved = json.loads(out.with_suffix(".json").read_text())
    assert set(saved["distribution"]["splits"]) == set(SPLITS) and "properties" in saved["distribution"]["iid"]
