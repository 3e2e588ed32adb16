"""``python -m learning ... --task counterweight``: train, check-distribution, evaluate, report."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

from kinematics.errors import ProjectError
from learning.common.executors import executor_from_arguments
from learning.common.io import atomic_write_json, atomic_write_text
from learning.common.provenance import provenance, provenance_line
from learning.common.run_folder import RunFolder
from learning.counterweight.config import preset
from learning.counterweight.distribution import distribution_check
from learning.counterweight.experiment import build_problem, evaluate_run, train_run
from learning.counterweight.goals import make_splits
from learning.counterweight.report import distribution_table, render_markdown


def is_run(run: Path) -> bool:
    """Whether ``run`` holds a counterweight run (its config names a whole-body problem)."""
    path = Path(run) / "config.json"
    try:
        return "problem" in json.loads(path.read_text())
    except (OSError, ValueError):
        return False


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(args, command: str) -> int:
    if args.command == "train":
        cfg = preset(args.preset)
        if args.workers is not None:
            cfg = dataclasses.replace(cfg, workers=args.workers)
        run = args.run or Path("runs") / f"counterweight-{cfg.preset}-{time.strftime('%Y%m%d-%H%M%S')}"
        RunFolder.check(run, cfg.to_dict(), args.resume)  # before an executor starts
        with executor_from_arguments(args, cfg.workers, _log) as executor:
            train_run(cfg, run, _log, executor, args.resume)
        print(render_markdown(evaluate_run(run, command, _log)))
        print(f"run folder: {run}")
    elif args.command == "check-distribution":
        cfg = preset(args.preset)
        problem = build_problem(cfg)
        check, _ = distribution_check(problem, cfg, make_splits(cfg, problem), _log)
        table = distribution_table(check)
        print(table)
        if args.out is not None:
            record = provenance(command)
            atomic_write_json(args.out.with_suffix(".json"), {"distribution": check, "provenance": record})
            atomic_write_text(args.out.with_suffix(".md"), f"{provenance_line(record)}\n\n{table}\n")
    elif args.command == "evaluate":
        print(render_markdown(evaluate_run(args.run, command, _log)))
    else:
        path = Path(args.run) / "report.json"
        if not path.is_file():
            raise ProjectError(f"{path} does not exist; run `python -m learning evaluate --run {args.run}`")
        print(render_markdown(json.loads(path.read_text())))
    return 0
