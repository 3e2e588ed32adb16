"""The experiments' job grid under each executor: the counterweight preset's whole protocol (tuning, seeds, equal
wall time) on ``local`` (the process pool) and on ``ray`` (an embedded local Ray), the same number of workers, one
after the other in one run. Ray's overhead is the ratio of the two grids' wall times (with and without its start
and shutdown), beside its start-up seconds; the sums of the jobs' own training seconds show whether both ran under
the same load."""

from __future__ import annotations

import dataclasses
import time

from learning.common.executors import make_executor
from learning.counterweight.config import preset
from learning.counterweight.experiment import build_problem
from learning.counterweight.goals import make_splits
from learning.counterweight.protocol import run_protocol

EXECUTOR_ORDER = ("local", "ray")


def run(preset_name: str = "full", workers: int = 2, executors: tuple[str, ...] = EXECUTOR_ORDER) -> dict:
    cfg = dataclasses.replace(preset(preset_name), workers=workers)
    splits = make_splits(cfg, build_problem(cfg))
    train, validation = splits["train"].goals, splits["validation"].goals
    rows = []
    for name in executors:
        started = time.perf_counter()
        executor = make_executor(name, workers, progress=False)
        startup = time.perf_counter() - started
        try:
            began = time.perf_counter()
            protocol = run_protocol(cfg, train, validation, executor)
            grid = time.perf_counter() - began
        finally:
            closing = time.perf_counter()
            executor.close()
        shutdown = time.perf_counter() - closing
        runs = protocol["runs"]
        rows.append(
            {
                "executor": name,
                "jobs": sum(len(r) for r in protocol["tuning"].values()) + len(runs),
                "startup_s": startup,
                "grid_s": grid,
                "shutdown_s": shutdown,
                "end_to_end_s": startup + grid + shutdown,
                "job_training_s": sum(trained.seconds for _, trained in runs)
                + sum(row["seconds"] for rows_ in protocol["tuning"].values() for row in rows_),
                "chosen": protocol["chosen"],
            }
        )
    by_name = {row["executor"]: row for row in rows}
    ratios = {}
    if {"local", "ray"} <= set(by_name):
        local, ray = by_name["local"], by_name["ray"]
        ratios = {
            "grid": ray["grid_s"] / local["grid_s"],
            "end_to_end": ray["end_to_end_s"] / local["end_to_end_s"],
            "job_training": ray["job_training_s"] / local["job_training_s"],
            "target_end_to_end": 1.10,
        }
    return {"suite": "grid", "preset": preset_name, "workers": workers, "rows": rows, "ratios": ratios}


def markdown(doc: dict) -> str:
    meta = doc.get("meta", {})
    lines = [
        f"# The job grid under each executor: the counterweight `{doc['preset']}` protocol on {doc['workers']} workers",
        "",
        f"`{meta.get('provenance', {}).get('command', '')}` at {meta.get('provenance', {}).get('commit', '?')}, "
        f"{meta.get('cpu', '')}, load {meta.get('loadavg_start')} at the start, {meta.get('loadavg_end')} at the end.",
        "",
        "| executor | jobs | start-up s | grid s | shutdown s | end to end s | jobs' own training s (sum) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in doc["rows"]:
        lines.append(
            f"| {row['executor']} | {row['jobs']} | {row['startup_s']:.1f} | {row['grid_s']:.1f} | "
            f"{row['shutdown_s']:.1f} | {row['end_to_end_s']:.1f} | {row['job_training_s']:.1f} |"
        )
    r = doc["ratios"]
    if r:
        met = "met" if r["end_to_end"] <= r["target_end_to_end"] else "not met"
        lines += [
            "",
            f"Ray / local: the grid {r['grid']:.3f}x, end to end (Ray's start and shutdown included) "
            f"{r['end_to_end']:.3f}x (target <= {r['target_end_to_end']:.2f}x: {met}); the jobs' own training "
            f"seconds {r['job_training']:.3f}x.",
        ]
    return "\n".join(lines) + "\n"
