"""One whole-body step at batch 1024 with the cores shared: quiet, then beside one competing busy process.

Each measurement runs in a child process, because the OpenMP wait policy is read once, when torch loads its
runtime: once with ``OMP_WAIT_POLICY=PASSIVE`` (what the project's entry points set) and once without it (what a
user who imports the library gets). The busy process is a Python loop that never sleeps; it runs while the second
half of the child's measurement runs and is killed after it (or stops by itself once the child is gone).

Run by the wholebody suite; ``child`` is what each child process runs (it prints one JSON line).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

# Busy until killed, or until its parent is gone (then it is reparented and stops): never left spinning.
BUSY = "import os\nparent = os.getppid()\nwhile os.getppid() == parent: pass"
_CHILD = "import json; from learning.benchmark.contention import child; print(json.dumps(child({batch}, {repeats})))"
POLICIES = ("PASSIVE", None)  # None: the variable unset, the OpenMP runtime's default (spinning a while)


def _median_step_s(layer, q, flat, repeats: int) -> float:
    import torch

    with torch.no_grad():
        layer.step(q, flat)
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            layer.step(q, flat)
            seconds.append(time.perf_counter() - start)
    return sorted(seconds)[len(seconds) // 2]


def child(batch: int, repeats: int) -> dict:
    """In this process: the median step quiet and beside a busy process, seconds per row."""
    import torch

    import assets
    from kinematics import KinematicTree
    from kinematics.wholebody import standing_problem

    robot = assets.G1
    tree = KinematicTree.from_urdf(robot.urdf_text(), floating_base=True, dtype=torch.float32)
    problem = standing_problem(tree, robot)
    layer = problem.layer
    hand = tree.frame_pose(problem.q_stand, robot.frames["right_hand"]).expand(batch, 4, 4).clone()
    hand[:, :3, 3] += torch.linspace(-0.1, 0.1, batch)[:, None]
    flat = layer._targets({**problem.fixed_targets, "right_hand": hand}, torch.Size([batch]))
    q = problem.q_stand.expand(batch, tree.nq).contiguous()
    quiet = _median_step_s(layer, q, flat, repeats)
    busy = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        time.sleep(0.5)
        loaded = _median_step_s(layer, q, flat, repeats)
    finally:
        busy.kill()
        busy.wait()
    return {"quiet_per_row_s": quiet / batch, "busy_per_row_s": loaded / batch, "threads": torch.get_num_threads()}


def run(batch: int = 1024, repeats: int = 15) -> list[dict]:
    """One row per wait policy: the child's quiet and busy seconds per row and their ratio."""
    rows = []
    for policy in POLICIES:
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        if policy is not None:
            env["OMP_WAIT_POLICY"] = policy
        done = subprocess.run(
            [sys.executable, "-c", _CHILD.format(batch=batch, repeats=repeats)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        ratio = measured["busy_per_row_s"] / measured["quiet_per_row_s"]
        rows.append({"batch": batch, "omp_wait_policy": policy or "unset", **measured, "ratio": ratio})
    return rows
