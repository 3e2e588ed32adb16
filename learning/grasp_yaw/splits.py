"""Goal sets and the experiment's splits: train, validation, IID test, disjoint-spatial test, initial-state shift.

Every split is drawn from its own ``torch.Generator`` seeded from the experiment's split seed, so a run's
splits are reproducible and saved beside it. The disjoint-spatial region is rejected when sampling train,
validation and IID test goals and is the only region sampled for the disjoint-spatial test.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from kinematics import KinematicsLayer
from kinematics.errors import ConfigError
from learning.common.io import atomic_torch_save
from learning.common.panda import ready_pose
from learning.grasp_yaw.config import ExperimentCfg, StartStateCfg, WorkspaceCfg

SPLITS = ("train", "validation", "test_iid", "test_spatial", "test_shift")
TEST_SPLITS = ("test_iid", "test_spatial", "test_shift")


@dataclass
class GoalSet:
    """``p`` ``(N, 3)`` grasp points and ``q0`` ``(N, dof)`` initial joints (also the IK seeds)."""

    p: torch.Tensor
    q0: torch.Tensor

    def __len__(self) -> int:
        return self.p.shape[0]

    def subset(self, index: torch.Tensor | slice) -> GoalSet:
        return GoalSet(self.p[index], self.q0[index])

    def to(self, device: torch.device | str, dtype: torch.dtype) -> GoalSet:
        return GoalSet(self.p.to(device, dtype), self.q0.to(device, dtype))


def in_heldout(p: torch.Tensor, ws: WorkspaceCfg) -> torch.Tensor:
    """``(..., 3) -> (...)`` bool: the point lies in the disjoint-spatial region."""
    x, y = p[..., 0], p[..., 1]
    return (x >= ws.heldout_x[0]) & (x <= ws.heldout_x[1]) & (y >= ws.heldout_y[0]) & (y <= ws.heldout_y[1])


def _uniform(gen: torch.Generator, n: int, bounds: tuple[float, float]) -> torch.Tensor:
    return bounds[0] + (bounds[1] - bounds[0]) * torch.rand(n, generator=gen, dtype=torch.float64)


def sample_points(gen: torch.Generator, n: int, ws: WorkspaceCfg, heldout: bool) -> torch.Tensor:
    """``(n, 3)`` points: uniform in the workspace outside the held-out region, or uniform inside it."""
    if heldout:
        return torch.stack((_uniform(gen, n, ws.heldout_x), _uniform(gen, n, ws.heldout_y), _uniform(gen, n, ws.z)), -1)
    chunks, count = [], 0
    while count < n:
        p = torch.stack((_uniform(gen, 2 * n, ws.x), _uniform(gen, 2 * n, ws.y), _uniform(gen, 2 * n, ws.z)), -1)
        p = p[~in_heldout(p, ws)]
        chunks.append(p)
        count += p.shape[0]
    return torch.cat(chunks)[:n]


def start_posture(kinematics: KinematicsLayer, cfg: StartStateCfg) -> torch.Tensor:
    """``(dof,)`` float64 CPU: the posture the start states are drawn around (the robot's ready pose by default)."""
    if not cfg.posture:
        return ready_pose(dtype=torch.float64)
    if len(cfg.posture) != kinematics.dof:
        raise ConfigError(f"start posture has {len(cfg.posture)} values for a {kinematics.dof}-joint arm")
    return torch.tensor(cfg.posture, dtype=torch.float64)


def sample_start_states(
    gen: torch.Generator, n: int, kinematics: KinematicsLayer, cfg: StartStateCfg, shifted: bool
) -> torch.Tensor:
    """``(n, dof)`` initial joints inside the limits, drawn around ``start_posture`` as ``cfg.distribution`` says."""
    lower, upper = kinematics.lower.double().cpu(), kinematics.upper.double().cpu()
    q = start_posture(kinematics, cfg).expand(n, -1).clone()
    if cfg.distribution == "box":
        q += cfg.box_half_width * (2 * torch.rand(n, kinematics.dof, generator=gen, dtype=torch.float64) - 1)
        q[:, -1] += cfg.wrist_half_width * (2 * torch.rand(n, generator=gen, dtype=torch.float64) - 1)
        if shifted:
            q += torch.tensor(cfg.shift_offsets, dtype=torch.float64)
    else:
        noise = cfg.shift_noise if shifted else cfg.noise
        q[:, :6] += noise * torch.randn(n, 6, generator=gen, dtype=torch.float64)
        if shifted:
            q[:, 0] = cfg.shift_base_range * (2 * torch.rand(n, generator=gen, dtype=torch.float64) - 1)
        q[:, 6] = lower[6] + (upper[6] - lower[6]) * torch.rand(n, generator=gen, dtype=torch.float64)
    # Stay a hair inside the limits so the seed is never on a clamp boundary.
    margin = 1e-3
    return torch.clamp(q, lower + margin, upper - margin)


def make_splits(cfg: ExperimentCfg, kinematics: KinematicsLayer) -> dict[str, GoalSet]:
    """All five splits, deterministic from ``cfg.split_seed`` (float64, CPU)."""
    splits = {}
    for index, name in enumerate(SPLITS):
        gen = torch.Generator().manual_seed(cfg.split_seed * 100 + index)
        n = getattr(cfg.sizes, name)
        p = sample_points(gen, n, cfg.workspace, heldout=name == "test_spatial")
        q0 = sample_start_states(gen, n, kinematics, cfg.start, shifted=name == "test_shift")
        splits[name] = GoalSet(p, q0)
    return splits


def save_splits(splits: dict[str, GoalSet], path: Path) -> None:
    atomic_torch_save({name: {"p": s.p, "q0": s.q0} for name, s in splits.items()}, path)


def load_splits(path: Path) -> dict[str, GoalSet]:
    data = torch.load(path, weights_only=True)
    return {name: GoalSet(d["p"], d["q0"]) for name, d in data.items()}
