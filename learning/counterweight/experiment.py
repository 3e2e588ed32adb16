"""The counterweight experiment end to end: splits, the distribution check, training per seed (gradient, ES at
equal layer evaluations, ES at equal wall time), evaluation of every method, report and figures.

Run folder layout::

    config.json  splits.pt  distribution.json  training.json
    checkpoints/seed<k>/{gradient,es_evaluations,es_time}.pt
    report.json  report.md  figures/*.png
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import torch

import assets
from kinematics.benchmark.provenance import provenance
from kinematics.errors import ConfigError
from learning.counterweight.checkpoints import load_policy, save_policy
from learning.counterweight.config import ExperimentCfg
from learning.counterweight.distribution import distribution_check
from learning.counterweight.evaluation import POLICY_METHODS, evaluate_splits, strategy
from learning.counterweight.figures import write_figures
from learning.counterweight.goals import TEST_SPLITS, load_splits, make_splits, save_splits
from learning.counterweight.problem import CounterweightProblem
from learning.counterweight.report import render_markdown, summarize
from learning.counterweight.training import train_es, train_gradient
from learning.io import atomic_write_json, atomic_write_text


def build_problem(cfg: ExperimentCfg) -> CounterweightProblem:
    if cfg.problem.robot not in assets.ROBOTS:
        raise ConfigError(f"unknown robot {cfg.problem.robot!r}; known: {sorted(assets.ROBOTS)}")
    return CounterweightProblem(assets.ROBOTS[cfg.problem.robot], cfg.problem)


def checkpoint_path(run_dir: Path, seed: int, method: str) -> Path:
    return Path(run_dir) / "checkpoints" / f"seed{seed}" / f"{method}.pt"


def load_config(run_dir: Path) -> ExperimentCfg:
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise ConfigError(f"{run_dir} is not a counterweight run folder: it has no config.json")
    return ExperimentCfg.from_dict(json.loads(path.read_text()))


def train_run(cfg: ExperimentCfg, run_dir: Path, log: Callable[[str], None] = print) -> dict:
    """Splits, the distribution check (before any training), and every trainer per seed."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(run_dir / "config.json", cfg.to_dict())
    problem = build_problem(cfg)
    splits = make_splits(cfg, problem.shoulder)
    save_splits(splits, run_dir / "splits.pt")
    check = distribution_check(problem, {name: splits[name] for name in TEST_SPLITS})
    atomic_write_json(run_dir / "distribution.json", check)
    for split, row in check.items():
        log(f"{split}: reach only {row['reach_only']:.2f}, without balance {row['no_balance']:.2f}, "
            f"fails because of balance {row['fails_because_of_balance']:.2f}")  # fmt: skip
    started = time.perf_counter()
    training: dict[str, list[dict]] = {method: [] for method in POLICY_METHODS}
    train, validation = splits["train"], splits["validation"]
    for seed in cfg.train.seeds:
        runs = {"gradient": train_gradient(problem, train, validation, cfg.train, seed, log)}
        budget = runs["gradient"]
        runs["es_evaluations"] = train_es(
            problem, train, validation, cfg.train, seed, max_evaluations=budget.evaluations, log=log
        )
        runs["es_time"] = train_es(problem, train, validation, cfg.train, seed, max_seconds=budget.seconds, log=log)
        for method, trained in runs.items():
            save_policy(checkpoint_path(run_dir, seed, method), method, seed, cfg, problem, trained.state)
            training[method].append(
                {"evaluations": trained.evaluations, "seconds": trained.seconds, "curve": trained.curve.to_dict()}
            )
    atomic_write_json(run_dir / "training.json", {"runs": training, "seconds": time.perf_counter() - started})
    return training


def evaluate_run(run_dir: Path, command: str, log: Callable[[str], None] = print) -> dict:
    """Every method on every test split; report.json, report.md and figures."""
    run_dir = Path(run_dir)
    cfg = load_config(run_dir)
    problem = build_problem(cfg)
    splits = load_splits(run_dir / "splits.pt")
    training = json.loads((run_dir / "training.json").read_text())
    policies = {
        method: [load_policy(checkpoint_path(run_dir, seed, method), problem)[0] for seed in cfg.train.seeds]
        for method in POLICY_METHODS
    }
    tests = {name: splits[name] for name in TEST_SPLITS}
    rows = evaluate_splits(problem, cfg, tests, policies, log)
    learned = policies["gradient"][0]
    shown = torch.cat([splits["test_iid"], splits["test_far"]])
    dtype = problem.tree.joint_lower.dtype
    iid = splits["test_iid"].to(dtype)
    order = (iid - problem.shoulder).norm(dim=-1).argsort()
    strip_goals = iid[order[torch.linspace(0, len(iid) - 1, min(4, len(iid))).round().long()]]
    with torch.no_grad():
        poses = {
            "reach_only": problem.solve(strip_goals, None, "body").q,
            "gradient": problem.solve(strip_goals, learned(strip_goals), "body").q,
        }
    report = {
        "task": "counterweight",
        "preset": cfg.preset,
        "config": cfg.to_dict(),
        "distribution": json.loads((run_dir / "distribution.json").read_text()),
        "results": summarize(rows),
        "training": training["runs"],
        "train_seconds": training["seconds"],
        "strategy": strategy(problem, learned, shown),
        "torch_threads": torch.get_num_threads(),
        "provenance": provenance(command),
    }
    report["figures"] = write_figures(report, problem, strip_goals, poses, run_dir / "figures")
    atomic_write_json(run_dir / "report.json", report)
    atomic_write_text(run_dir / "report.md", render_markdown(report))
    return report
