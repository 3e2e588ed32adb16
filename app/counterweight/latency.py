"""``python -m app.counterweight.latency [--goals N] [--interval S] [--out DIR]``: how long the G1 scene takes from a
goal change to the fast ghosts drawn, with both live trainers running (the gradient policy's and the race's
zero-order one, taking turns on one core), written to ``DIR/g1_latency.{json,md}``.

The scene runs as ``python -m app --robot g1 --light`` runs it (one torch thread, passive OpenMP waiting, the app's
thread switch interval), on a free port and with no browser: a browser's frames cost the page's server, not the
answers. Once the trainer has stepped and the first goal's rested answers are drawn, ``N`` goals drawn from the task's
region move the goal ``S`` seconds apart, as the Random goal button does; the scene times each change to its first
answer drawn (``G1Viewer.latencies_ms``: reach only and both live policies, a goal's moving answers) and to its
rested answers.
"""

from __future__ import annotations

import argparse
import json
import shlex
import socket
import sys
import time
from pathlib import Path

import numpy as np
import torch

from app.__main__ import SWITCH_INTERVAL_S
from app.config import ViewerConfig
from app.counterweight.answers import POLICY, RACE, REACH_ONLY, RESTED, BodyAnswer
from app.counterweight.scene import launch_g1
from learning.benchmark.report import write_atomic
from learning.common.provenance import provenance, provenance_line

TARGET_MEDIAN_MS = 30.0  # issue #30: goal change -> ghosts drawn, the trainer running
TARGET_P95_MS = 100.0
START_TIMEOUT_S = 300.0  # the trainer's goals, its first step and the first rested answers (about a minute)


def summary(latencies_ms: list[float]) -> dict:
    """Count, median, p95 and worst of ``latencies_ms``."""
    values = np.asarray(latencies_ms, dtype=float)
    if values.size == 0:
        raise ValueError("no latency was measured: no goal change reached its drawn answer")
    return {
        "count": int(values.size),
        "median_ms": float(np.median(values)),
        "p95_ms": float(np.percentile(values, 95)),
        "max_ms": float(values.max()),
    }


def markdown(doc: dict) -> str:
    first, rested = doc["first"], doc["rested"]
    met = lambda ok: "met" if ok else "NOT met"  # noqa: E731
    lines = [
        "# G1 viewer: goal change to the ghosts drawn, both live trainers running",
        "",
        provenance_line(doc["provenance"]),
        "",
        f"{doc['goals']} goals {doc['interval_s']:g} s apart (the task's region, a fixed seed), `--light`, no browser; "
        f"the gradient trainer ran steps {doc['trainer_steps'][0]} to {doc['trainer_steps'][1]} and the race's "
        f"{doc['race_method']} trainer generations {doc['race_steps'][0]} to {doc['race_steps'][1]} meanwhile.",
        "",
        "| answer | count | median | p95 | max |",
        "|---|---|---|---|---|",
    ]
    for name, row in (("first (reach only, both live policies)", first), ("rested", rested)):
        lines.append(
            f"| {name} | {row['count']} | {row['median_ms']:.0f} ms | {row['p95_ms']:.0f} ms | {row['max_ms']:.0f} ms |"
        )
    lines += [
        "",
        "| target | value | status |",
        "|---|---|---|",
        f"| first answer: median <= {TARGET_MEDIAN_MS:.0f} ms | {first['median_ms']:.0f} ms | "
        f"{met(first['median_ms'] <= TARGET_MEDIAN_MS)} |",
        f"| first answer: p95 <= {TARGET_P95_MS:.0f} ms | {first['p95_ms']:.0f} ms | "
        f"{met(first['p95_ms'] <= TARGET_P95_MS)} |",
        "",
    ]
    return "\n".join(lines)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(condition, what: str, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.05)


def _rested(viewer) -> bool:
    """Whether the scene has drawn reach only's and both live policies' rested answers for its current goal."""
    question, drawn, keys = viewer.drawn_question, viewer.drawn, {REACH_ONLY, POLICY, RACE}
    return (
        question is not None
        and question.p == viewer.board.current.p
        and all(isinstance(drawn[key], BodyAnswer) and drawn[key].phase == RESTED for key in keys)
        and not keys & viewer.pending
    )


def run_as_the_app_does() -> None:
    """The process settings ``python -m app`` makes: one torch thread, the app's thread switch interval."""
    torch.set_num_threads(1)
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def measure(goals: int, interval_s: float, seed: int = 0) -> dict:
    """Launch the G1 scene, move its goal ``goals`` times ``interval_s`` apart, and return the latencies' summary
    (in this process's settings: ``run_as_the_app_does`` first, to measure what the app does)."""
    viewer = launch_g1(ViewerConfig(robot="g1", light=True, port=_free_port()))
    try:
        trainers = (viewer.trainer, viewer.race.trainer)
        _wait(lambda: all(t.status.step >= 1 for t in trainers) and _rested(viewer), "both trainers' first steps")
        viewer.latencies_ms.clear()
        viewer.rested_latencies_ms.clear()
        first_step, first_generation = viewer.trainer.status.step, viewer.race.trainer.status.step
        generator = torch.Generator().manual_seed(seed)
        for _ in range(goals):
            viewer.set_target(viewer.region.sample(generator))
            time.sleep(interval_s)
        _wait(lambda: _rested(viewer), "the last goal's rested answers", 60.0)
        for trainer in trainers:
            if trainer.status.state != "running":
                raise RuntimeError(f"a trainer was {trainer.status.state!r}, not running, during the measurement")
        return {
            "goals": goals,
            "interval_s": interval_s,
            "trainer_steps": [first_step, viewer.trainer.status.step],
            "race_method": viewer.race.method,
            "race_steps": [first_generation, viewer.race.trainer.status.step],
            "first": summary(viewer.latencies_ms),
            "rested": summary(viewer.rested_latencies_ms),
        }
    finally:
        viewer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.counterweight.latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--goals", type=int, default=40, help="goal changes (default 40)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between goal changes (default 1)")
    parser.add_argument("--out", type=Path, default=Path("docs/results/viewer"), help="where the results go")
    args = parser.parse_args(argv)
    if args.goals < 1 or not args.interval > 0:
        parser.error("--goals must be at least 1 and --interval above 0")
    run_as_the_app_does()  # before the provenance, which records the threads
    doc = {
        "provenance": provenance(shlex.join(["python", "-m", "app.counterweight.latency", *(argv or sys.argv[1:])])),
        **measure(args.goals, args.interval),
    }
    write_atomic(args.out / "g1_latency.json", json.dumps(doc, indent=2) + "\n")
    write_atomic(args.out / "g1_latency.md", markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
