"""A training run killed with SIGKILL in the middle of its grid: no worker keeps computing, and ``--resume`` gives
the figures of an uninterrupted run. Both executors, through the command line, as a user would run it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
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
    """Every figure of the report that does not depend on the machine's speed at that moment (a seconds budget's
    rows, its selected checkpoint's and its last iterate's; a latency)."""
    return {
        split: {
            method: {name: value for name, value in values.items() if not name.startswith("latency")}
            for method, values in rows.items()
            if not method.removesuffix("_last").endswith("_seconds")
        }
        for split, rows in report["results"].items()
    }


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
    assert any("learning.common.reaper" in name for name in started.values()), started  # and its watchdog
    # the workers, the raylet, the GCS and the agents die with the driver, by the kernel's fate-sharing or else the
    # watchdog's (within a second; 30 s on a loaded 2-core machine); the watchdog exits after them
    left = wait_gone(set(started), 30)
    assert not left, [started[pid] for pid in left]
    assert learning_main([*_train(run)[3:], "--resume"]) == 0  # results do not depend on the executor
    report = json.loads((run / "report.json").read_text())
    assert _figures(report) == _figures(uninterrupted) and alive(set(started)) == set()


def test_a_run_joins_a_running_cluster_by_its_address_and_leaves_it_running(tmp_path):
    """``ray start --head`` as a user would, then the command with ``--address``: the run completes on that cluster
    and the cluster is still up afterwards."""
    ray = Path(sys.executable).parent / "ray"
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # Ray's socket paths must stay short
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    head = [str(ray), "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false"]
    subprocess.run([*head, f"--temp-dir={temp}"], check=True, capture_output=True, timeout=120)
    try:
        run = tmp_path / "run"
        command = _train(run, "--executor", "ray", "--address", f"127.0.0.1:{port}")
        environment = {key: value for key, value in os.environ.items() if key != "RAY_AUTH_MODE"}
        refused = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=environment)
        assert refused.returncode == 2, refused.stderr[-3000:]  # without the cluster's token: said in one line
        assert "set RAY_AUTH_MODE=token" in refused.stderr.splitlines()[-1]
        environment["RAY_AUTH_MODE"] = "token"  # the head's token is in this machine's ~/.ray/auth_token
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=environment)
        assert done.returncode == 0, done.stderr[-3000:]
        assert (run / "report.json").is_file() and len(list(run.glob("jobs/*/*.pt"))) == 12
        status = subprocess.run(
            [str(ray), "status", f"--address=127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
            env=environment,
        )
        assert status.returncode == 0 and "CPU" in status.stdout  # the cluster was left running
    finally:
        for pid in {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()}:
            if str(temp) in command_line(pid) and pid != os.getpid():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)
