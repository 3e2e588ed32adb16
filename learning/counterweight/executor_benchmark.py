"""The job grid under each executor (``python -m learning.counterweight.executor_benchmark``): the counterweight
preset's whole protocol (tuning, seeds, equal wall time) on ``local`` (the process pool) and on ``ray`` (an embedded
local Ray), the same number of workers, one after the other in one run, in the order local, ray, ray, local (so a
drift of the machine's speed over the run weighs on both alike). Ray's overhead is the ratio of the two executors' mean wall times (with and without its
start and shutdown), beside its start-up seconds; the sums of the jobs' own training seconds show whether both ran
under the same load."""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import time
from pathlib import Path

from learning.common.executors import make_executor
from learning.common.io import atomic_write_json, atomic_write_text
from learning.common.provenance import provenance, provenance_line
from learning.counterweight.config import preset
from learning.counterweight.experiment import build_problem
from learning.counterweight.goals import make_splits
from learning.counterweight.protocol import run_protocol

EXECUTOR_ORDER = ("local", "ray", "ray", "local")


def run(preset_name: str = "full", workers: int = 2, executors: tuple[str, ...] = EXECUTOR_ORDER) -> dict:
    cfg = dataclasses.replace(preset(preset_name), workers=workers)
    splits = make_splits(cfg, build_problem(cfg))
    goals = {name: splits[name].goals for name in ("train", "validation", "tuning")}
    rows = []
    for name in executors:
        started = time.perf_counter()
        executor = make_executor(name, workers, progress=False)
        startup = time.perf_counter() - started
        try:
            began = time.perf_counter()
            protocol = run_protocol(cfg, goals, executor)
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
    ratios = {}
    if {"local", "ray"} <= set(executors):

        def mean(executor: str, column: str) -> float:
            values = [row[column] for row in rows if row["executor"] == executor]
            return sum(values) / len(values)

        ratios = {
            name: mean("ray", column) / mean("local", column)
            for name, column in (("grid", "grid_s"), ("end_to_end", "end_to_end_s"), ("job_training", "job_training_s"))
        }
        ratios["target_end_to_end"] = 1.10
    return {"suite": "executors", "preset": preset_name, "workers": workers, "rows": rows, "ratios": ratios}


def markdown(doc: dict) -> str:
    lines = [
        f"# The job grid under each executor: the counterweight `{doc['preset']}` protocol on {doc['workers']} workers",
        "",
        provenance_line(doc["provenance"]),
        "",
        f"Load average: {doc['load'][0]} at the start, {doc['load'][1]} at the end.",
        "",
        "| run | executor | jobs | start-up s | grid s | shutdown s | end to end s | jobs' own training s (sum) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for number, row in enumerate(doc["rows"], 1):
        lines.append(
            f"| {number} | {row['executor']} | {row['jobs']} | {row['startup_s']:.1f} | {row['grid_s']:.1f} | "
            f"{row['shutdown_s']:.1f} | {row['end_to_end_s']:.1f} | {row['job_training_s']:.1f} |"
        )
    r = doc["ratios"]
    if r:
        met = "met" if r["end_to_end"] <= r["target_end_to_end"] else "not met"
        lines += [
            "",
            f"Ray / local, each executor's mean over its runs: the grid {r['grid']:.3f}x, end to end (Ray's start "
            f"and shutdown included) {r['end_to_end']:.3f}x (target <= {r['target_end_to_end']:.2f}x: {met}); the jobs' own training "
            f"seconds {r['job_training']:.3f}x.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m learning.counterweight.executor_benchmark", description=__doc__)
    parser.add_argument("--preset", default="full", help="the counterweight preset (default: full)")
    parser.add_argument("--workers", type=int, default=2, help="workers of each executor (default: 2)")
    parser.add_argument("--out", type=Path, required=True, help="writes OUT/executors.json and OUT/executors.md")
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "learning.counterweight.executor_benchmark", *(argv or sys.argv[1:])])
    load_start = round(os.getloadavg()[0], 2)
    doc = run(args.preset, args.workers)
    doc["load"] = [load_start, round(os.getloadavg()[0], 2)]
    doc["provenance"] = provenance(command)
    text = markdown(doc)
    atomic_write_json(args.out / "executors.json", doc)
    atomic_write_text(args.out / "executors.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
