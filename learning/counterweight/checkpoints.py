"""Counterweight policy checkpoints: written atomically with the experiment config, the method that trained the
policy and the whole-body layer's geometry fingerprint (robot, payload, tasks, constraints); read back with a
typed error for anything else."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from kinematics.errors import CheckpointMismatchError
from learning.common.io import atomic_torch_save
from learning.counterweight.config import ExperimentCfg
from learning.counterweight.methods import make_policy
from learning.counterweight.problem import CounterweightProblem

FORMAT = "grasp-yaw-ik/counterweight-policy/2"


def save_policy(
    path: Path, method: str, key: str, seed: int, cfg: ExperimentCfg, problem: CounterweightProblem, state: dict
) -> None:
    """``method`` builds the policy (``learning.counterweight.methods``); ``key`` names the run in the report."""
    atomic_torch_save(
        {
            "format": FORMAT,
            "method": method,
            "key": key,
            "seed": seed,
            "config": cfg.to_dict(),
            "geometry_fingerprint": problem.layers["body"].geometry_fingerprint(),
            "state_dict": state,
        },
        path,
    )


def load_policy(path: Path | str, problem: CounterweightProblem) -> tuple[nn.Module, dict]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointMismatchError(f"checkpoint {path} does not exist")
    try:
        data = torch.load(path, weights_only=True)
    except Exception as exc:
        raise CheckpointMismatchError(f"{path} is not a readable torch checkpoint: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointMismatchError(f"{path} is not a counterweight policy checkpoint (format {FORMAT!r})")
    if data["geometry_fingerprint"] != problem.layers["body"].geometry_fingerprint():
        raise CheckpointMismatchError(f"{path} was trained on another robot, payload or task set")
    cfg = ExperimentCfg.from_dict(data["config"])
    try:
        policy = make_policy(data["method"], problem, cfg)
        policy.load_state_dict(data["state_dict"])
    except (RuntimeError, ValueError) as exc:
        raise CheckpointMismatchError(f"{path}: weights do not fit the policy: {exc}") from exc
    return policy.eval().requires_grad_(False), data
