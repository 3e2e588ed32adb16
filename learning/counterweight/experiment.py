"""The counterweight experiment end to end: splits, the task's diagnostics, the training protocol (tuning, seeds,
equal evaluations, equal wall time), evaluation of every method, report and figures.

Run folder layout::

    config.json  splits.pt  distribution.json  training.json
    jobs/<phase>/<job>.pt  (each job's result, written as it arrives; what --resume reads)
    checkpoints/constant.pt  checkpoints/seed<k>/<method>.pt (the selected checkpoint), <method>_last.pt
    report.json  report.md  figures/*.png
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import torch

import assets
from kinematics.errors import ConfigError
from learning.common.executor import Executor
from learning.common.executors import make_executor
from learning.common.io import atomic_write_json, atomic_write_text
from learning.common.provenance import provenance
from learning.common.run_folder import RunFolder
from learning.counterweight.checkpoints import load_policy, save_policy
from learning.counterweight.config import ExperimentCfg
from learning.counterweight.distribution import distribution_check
from learning.counterweight.evaluation import POLICY_METHODS, body_response, evaluate_splits, last_key, per_goal_chooser
from learning.counterweight.figures import write_figures
from learning.counterweight.goals import TEST_SPLITS, load_splits, make_splits, save_splits, spherical
from learning.counterweight.methods import ZERO_ORDER_METHODS
from learning.counterweight.problem import CounterweightProblem
from learning.counterweight.protocol import run_protocol
from learning.counterweight.report import ZERO_ORDER_ROWS, distribution_table, render_markdown, summarize
from learning.counterweight.statistics import claim_verdict


def build_problem(cfg: ExperimentCfg) -> CounterweightProblem:
    if cfg.problem.robot not in assets.ROBOTS:
        raise ConfigError(f"unknown robot {cfg.problem.robot!r}; known: {sorted(assets.ROBOTS)}")
    return CounterweightProblem(assets.ROBOTS[cfg.problem.robot], cfg.problem)


def checkpoint_path(run_dir: Path, seed: int, key: str) -> Path:
    return Path(run_dir) / "checkpoints" / f"seed{seed}" / f"{key}.pt"


def load_config(run_dir: Path) -> ExperimentCfg:
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise ConfigError(f"{run_dir} is not a counterweight run folder: it has no config.json")
    return ExperimentCfg.from_dict(json.loads(path.read_text()))


def run_key(method: str, budget: str) -> str:
    """The report's name of a run: the method, and for a zero-order one its budget."""
    return f"{method}_{budget}" if method in ZERO_ORDER_METHODS else method


def train_run(
    cfg: ExperimentCfg,
    run_dir: Path,
    log: Callable[[str], None] = print,
    executor: Executor | None = None,
    resume: bool = False,
) -> dict:
    """Splits, the diagnostics (before any training of a policy), and the protocol on ``executor`` (default: the
    local pool of ``cfg.workers``). A new run needs an empty folder; ``resume`` continues one of the same
    configuration, reusing what it had written (splits, diagnostics, every finished job)."""
    folder = RunFolder(run_dir, cfg.to_dict(), resume)
    run_dir = folder.path
    problem = build_problem(cfg)
    splits_path = run_dir / "splits.pt"
    if resume and splits_path.is_file():
        splits = load_splits(splits_path)
    else:
        splits = make_splits(cfg, problem)
        save_splits(splits, splits_path)
    distribution_path, constant_path = run_dir / "distribution.json", run_dir / "checkpoints" / "constant.pt"
    if resume and distribution_path.is_file() and constant_path.is_file():
        check = json.loads(distribution_path.read_text())
    else:
        check, constant = distribution_check(problem, cfg, splits, log)
        save_policy(constant_path, "constant", "constant", 0, cfg, problem, constant)
        atomic_write_json(distribution_path, check)  # last: its presence says the diagnostics are complete
    log(distribution_table(check))
    started = time.perf_counter()
    own_executor = executor is None
    executor = executor or make_executor("local", cfg.workers, log=log)
    try:
        goals = {name: splits[name].goals for name in ("train", "validation", "tuning")}
        protocol = run_protocol(cfg, goals, executor, folder, log)
    finally:
        if own_executor:
            executor.close()
    runs: dict[str, list[dict]] = {}
    for job, trained in protocol["runs"]:
        key = run_key(job.method, job.budget)
        save_policy(checkpoint_path(run_dir, job.seed, key), job.method, key, job.seed, cfg, problem, trained.state)
        last = last_key(key)
        save_policy(
            checkpoint_path(run_dir, job.seed, last), job.method, last, job.seed, cfg, problem, trained.last_state
        )
        runs.setdefault(key, []).append(
            {
                "seed": job.seed,
                "budget": job.budget,
                "settings": dict(job.settings),
                "evaluations": trained.evaluations,
                "seconds": trained.seconds,
                "selected": trained.selected,
                "curve": trained.curve.to_dict(),
            }
        )
    training = {
        "tuning": protocol["tuning"],
        "chosen": protocol["chosen"],
        "runs": runs,
        "seconds": time.perf_counter() - started,
        "executor": executor.name,
        "resumed": resume,
    }
    atomic_write_json(run_dir / "training.json", training)
    return training


def _strip_goals(split, problem: CounterweightProblem, per_sector: int = 2) -> torch.Tensor:
    """A few goals of each sector, nearest to farthest."""
    dtype = problem.tree.joint_lower.dtype
    picked = []
    for sector in (0, 1):
        goals = split.goals[split.sector == sector].to(dtype)
        order = (goals - problem.shoulder).norm(dim=-1).argsort()
        picked.append(goals[order[torch.linspace(0, len(goals) - 1, min(per_sector, len(goals))).round().long()]])
    return torch.cat(picked)


def evaluate_run(run_dir: Path, command: str, log: Callable[[str], None] = print) -> dict:
    """Every method on every test split; report.json, report.md and figures."""
    run_dir = Path(run_dir)
    cfg = load_config(run_dir)
    problem = build_problem(cfg)
    splits = load_splits(run_dir / "splits.pt")
    training = json.loads((run_dir / "training.json").read_text())
    policies = {
        key: [load_policy(checkpoint_path(run_dir, seed, key), problem)[0] for seed in cfg.seeds]
        for key in (*POLICY_METHODS, *map(last_key, POLICY_METHODS))
    }
    policies["constant"] = [load_policy(run_dir / "checkpoints" / "constant.pt", problem)[0]]
    rows = evaluate_splits(problem, cfg, {name: splits[name] for name in TEST_SPLITS}, policies, log)
    results = summarize(rows)
    dtype = problem.tree.joint_lower.dtype
    iid = splits["test_iid"]
    shown = iid.goals[: cfg.baselines.online_goals].to(dtype)
    learned = policies["gradient"][0]
    with torch.no_grad():
        learned_outputs = learned(shown)
    optimum = per_goal_chooser(problem, cfg)(shown)
    strategy = {
        "goal": spherical(shown, problem.shoulder).tolist(),
        "sector": iid.sector[: len(shown)].tolist(),
        "policy": body_response(problem, shown, learned_outputs),
        "per_goal": body_response(problem, shown, optimum),
    }
    strip_goals = _strip_goals(iid, problem)
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
        "results": results,
        "verdict": claim_verdict(results["test_iid"], list(ZERO_ORDER_ROWS)),
        "tuning": training["tuning"],
        "chosen": training["chosen"],
        "training": training["runs"],
        "train_seconds": training["seconds"],
        "train_resumed": training.get("resumed", False),
        "executor": training.get("executor", "local"),
        "strategy": strategy,
        "torch_threads": torch.get_num_threads(),
        "provenance": provenance(command),
    }
    report["figures"] = write_figures(report, problem, strip_goals, poses, run_dir / "figures")
    atomic_write_json(run_dir / "report.json", report)
    atomic_write_text(run_dir / "report.md", render_markdown(report))
    return report
