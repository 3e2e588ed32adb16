"""Predictor checkpoints: written atomically, read back with a clear error for anything that is not one."""

from __future__ import annotations

from pathlib import Path

import torch

from kinematics import KinematicsLayer
from kinematics.errors import CheckpointMismatchError
from learning.common.io import atomic_torch_save
from learning.grasp_yaw.config import ExperimentCfg
from learning.grasp_yaw.predictors import YawPolicy, build_predictor

FORMAT = "grasp-yaw-ik/predictor/1"


def save_checkpoint(
    path: Path,
    method: str,
    seed: int,
    cfg: ExperimentCfg,
    kinematics: KinematicsLayer,
    state_dict: dict,
    history: dict,
    validation_states: list[dict] = (),
) -> None:
    """``state_dict`` is the selected predictor, ``history`` its trainer's (``TrainingHistory.to_dict()``),
    ``validation_states`` the predictor at each validation."""
    atomic_torch_save(
        {
            "format": FORMAT,
            "method": method,
            "seed": seed,
            "config": cfg.to_dict(),
            "joint_names": list(kinematics.joint_names),
            "geometry_fingerprint": kinematics.model.fingerprint,
            "state_dict": state_dict,
            "history": history,
            "validation_states": list(validation_states),
        },
        path,
    )


def load_checkpoint(path: Path | str, kinematics: KinematicsLayer) -> tuple[YawPolicy, dict]:
    """The frozen policy stored at ``path`` and the checkpoint's metadata."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointMismatchError(f"checkpoint {path} does not exist")
    try:
        data = torch.load(path, map_location=kinematics.device, weights_only=True)
    except Exception as exc:
        raise CheckpointMismatchError(f"{path} is not a readable torch checkpoint: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointMismatchError(f"{path} is not a grasp-yaw predictor checkpoint (format {FORMAT!r})")
    if data["geometry_fingerprint"] != kinematics.model.fingerprint:
        raise CheckpointMismatchError(f"{path} was trained on another robot chain ({data['joint_names']})")
    cfg = ExperimentCfg.from_dict(data["config"])
    predictor = build_predictor(data["method"], kinematics, cfg)
    try:
        predictor.load_state_dict(data["state_dict"])
    except RuntimeError as exc:
        raise CheckpointMismatchError(f"{path}: weights do not fit the {data['method']} predictor: {exc}") from exc
    predictor.to(kinematics.device, kinematics.dtype).eval().requires_grad_(False)
    return YawPolicy(predictor, kinematics, cfg), data
