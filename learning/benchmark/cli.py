"""Command line: parse options, run the suites, write ``<suite>.json`` and ``<suite>.md`` under ``--out``."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
from pathlib import Path

import torch

from learning.benchmark import (
    constrained_suite,
    device_suite,
    fk_suite,
    goals,
    ik_suite,
    peers,
    qp_suite,
    report,
    step_profile,
    tree_suite,
    wholebody_suite,
)
from learning.benchmark.config import DTYPES, BenchConfig
from learning.benchmark.memory import MODES
from learning.benchmark.timing import TimingPolicy
from learning.common.provenance import cpu_name, provenance

QUICK_BATCHES = (1, 16)


def _ints(text: str) -> tuple[int, ...]:
    values = tuple(int(v) for v in text.split(",") if v.strip())
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return values


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _dtypes(text: str) -> tuple[str, ...]:
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    if not values or any(v not in DTYPES for v in values):
        raise argparse.ArgumentTypeError(f"expected a comma-separated subset of {DTYPES}, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m learning.benchmark", description=__doc__)
    p.add_argument(
        "--suite",
        choices=("fk", "ik", "constrained", "tree", "qp", "wholebody", "wholebody-profile", "device", "all"),
        default="all",
    )
    p.add_argument("--out", type=Path, default=Path("bench_results"), help="output folder (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="tiny batches and few repeats: a smoke test")
    p.add_argument("--batches", type=_ints, help="batch sizes (default: each suite's own)")
    p.add_argument("--fk-dtypes", type=_dtypes, default=DTYPES, help="default: float32,float64")
    p.add_argument("--ik-dtypes", type=_dtypes, default=("float32",), help="default: float32")
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda (default: %(default)s)")
    p.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's own choice)")
    p.add_argument("--iterations", type=int, default=16, help="IK iterations (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=20, help="repeats per measurement (default: %(default)s)")
    p.add_argument(
        "--runs",
        type=_positive,
        default=1,
        help="wholebody: whole runs of the suite, the targets decided by their medians; wholebody-profile: whole "
        "runs, each part the median of its runs' medians (default: %(default)s)",
    )
    p.add_argument("--fk-budget", type=float, default=1.0, help="seconds per FK measurement before fewer repeats")
    p.add_argument("--ik-budget", type=float, default=5.0, help="seconds per IK measurement before fewer repeats")
    p.add_argument("--memory", choices=MODES, default="auto", help="CPU peak-memory method (default: %(default)s)")
    p.add_argument("--pin-ik-max-batch", type=int, default=1024, help="largest batch for the Pinocchio IK loop")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--call-budget",
        type=float,
        default=device_suite.CALL_BUDGET_S,
        help="device: seconds one call may last; a row predicted or found over it is not timed, nor its larger "
        "batches (default: %(default)s)",
    )
    p.add_argument(
        "--profile-batch",
        type=int,
        default=device_suite.ANCHOR_BATCH,
        help="device: the batch at which one call of the arm's solve and of the whole-body step is profiled, op by op "
        "(0: none; default: %(default)s)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="device: go on with the unfinished run under --out (the same code, settings and device)",
    )
    return p


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    quick = args.quick
    batches = args.batches or (QUICK_BATCHES if quick else (1, 64, 1024, 8192))
    repeats = min(args.repeats, 3) if quick else args.repeats
    fk_timing = TimingPolicy(
        min_repeats=repeats, budget_s=0.05 if quick else args.fk_budget, floor_repeats=min(3, repeats)
    )
    ik_timing = TimingPolicy(
        min_repeats=repeats, budget_s=0.1 if quick else args.ik_budget, floor_repeats=min(3, repeats)
    )
    return BenchConfig(
        fk_batches=batches,
        ik_batches=batches,
        fk_dtypes=args.fk_dtypes,
        ik_dtypes=args.ik_dtypes,
        device=args.device,
        iterations=args.iterations,
        seed=args.seed,
        memory=args.memory,
        pin_ik_max_batch=args.pin_ik_max_batch,
        pin_single_calls=200 if quick else 2000,
        fk_timing=fk_timing,
        ik_timing=ik_timing,
        quick=quick,
    )


def _loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _publish(out: Path, doc: dict, record: dict, render) -> None:
    """Stamp ``doc`` with ``record`` (``meta``), write its JSON and markdown under ``out`` and print them."""
    doc["meta"] = record
    markdown = render(doc)
    json_path, md_path = report.write_suite(out, doc, markdown)
    print(markdown, flush=True)
    print(f"wrote {json_path} and {md_path}", flush=True)


def _device(args: argparse.Namespace, cfg: BenchConfig, argv: list[str], load: float | None) -> int:
    """The device suite, its document written after every row; with ``--resume``, an earlier unfinished run's
    document under ``--out`` goes on (refused, with the reason, where it is another run's)."""
    batches = sorted(set(args.batches or ((1, 4) if args.quick else device_suite.BATCHES)))
    iterations = 4 if args.quick else args.iterations
    device = torch.device(cfg.device)
    started = meta(cfg, argv, load, args.out)  # the files this run writes do not change the commit it ran
    path = args.out / f"device-{device.type}.json"
    previous = None
    if args.resume and path.exists():
        previous = json.loads(path.read_text())
        if previous.get("complete", True):
            print(f"--resume: {path} is a finished run; nothing to resume (move it away to measure again)",
                  file=sys.stderr)  # fmt: skip
            return 2
        current = device_suite.identity({"device": device_suite.device_name(device), "dtype": cfg.fk_dtypes[0],
                                         "iterations": iterations, "batches": batches, "meta": started})  # fmt: skip
        if (why := device_suite.refusal(previous, current)) is not None:
            print(f"--resume: {path} cannot be resumed: {why}", file=sys.stderr)
            return 2

    def stamped(doc: dict) -> dict:
        return {**doc, "meta": {**started, "loadavg_end": _loadavg()}}

    def write(doc: dict) -> None:  # after every row: what a killed run leaves is what it measured
        done = stamped(doc)
        report.write_suite(args.out, done, device_suite.markdown(done))

    doc = device_suite.run(
        device=cfg.device,
        batches=batches,
        dtype_name=cfg.fk_dtypes[0],
        iterations=iterations,
        timing=cfg.fk_timing if args.quick else None,
        seed=args.seed,
        call_budget_s=args.call_budget,
        previous=previous,
        on_row=write,
        profile_batch=args.profile_batch or None,
    )
    _publish(args.out, doc, stamped(doc)["meta"], device_suite.markdown)
    return 0


def meta(cfg: BenchConfig, argv: list[str], load_start: float | None, results: Path | None = None) -> dict:
    """What produced a suite's document; ``results``: the folder a run writes into as it goes (``git_commit``)."""
    device = torch.device(cfg.device)
    return {
        "argv": argv,
        "provenance": provenance(shlex.join(["python", "-m", "learning.benchmark", *argv]), results),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": f"{cpu_name()} ({os.cpu_count()} logical)",
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset (the OpenMP runtime's default)"),
        "device": device_suite.device_name(device),
        "peer_versions": peers.versions(),
        "iterations": cfg.iterations,
        "seed": cfg.seed,
        "quick": cfg.quick,
        "fk_timing": vars(cfg.fk_timing) if hasattr(cfg.fk_timing, "__dict__") else None,
        "ik_timing": vars(cfg.ik_timing) if hasattr(cfg.ik_timing, "__dict__") else None,
        "loadavg_start": load_start,
        "loadavg_end": _loadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the chosen suites; returns the process exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.runs > 1 and args.suite not in ("wholebody", "wholebody-profile"):
        parser.error(f"--runs repeats the wholebody and wholebody-profile suites only; --suite {args.suite} runs once")
    if args.resume and args.suite != "device":
        parser.error(f"--resume goes on with the device suite only; --suite {args.suite} runs whole")
    threads = torch.get_num_threads()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        return _run(args, argv)
    finally:
        torch.set_num_threads(threads)


def _whole_runs(suite: str, count: int, run) -> list[dict]:
    """``count`` whole runs of ``suite`` (``run()`` each), one after another, each announced where there are several."""
    runs = []
    for index in range(count):
        if count > 1:
            print(f"[{suite}] run {index + 1} of {count}", file=sys.stderr, flush=True)
        runs.append(run())
    return runs


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    cfg = config_from_args(args)
    if torch.device(cfg.device).type == "cuda" and not torch.cuda.is_available():
        print("--device cuda was asked for but torch sees no CUDA device", file=sys.stderr)
        return 2
    print(
        f"torch {torch.__version__}, torch.get_num_threads() = {torch.get_num_threads()}, device {cfg.device}",
        flush=True,
    )
    for msg in peers.availability().values():
        if msg:
            print(f"warning: {msg}; its rows are skipped", file=sys.stderr)
    suites = ("fk", "ik", "constrained", "tree") if args.suite == "all" else (args.suite,)
    for suite in suites:
        load = _loadavg()
        if suite == "constrained":
            doc = constrained_suite.run(
                batch=16 if args.quick else 1024,
                iteration_counts=(16, 24) if args.quick else (16, 32, 64, 128),
                repeats=1 if args.quick else 5,
                seed=args.seed,
            )
            _publish(args.out, doc, meta(cfg, argv, load), constrained_suite.markdown)
            continue
        if suite == "qp":
            doc = qp_suite.run(
                batches=args.batches or ((1, 16) if args.quick else (1, 64, 1024)),
                dtypes=cfg.fk_dtypes,
                timing=cfg.ik_timing,
                seed=args.seed,
                count=64 if args.quick else 1000,
                infeasible_count=8 if args.quick else 100,
            )
            _publish(args.out, doc, meta(cfg, argv, load), qp_suite.markdown)
            continue
        if suite == "wholebody-profile":
            runs = _whole_runs(suite, args.runs, lambda: step_profile.run(dtype_name=cfg.fk_dtypes[0], seed=args.seed))
            _publish(args.out, step_profile.combine(runs), meta(cfg, argv, load), step_profile.markdown)
            continue
        if suite == "device":
            if (code := _device(args, cfg, argv, load)) != 0:
                return code
            continue
        if suite == "wholebody":
            runs = _whole_runs(suite, args.runs, lambda: wholebody_suite.run(
                batches=args.batches or ((1, 4) if args.quick else (1, 64, 1024)),
                iterations=4 if args.quick else 16,
                full_solve_max_batch=4 if args.quick else 64,
                memory_batch=2 if args.quick else 8,
                dtype_name=cfg.fk_dtypes[0],
                seed=args.seed,
                control_loop_steps=200 if args.quick else 10_000,
                contention_batch=64 if args.quick else 1024,
                contention_repeats=5 if args.quick else 15,
            ))  # fmt: skip
            doc = wholebody_suite.combine(runs)
            _publish(args.out, doc, meta(cfg, argv, load), wholebody_suite.markdown)
            continue
        if suite == "tree":
            doc = tree_suite.run(cfg.fk_batches, cfg.fk_dtypes, cfg.fk_timing, cfg.pin_ik_max_batch, args.seed)
            _publish(args.out, doc, meta(cfg, argv, load), tree_suite.markdown)
            continue
        if suite == "fk":
            doc = fk_suite.run(cfg)
            doc["goals"] = goals.fk_goals(doc)
        else:
            doc = ik_suite.run(cfg)
            doc["goals"] = goals.ik_goals(doc)
        _publish(args.out, doc, meta(cfg, argv, load), report.fk_markdown if suite == "fk" else report.ik_markdown)
    return 0
