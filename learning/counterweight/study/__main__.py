"""``python -m learning.counterweight.study --out FOLDER [--preset full|smoke] [--resume] [--executor local|ray]
[--workers N] [--address RAY_ADDRESS] [--retries N]``: the pre-registered study (``docs/counterweight-study.md``),
then its report (``report.json``, ``report.md``, ``figures/``) in FOLDER. ``--report-only`` rewrites the report of
a finished study."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
from pathlib import Path

from learning.common.executors import EXECUTORS, make_executor
from learning.common.io import atomic_write_json, atomic_write_text
from learning.common.provenance import provenance
from learning.common.run_folder import RunFolder
from learning.counterweight.study.analysis import analyse
from learning.counterweight.study.design import STUDY_PRESETS, StudyCfg, study_preset
from learning.counterweight.study.figures import write_figures
from learning.counterweight.study.protocol import load_results, run_study
from learning.counterweight.study.report import render_markdown


def phase_seconds(study: dict) -> dict[str, float]:
    """Each phase's seconds summed over the sessions that ran the study (or this run's, without records)."""
    if not study.get("sessions"):
        return dict(study["phase_seconds"])
    total: dict[str, float] = {}
    for session in study["sessions"]:
        for phase, seconds in session["phase_seconds"].items():
            total[phase] = total.get(phase, 0.0) + seconds
    return total


def study_seconds(study: dict) -> float:
    return sum(phase_seconds(study).values()) if study.get("sessions") else study["seconds"]


def write_report(cfg: StudyCfg, folder: Path, study: dict, command: str) -> dict:
    """The analysis of a finished study, written as ``report.json``, ``report.md`` and the figures."""
    names = {
        name
        for methods in study["runs"].values()
        for budgets in methods.values()
        for seeds in budgets.values()
        for name in seeds.values()
    }
    results = load_results(folder, names)
    report = {
        "task": "counterweight-study",
        "preset": cfg.preset,
        "config": cfg.to_dict(),
        "one_x": cfg.one_x(),
        "levels": {cell.name: cell.level for cell in cfg.cells()},
        "config_axes": cfg.axes(),
        "diagnostics": study["diagnostics"],
        "kept": study["kept"],
        "choices": study["choices"],
        "tuning": study["tuning"],
        "seconds": study_seconds(study),
        "phase_seconds": phase_seconds(study),
        "sessions": study.get("sessions", []),
        "analysis": analyse(cfg, study, results),
        "provenance": provenance(command),
        "study_provenance": study.get("provenance"),
    }
    report["figures"] = write_figures(report, folder / "figures")
    atomic_write_json(folder / "report.json", report)
    atomic_write_text(folder / "report.md", render_markdown(report))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m learning.counterweight.study", description=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="the study's folder")
    parser.add_argument("--preset", choices=sorted(STUDY_PRESETS), default="full")
    parser.add_argument("--resume", action="store_true", help="continue the study in --out: only missing runs run")
    parser.add_argument("--report-only", action="store_true", help="rewrite the report of the finished study in --out")
    parser.add_argument("--executor", choices=EXECUTORS, default="local")
    parser.add_argument("--workers", type=int, default=None, help="processes (default: the preset's)")
    parser.add_argument("--address", default=None, help="a Ray cluster to join")
    parser.add_argument("--retries", type=int, default=3)
    args = parser.parse_args(argv)
    cfg = study_preset(args.preset)
    if args.workers is not None:
        cfg = dataclasses.replace(cfg, workers=args.workers)
    command = "python -m learning.counterweight.study " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    if args.report_only:
        study = json.loads((args.out / "study.json").read_text())
        report = write_report(cfg, args.out, study, command)
        print(f"report: {args.out / 'report.md'}")
        return 0
    folder = RunFolder(args.out, cfg.to_dict(), args.resume)
    with make_executor(args.executor, cfg.workers, args.address, args.retries, log=print) as executor:
        study = run_study(cfg, folder, executor, print, command)
    if "base" not in study["kept"]:
        return 1
    report = write_report(cfg, folder.path, study, command)
    print(f"report: {folder.path / 'report.md'} ({report['seconds'] / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
