"""A training run killed with SIGKILL in the middle of its grid: no worker keeps computing, and ``--resume`` gives
the figures of an uninterrupted run. Both executors, through the command line, as a user would run it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from grid_support import alive, command_line, descendants, wait_gone

from learning.__main__ import main as learning_main

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]


def _train(run: Path, *extra: str) -> list[str]:
    argv = ["train", "--task", "counterweight", "--preset", "smoke", "--run", str(run), "--workers", "2", *extra]
    return [sys.executable, "-m", "learning", *argv]


def _kill_in_the_middle(run: Path, *extra: str) -> dict[int, str]:
    """Start a run, SIGKILL it once some jobs are saved and others are not; the processes it had started, with
    their command lines."""
    driver = subprocess.Popen(
        _train(run, *extra), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    seen: dict[int, str] = {}
    deadline = time.monotonic() + 120
    try:
        while len(list(run.glob("jobs/*/*.pt"))) < 2:
            assert driver.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no job finished in 120 s"
            seen |= {pid: command_line(pid) for pid in descendants(driver.pid) - set(seen)}
            time.sleep(0.05)
        seen |= {pid: command_line(pid) for pid in descendants(driver.pid) - set(seen)}
        os.kill(driver.pid, signal.SIGKILL)
    finally:
        driver.wait(timeout=30)
    assert len(list(run.glob("jobs/*/*.pt"))) < 12, "the grid finished before it was killed"
    assert not (run / "training.json").exists()
    return seen


def _figures(report: dict) -> dict:
    """Every figure of the report that does not depend on the machine's speed at that moment (a seconds budget, a
    latency)."""
    return {
        split: {
            method: {name: value for name, value in values.items() if not name.startswith("latency")}
            for method, values in rows.items()
            if not method.endswith("_seconds")
        }
        for split, rows in report["results"].items()
    }


def _ray_agent(command: str) -> bool:
    """Ray's dashboard or runtime-environment agent (by its program, or the process title it takes)."""
    program = " ".join(command.split()[:3])
    return "agent" in program.lower() or program.startswith(("ray::DashboardAgent", "ray::RuntimeEnv"))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict:
    run = tmp_path_factory.mktemp("uninterrupted") / "run"
    assert learning_main(_train(run)[3:]) == 0
    return json.loads((run / "report.json").read_text())


def test_a_killed_local_run_leaves_no_worker_and_resumes_to_the_uninterrupted_figures(tmp_path, uninterrupted):
    run = tmp_path / "run"
    started = _kill_in_the_middle(run)
    assert len(started) >= 2  # the pool's two workers (and multiprocessing's resource tracker)
    left = wait_gone(set(started), 10)
    assert not left, [started[pid] for pid in left]
    saved = {path.name for path in run.glob("jobs/*/*.pt")}
    assert learning_main(_train(run)[3:]) == 2  # not without --resume
    assert learning_main([*_train(run)[3:], "--resume"]) == 0
    assert saved <= {path.name for path in run.glob("jobs/*/*.pt")}
    report = json.loads((run / "report.json").read_text())
    assert _figures(report) == _figures(uninterrupted) and report["chosen"] == uninterrupted["chosen"]


def test_a_killed_ray_run_leaves_no_worker_and_resumes_under_the_local_pool(tmp_path, uninterrupted):
    run = tmp_path / "run"
    started = _kill_in_the_middle(run, "--executor", "ray")
    assert any("raylet" in name for name in started.values()), started  # an embedded Ray was started
    computing = {pid for pid, name in started.items() if not _ray_agent(name)}
    left = wait_gone(computing, 30)  # the workers, the raylet and the GCS share the driver's fate
    assert not left, [started[pid] for pid in left]
    # Ray's two idle agents exit on their own once their last report to the dead GCS times out (60 s in Ray)
    left = wait_gone(set(started), 90)
    assert not left, [started[pid] for pid in left]
    assert learning_main([*_train(run)[3:], "--resume"]) == 0  # results do not depend on the executor
    report = json.loads((run / "report.json").read_text())
    assert _figures(report) == _figures(uninterrupted) and alive(set(started)) == set()
