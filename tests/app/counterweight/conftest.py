"""Fixtures of the G1 scene's tests: one torch thread as the viewer runs, in-process G1 viewers closed at teardown,
a counterweight run folder laid out as training writes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from viewer_support import free_port

from app.config import ViewerConfig
from app.counterweight.methods import RUN_KEYS
from app.counterweight.scene import launch_g1
from learning.counterweight.checkpoints import save_policy
from learning.counterweight.config import PRESETS
from learning.counterweight.experiment import build_problem, checkpoint_path
from learning.counterweight.goals import SplitGoals, goal_points, save_splits
from learning.counterweight.methods import GRADIENT_METHODS, make_policy


@pytest.fixture
def one_thread():
    """The viewer's process runs torch on one thread (``python -m app --threads 1``): so do these tests."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def start_g1(one_thread):
    viewers = []

    def start(**kwargs):
        viewer = launch_g1(ViewerConfig(port=free_port(), robot="g1", preset="full", **kwargs))
        viewers.append(viewer)
        return viewer

    yield start
    for viewer in viewers:
        viewer.close()


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory) -> Path:
    """A counterweight run folder as ``python -m learning train --task counterweight`` lays it out (smoke preset,
    seed 0): every policy checkpoint, each with small random weights (so that each chooses other body targets),
    and splits; no report."""
    cfg = PRESETS["smoke"]
    run = tmp_path_factory.mktemp("counterweight-run")
    problem = build_problem(cfg)
    (run / "config.json").write_text(json.dumps(cfg.to_dict()))
    keys = ["gradient", *(key for key in RUN_KEYS if key != "constant")]
    for index, key in enumerate([*keys, "constant"]):
        method = key if key in (*GRADIENT_METHODS, "constant") else key.rsplit("_", 1)[0]  # es_seconds -> es
        torch.manual_seed(index)
        policy = make_policy(method, problem, cfg)
        with torch.no_grad():
            for parameter in policy.parameters():
                parameter.add_(0.05 * torch.randn_like(parameter))
        path = run / "checkpoints" / "constant.pt" if key == "constant" else checkpoint_path(run, 0, key)
        save_policy(path, method, key, 0, cfg, problem, policy.state_dict())
    shoulder = problem.shoulder.double()
    goals = goal_points(
        shoulder, *(torch.tensor(v, dtype=torch.float64) for v in ([0.38, 0.38], [0.0, -2.7], [-0.2, -0.2]))
    )
    split = SplitGoals(goals, torch.tensor([0, 1]), 2)
    save_splits({"train": split, "validation": split}, run / "splits.pt")
    return run
