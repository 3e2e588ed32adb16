"""Command line of the grasp-yaw experiment.

python -m learning train --preset smoke|full [--run DIR]   # splits, teacher labels, training, evaluation
python -m learning evaluate --run DIR                       # re-evaluate a trained run
python -m learning report --run DIR                         # print the split table of a run's report
python -m learning analyse --run DIR [--out FILE]           # where the predictors lose to the teacher, per goal
python -m learning check-distribution [--out FILE]          # radial, heading, a 72-yaw grid on 256 goals

--task counterweight (train, check-distribution) runs the whole-body counterweight experiment instead of the
grasp-yaw one (its reach-only / no-balance fractions before any training); evaluate and report read the task
from the run folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import time
from pathlib import Path

import learning.common.threads  # noqa: F401  (before torch)
from assets import MissingAssetError
from kinematics.errors import ProjectError
from learning.common.io import atomic_write_json, atomic_write_text
from learning.common.provenance import provenance, provenance_line
from learning.counterweight import cli as counterweight
from learning.grasp_yaw.analysis import analysis_markdown, write_analysis
from learning.grasp_yaw.config import PRESETS, preset
from learning.grasp_yaw.distribution import distribution_check, distribution_markdown
from learning.grasp_yaw.experiment import evaluate_run, train_run
from learning.grasp_yaw.report import render_markdown

TASKS = ("grasp-yaw", "counterweight")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m learning", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="make splits, train every seed, evaluate, write the report")
    train.add_argument("--preset", choices=sorted(PRESETS), default="smoke")
    train.add_argument("--run", type=Path, default=None, help="run folder (default runs/<preset>-<time>)")
    train.add_argument("--device", default=None, help="torch device (default: the preset's, cpu)")
    train.add_argument("--task", choices=TASKS, default="grasp-yaw")
    for name, text in (("evaluate", "evaluate a trained run"), ("report", "print a run's split table")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--run", type=Path, required=True)
    analyse = commands.add_parser("analyse", help="per-goal gaps to the teacher and learning curves per split")
    analyse.add_argument("--run", type=Path, required=True)
    analyse.add_argument("--out", type=Path, default=None, help="write FILE.json and FILE.md (default: in the run)")
    check = commands.add_parser("check-distribution", help="the radial rule, heading and a 72-yaw grid on 256 goals")
    check.add_argument("--preset", choices=sorted(PRESETS), default="full")
    check.add_argument("--task", choices=TASKS, default="grasp-yaw")
    check.add_argument(
        "--out", type=Path, default=None, help="also write FILE.json (with provenance) and FILE.md (the table)"
    )
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "learning", *(sys.argv[1:] if argv is None else argv)])
    try:
        if getattr(args, "task", None) == "counterweight" or (
            args.command in ("evaluate", "report") and counterweight.is_run(args.run)
        ):
            return counterweight.main(args, command)
        if args.command == "train":
            cfg = preset(args.preset)
            if args.device:
                cfg = dataclasses.replace(cfg, device=args.device)
            run = args.run or Path("runs") / f"{cfg.preset}-{time.strftime('%Y%m%d-%H%M%S')}"
            train_run(cfg, run)
            report = evaluate_run(run, command=command)
            print(render_markdown(report))
            print(f"run folder: {run}")
        elif args.command == "check-distribution":
            check = distribution_check(preset(args.preset))
            for name, values in check.items():
                print(name, " ".join(f"{k} {v:.3f}" for k, v in values.items()))
            if args.out is not None:  # FILE.json with provenance, FILE.md the table
                record = provenance(command)
                atomic_write_json(args.out.with_suffix(".json"), {"methods": check, "provenance": record})
                table = distribution_markdown(check)
                atomic_write_text(args.out.with_suffix(".md"), f"{provenance_line(record)}\n\n{table}")
        elif args.command == "analyse":
            print(analysis_markdown(write_analysis(args.run, args.out, command)))
        elif args.command == "evaluate":
            print(render_markdown(evaluate_run(args.run, command=command)))
        else:
            path = args.run / "report.json"
            if not path.is_file():
                raise ProjectError(f"{path} does not exist; run `python -m learning evaluate --run {args.run}`")
            print(render_markdown(json.loads(path.read_text())))
    except (ProjectError, MissingAssetError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
