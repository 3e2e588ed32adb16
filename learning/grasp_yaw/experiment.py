"""The grasp-yaw experiment end to end: splits, teacher labels, training per seed, evaluation, report.

Run folder layout::

    config.json  splits.pt  teacher_labels.pt
    checkpoints/seed<k>/best.pt (IK-trained)  shared_constant.pt  teacher_supervised.pt
    report.json  report.md  figures/*.png
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm import tqdm

from kinematics.errors import ConfigError
from learning.common.io import atomic_torch_save, atomic_write_json, atomic_write_text
from learning.common.panda import franka_kinematics
from learning.common.provenance import provenance
from learning.grasp_yaw.baselines import ik_layer, teacher
from learning.grasp_yaw.checkpoints import load_checkpoint
from learning.grasp_yaw.config import ExperimentCfg
from learning.grasp_yaw.evaluation import (
    METHODS,
    eval_layer,
    measure_latency,
    policy_chooser,
    search_choosers,
    solve_choice,
)
from learning.grasp_yaw.figures import write_figures
from learning.grasp_yaw.report import render_markdown, summarize
from learning.grasp_yaw.scoring import GRID_METRICS, METRICS, RowMetrics, score_yaws
from learning.grasp_yaw.seed_run import load_seed_run
from learning.grasp_yaw.splits import TEST_SPLITS, load_splits, make_splits, save_splits
from learning.grasp_yaw.task import failure_penalty
from learning.grasp_yaw.training import TRAINED_METHODS, Trainer

EVAL_SPLITS = ("validation", *TEST_SPLITS)


def checkpoint_path(run_dir: Path, seed: int, method: str) -> Path:
    name = "best.pt" if method == "ik_trained" else f"{method}.pt"
    return run_dir / "checkpoints" / f"seed{seed}" / name


def load_config(run_dir: Path) -> ExperimentCfg:
    path = run_dir / "config.json"
    if not path.is_file():
        raise ConfigError(
            f"{run_dir} is not a run folder: it has no config.json (run `python -m learning train` first)"
        )
    return ExperimentCfg.from_dict(json.loads(path.read_text()))


def label_teacher(
    cfg: ExperimentCfg,
    kinematics,
    goals,
    progress: Callable[[float], None] | None = None,
    chunk: int | None = None,
) -> tuple[torch.Tensor, dict]:
    """Teacher yaw labels for ``goals`` and what they cost (IK solves, seconds). With ``chunk``, the goals are
    labelled ``chunk`` at a time (every goal's search is independent of the others) and ``progress`` gets the
    fraction done after each."""
    b = cfg.baselines
    ik, penalty = ik_layer(kinematics, b.teacher_ik_iterations), failure_penalty(kinematics)
    start = time.perf_counter()
    step = chunk or len(goals)
    yaws, solves = [], 0
    for first in range(0, len(goals), step):
        part = goals.subset(slice(first, first + step))
        result = teacher(ik, part.p, part.q0, b.teacher_yaws, b.teacher_refine_yaws, cfg.weights, penalty)
        yaws.append(result.yaw)
        solves += result.ik_solves
        if progress is not None:
            progress(min(1.0, (first + step) / len(goals)))
    seconds = time.perf_counter() - start
    return torch.cat(yaws), {
        "goals": len(goals),
        "ik_solves": solves,
        "ik_iterations": b.teacher_ik_iterations,
        "seconds": seconds,
    }


def train_run(cfg: ExperimentCfg, run_dir: Path, show_progress: bool = True) -> dict:
    """Make the splits, label the training goals with the teacher, and train every trained method per seed."""
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(run_dir / "config.json", cfg.to_dict())
    kinematics = franka_kinematics(cfg.device)
    splits = make_splits(cfg, kinematics)
    save_splits(splits, run_dir / "splits.pt")
    splits = {name: s.to(kinematics.device, kinematics.dtype) for name, s in splits.items()}
    labels, label_cost = label_teacher(cfg, kinematics, splits["train"])
    atomic_torch_save({"labels": labels, "cost": label_cost}, run_dir / "teacher_labels.pt")
    histories: dict[str, dict[int, dict]] = {m: {} for m in TRAINED_METHODS}
    total = sum(Trainer.steps_for(m, cfg) or 0 for m in TRAINED_METHODS) * len(cfg.train.seeds)
    started = time.perf_counter()
    with tqdm(total=total, desc="training", unit="step", disable=not show_progress) as bar:
        for seed in cfg.train.seeds:
            for method in TRAINED_METHODS:
                # The equal-wall-time zero-order trainer gets the seconds the one-yaw IK-trained one took.
                budget = histories["ik_trained_one_yaw"][seed]["seconds"] if method == "zero_order_wall_time" else None
                trainer = Trainer(
                    method, cfg, kinematics, splits["train"], splits["validation"], seed, labels, time_budget=budget
                )
                bar.set_postfix(method=method, seed=seed)
                counted = Trainer.steps_for(method, cfg) is not None  # the bar counts the step-budgeted trainers
                history = trainer.run(
                    checkpoint_path(run_dir, seed, method), progress=(lambda _: bar.update(1)) if counted else None
                )
                histories[method][seed] = history.to_dict()
    atomic_write_json(
        run_dir / "training.json",
        {"histories": histories, "label_cost": label_cost, "train_seconds": time.perf_counter() - started},
    )
    return histories


def evaluate_run(run_dir: Path, show_progress: bool = True, command: str = "python -m learning evaluate") -> dict:
    """Evaluate every method on every split, measure latency, write report.json, report.md and figures;
    ``command`` (what the user typed) goes into the report's provenance with the commit and the machine."""
    cfg = load_config(run_dir)
    kinematics = franka_kinematics(cfg.device)
    splits = {n: s.to(kinematics.device, kinematics.dtype) for n, s in load_splits(run_dir / "splits.pt").items()}
    training = json.loads((run_dir / "training.json").read_text())
    eval_ik, penalty = eval_layer(cfg, kinematics), failure_penalty(kinematics)
    choosers = {name: [chooser] for name, chooser in search_choosers(cfg, kinematics).items()}
    for method in TRAINED_METHODS:
        choosers[method] = [
            policy_chooser(load_checkpoint(checkpoint_path(run_dir, seed, method), kinematics)[0])
            for seed in cfg.train.seeds
        ]
    rows: dict[str, dict[str, list[dict]]] = {split: {m: [] for m in METHODS} for split in EVAL_SPLITS}
    yaws: dict[str, torch.Tensor] = {}
    # The grid first: every method's paired measures are taken against its answers on the same goals.
    order = ("angular_grid", *(m for m in METHODS if m != "angular_grid"))
    jobs = [(split, m) for split in EVAL_SPLITS for m in order]
    grid: dict[str, RowMetrics] = {}
    for split, method in tqdm(jobs, desc="evaluating", disable=not show_progress):
        for k, chooser in enumerate(choosers[method]):
            yaw, _ = solve_choice(chooser, splits[split], eval_ik)
            scored = score_yaws(eval_ik, splits[split], yaw, cfg.weights, penalty)
            grid.setdefault(split, scored)
            rows[split][method].append({**scored.means(), **scored.against_grid(grid[split])})
            if split == "test_iid" and k == 0:
                yaws[method] = yaw.detach().cpu()
    latency = {
        m: measure_latency(choosers[m][0], splits["test_iid"], eval_ik, cfg.latency_batch, cfg.latency_singles)
        for m in tqdm(METHODS, desc="latency", disable=not show_progress)
    }
    report = {
        "preset": cfg.preset,
        "split_sizes": {n: len(s) for n, s in splits.items()},
        "seeds": list(cfg.train.seeds),
        "teacher_labels": training["label_cost"],
        "train_seconds": training["train_seconds"],
        "results": summarize(rows, (*METRICS, *GRID_METRICS)),
        "latency": latency,
        "training": training["histories"],
        "torch_threads": torch.get_num_threads(),
        "provenance": provenance(command),
    }
    if cfg.preset == "reference":
        report["seed_run"] = load_seed_run()
    atomic_write_json(run_dir / "report.json", report)
    atomic_write_text(run_dir / "report.md", render_markdown(report))
    write_figures(report, yaws, run_dir / "figures")
    return report
