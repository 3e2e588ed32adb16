"""``python -m learning ...`` for the grasp-yaw experiment (the default task): train, check-distribution,
throughput-profile, analyse, evaluate, report."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from kinematics.errors import ProjectError
from learning.common.executors import executor_from_arguments
from learning.common.io import atomic_write_json, atomic_write_text
from learning.common.provenance import provenance, provenance_line
from learning.common.run_folder import RunFolder
from learning.grasp_yaw import throughput
from learning.grasp_yaw.analysis import analysis_markdown, write_analysis
from learning.grasp_yaw.config import preset
from learning.grasp_yaw.distribution import distribution_check, distribution_markdown
from learning.grasp_yaw.experiment import evaluate_run, train_run
from learning.grasp_yaw.report import render_markdown


def main(args, command: str) -> int:
    if args.command == "train":
        cfg = preset(args.preset)
        if args.device:
            cfg = dataclasses.replace(cfg, device=args.device)
        run = args.run or Path("runs") / f"{cfg.preset}-{time.strftime('%Y%m%d-%H%M%S')}"
        RunFolder.check(run, cfg.to_dict(), args.resume)  # before an executor starts
        with executor_from_arguments(args, 1 if args.workers is None else args.workers) as executor:
            train_run(cfg, run, executor=executor, resume=args.resume)
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
    elif args.command == "throughput-profile":
        doc = throughput.run(args.preset, args.batch, args.rounds)
        table = throughput.markdown(doc)
        print(table)
        if args.out is not None:  # FILE.json with provenance, FILE.md the table
            record = provenance(command)
            atomic_write_json(args.out.with_suffix(".json"), {**doc, "provenance": record})
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
    return 0
