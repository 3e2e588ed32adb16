"""The grasp-yaw experiment end to end: splits, teacher labels, training per seed, evaluation, report.

Run folder layout::

    config.json  splits.pt  teacher_labels.pt
    jobs/<phase>/<job>.pt  (each trained method's result, written as it arrives; what --resume reads)
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
from learning.common.executor import Executor
from learning.common.executors import make_executor
from learning.common.io import atomic_torch_save, atomic_write_json, atomic_write_text
from learning.common.jobs import GridTask, Job
from learning.common.panda import franka_kinematics
from learning.common.provenance import provenance
from learning.common.run_folder import RunFolder, config_fingerprint
from learning.grasp_yaw.baselines import ik_layer, teacher
from learning.grasp_yaw.checkpoints import load_checkpoint, save_checkpoint
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


def _build(context: tuple) -> dict:
    cfg, train, validation, labels = context
    kinematics = franka_kinematics(cfg.device)
    move = {"device": kinematics.device, "dtype": kinematics.dtype}
    return {
        "cfg": cfg,
        "kinematics": kinematics,
        "train": train.to(**move),
        "validation": validation.to(**move),
        "labels": labels.to(**move),
    }


def _run(worker: dict, job: Job) -> dict:
    trainer = Trainer(
        job.method,
        worker["cfg"],
        worker["kinematics"],
        worker["train"],
        worker["validation"],
        job.seed,
        worker["labels"],
        time_budget=job.max_seconds,
    )
    trainer.run()
    return trainer.result()


def grasp_yaw_task(cfg: ExperimentCfg, splits: dict, labels: torch.Tensor) -> GridTask:
    """The grid task every trained method's job runs on: the Franka's kinematics, the training and validation
    goals and the teacher's labels (on the CPU; each worker moves them to ``cfg.device``)."""
    train, validation = (splits[name].to("cpu", splits[name].p.dtype) for name in ("train", "validation"))
    context = (cfg, train, validation, labels.cpu())
    return GridTask("grasp-yaw", _build, _run, context, config_fingerprint(cfg.to_dict()), device=cfg.device)


def train_run(
    cfg: ExperimentCfg,
    run_dir: Path,
    show_progress: bool = True,
    executor: Executor | None = None,
    resume: bool = False,
) -> dict:
    """Make the splits, label the training goals with the teacher, and train every trained method per seed on
    ``executor`` (default: here, one job after the other): first every method at its step budget, then the
    equal-wall-time zero-order trainer for the seconds the one-yaw IK-trained predictor of its seed took. A new run
    needs an empty folder; ``resume`` continues one of the same configuration (splits, labels, finished jobs)."""
    folder = RunFolder(run_dir, cfg.to_dict(), resume)
    run_dir = folder.path
    kinematics = franka_kinematics(cfg.device)
    if resume and (run_dir / "splits.pt").is_file():
        splits = load_splits(run_dir / "splits.pt")
    else:
        splits = make_splits(cfg, kinematics)
        save_splits(splits, run_dir / "splits.pt")
    splits = {name: s.to(kinematics.device, kinematics.dtype) for name, s in splits.items()}
    labels_path = run_dir / "teacher_labels.pt"
    if resume and labels_path.is_file():
        saved = torch.load(labels_path, map_location=kinematics.device, weights_only=True)
        labels, label_cost = saved["labels"], saved["cost"]
    else:
        labels, label_cost = label_teacher(cfg, kinematics, splits["train"])
        atomic_torch_save({"labels": labels, "cost": label_cost}, labels_path)
    task = grasp_yaw_task(cfg, splits, labels)
    stepped = [m for m in TRAINED_METHODS if m != "zero_order_wall_time"]
    step_jobs = [Job(method, (), seed, config=task.config) for seed in cfg.train.seeds for method in stepped]
    started = time.perf_counter()
    own_executor = executor is None
    executor = executor or make_executor("local", 1, progress=show_progress)
    try:
        results = executor.map(task, step_jobs, folder.results("training"), "training")
        finished = dict(zip(step_jobs, results, strict=True))
        # The equal-wall-time zero-order trainer gets the seconds the one-yaw IK-trained one took.
        time_jobs = [
            Job(
                "zero_order_wall_time",
                (),
                seed,
                finished[Job("ik_trained_one_yaw", (), seed, config=task.config)]["history"]["seconds"],
                config=task.config,
            )
            for seed in cfg.train.seeds
        ]
        timed = executor.map(task, time_jobs, folder.results("equal_time"), "equal_time")
        finished.update(zip(time_jobs, timed, strict=True))
    finally:
        if own_executor:
            executor.close()
    histories: dict[str, dict[int, dict]] = {m: {} for m in TRAINED_METHODS}
    for job, result in finished.items():
        save_checkpoint(
            checkpoint_path(run_dir, job.seed, job.method),
            job.method,
            job.seed,
            cfg,
            kinematics,
            result["state_dict"],
            result["history"],
            result["validation_states"],
        )
        histories[job.method][job.seed] = result["history"]
    histories = {m: {seed: histories[m][seed] for seed in cfg.train.seeds} for m in TRAINED_METHODS}
    atomic_write_json(
        run_dir / "training.json",
        {
            "histories": histories,
            "label_cost": label_cost,
            "train_seconds": time.perf_counter() - started,
            "executor": executor.name,
            "resumed": resume,
        },
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
    first = {m: choosers[m][0] for m in METHODS}
    latency = measure_latency(
        first, splits["test_iid"], eval_ik, cfg.latency_batch, cfg.latency_singles, cfg.latency_rounds
    )
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
