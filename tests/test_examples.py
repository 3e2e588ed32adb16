"""The numbered examples under ``docs/examples/`` run as a user runs them (``python docs/examples/NN_*.py``), with
short budgets, and print what their docstrings promise; the viser one serves its page for a few seconds, headless,
and its drag callback's solve follows a moved target."""

from __future__ import annotations

import math
import re
import runpy
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


def _run(name: str, *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_examples_are_numbered_and_each_is_tested():
    names = sorted(path.name for path in EXAMPLES.glob("*.py"))
    assert [name[:3] for name in names] == [f"{i:02d}_" for i in range(len(names))]
    tested = Path(__file__).read_text()
    assert all(name in tested for name in names)


def test_00_arm_ik_layer():
    out = _run("00_arm_ik_layer.py")
    solved = int(re.search(r"solved (\d+) of 64", out).group(1))
    assert solved >= 60 and "d q_base / d target position" in out


def test_01_yaw_predictor_trains_through_the_layer():
    out = _run("01_yaw_predictor.py", "3")
    costs = dict(re.findall(r"^(learned|heading|radial)\s+cost ([\d.]+)", out, re.M))
    assert set(costs) == {"learned", "heading", "radial"} and all(float(v) > 0 for v in costs.values())


def test_02_viser_app_serves_its_page_and_follows_a_moved_target():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "02_viser_drag_target.py"), str(port), "--seconds", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stderr.read()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as page:
                    assert page.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "the page was not served within 60 s"
                time.sleep(0.5)
        assert server.wait(timeout=60) == 0
    finally:
        server.kill()
    example = runpy.run_path(str(EXAMPLES / "02_viser_drag_target.py"), run_name="not_main")
    kinematics, follow = example["kinematics"], example["follow"]
    T_root_target = kinematics(example["q_current"]).clone()
    T_root_target[:3, 3] += torch.tensor([0.05, -0.05, 0.03])  # a drag of 8 cm
    q = follow(T_root_target)
    assert float((kinematics(q)[:3, 3] - T_root_target[:3, 3]).norm()) < 1e-3
    assert torch.equal(follow.__globals__["q_current"], q)  # the arm keeps the answer: the next drag starts there


def test_03_g1_reaches_with_feet_and_balance_held():
    out = _run("03_g1_reach.py")
    rows = re.findall(r"hand\s+([\d.]+) mm .*feet ([\d.]+) mm off, CoM outside the polygon's margin by ([\d.]+)", out)
    assert len(rows) == 4
    for hand, feet, balance in rows:
        assert float(hand) < 5 and float(feet) < 0.1 and float(balance) < 0.1


def test_04_counterweight_policy_trains_through_the_whole_body_layer():
    out = _run("04_counterweight_policy.py", "2")
    assert "reach only (body at rest) solves 0% of the test goals" in out  # every goal needs a counterweight
    assert re.search(r"the trained policy solves \d+% of the test goals", out)


def test_05_g1_control_loop_steps_a_stepper_with_the_feet_and_balance_held():
    out = _run("05_g1_control_loop.py", "600")
    median, p99 = (float(v) for v in re.search(r"took (\d+) us \(median\), (\d+) us \(99th", out).groups())
    assert 0 < median <= p99
    trail = float(re.search(r"trails its target by ([\d.]+) mm", out).group(1))
    feet, balance = (float(v) for v in re.search(r"feet off by ([\d.]+) mm, .* by ([\d.]+) mm", out).groups())
    assert trail < 5 and feet < 0.1 and balance < 0.1
    gradient = [
        float(v) for v in re.search(r"d pelvis height / d hand target \(x, y, z\): (.*)", out).group(1).split(",")
    ]
    assert len(gradient) == 3 and all(math.isfinite(v) for v in gradient) and any(v != 0 for v in gradient)
