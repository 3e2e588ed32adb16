"""The differentiable damped-least-squares IK layer: a fixed number of unsynchronised steps, gradients through them.

Each iteration computes FK and the TCP Jacobian once, then
``q <- clamp(q + step_size * J^T solve(J J^T + damping^2 I, e))`` with ``e`` the root-frame position error and
the shortest axis-angle rotation error. There is no early stop, no ``.item()`` and no data-dependent Python
control flow in the loop, so it runs without host synchronisation on a GPU. Tolerances only classify the final
iterate. Failed solves return the last iterate with differentiable residuals.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import torch
from torch import nn

from kinematics.errors import CheckpointMismatchError, ConfigError, ShapeError
from kinematics.layer import KinematicsLayer, check_tensor
from kinematics.rotations import so3_log, validate_transform


@dataclass(frozen=True)
class DifferentiableIKCfg:
    """Numerical settings of the DLS solve. Units: metres and radians."""

    max_iterations: int = 16
    damping: float = 0.05
    step_size: float = 0.5
    position_tolerance: float = 5e-4
    rotation_tolerance: float = 5e-4
    enforce_joint_limits: bool = True
    validate_inputs: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.max_iterations, int) or self.max_iterations < 0:
            raise ConfigError(f"max_iterations must be an int >= 0, got {self.max_iterations!r}")
        for name in ("damping", "position_tolerance", "rotation_tolerance"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not self.step_size > 0:
            raise ConfigError(f"step_size must be > 0, got {self.step_size!r}")


@dataclass
class IKResult:
    """Everything a solve returns; every tensor keeps the broadcast leading dimensions ``(...)``."""

    qpos: torch.Tensor  # (..., dof) final iterate
    success: torch.Tensor  # (...) bool: residuals under tolerance and inside the physical limits
    position_error: torch.Tensor  # (..., 3) target minus reached TCP position, root frame, metres
    rotation_error: torch.Tensor  # (..., 3) rotation vector taking the reached TCP rotation to the target's
    position_error_norm: torch.Tensor  # (...)
    rotation_error_norm: torch.Tensor  # (...)
    within_limits: torch.Tensor  # (...) bool


def pose_error(target: torch.Tensor, reached: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Root-frame position error ``(..., 3)`` and shortest rotation error ``log(R_target R_reached^T)`` ``(..., 3)``."""
    position = target[..., :3, 3] - reached[..., :3, 3]
    rotation = so3_log(target[..., :3, :3] @ reached[..., :3, :3].transpose(-1, -2))
    return position, rotation


class DifferentiableIKLayer(nn.Module):
    """Differentiable fixed-step DLS IK on a ``KinematicsLayer``; one seed per target, no multi-start, no state."""

    def __init__(self, kinematics: KinematicsLayer, cfg: DifferentiableIKCfg | None = None) -> None:
        super().__init__()
        self.kinematics = kinematics
        self.cfg = cfg if cfg is not None else DifferentiableIKCfg()
        self._register_load_state_dict_pre_hook(self._check_checkpoint)

    def forward(self, target: torch.Tensor, seed: torch.Tensor | None = None) -> torch.Tensor:
        """``(..., 4, 4)`` targets -> ``(..., dof)`` joints (the final iterate)."""
        return self.solve(target, seed).qpos

    def solve(self, target: torch.Tensor, seed: torch.Tensor | None = None) -> IKResult:
        """Solve for ``target`` ``(..., 4, 4)`` in the root frame, seeded at ``seed`` ``(dof,)`` or ``(..., dof)``
        (the default seed when omitted). Leading dimensions broadcast."""
        kin, cfg = self.kinematics, self.cfg
        if seed is None:
            seed = kin.default_seed()
        check_tensor(target, "target", kin.tcp)
        if cfg.validate_inputs:
            validate_transform(target, "target")
            kin.check_joints(seed, "seed")
        elif target.shape[-2:] != (4, 4) or seed.shape[-1:] != (kin.dof,):
            raise ShapeError(f"target must be (..., 4, 4) and seed (..., {kin.dof})")
        check_tensor(seed, "seed", kin.tcp)
        batch = torch.broadcast_shapes(target.shape[:-2], seed.shape[:-1])
        target = target.expand(*batch, 4, 4)
        q = seed.expand(*batch, kin.dof)
        project = kin.clamp if cfg.enforce_joint_limits else (lambda x: x)
        q = project(q)
        eye = torch.eye(6, dtype=q.dtype, device=q.device)
        damping_sq = cfg.damping**2 * eye
        for _ in range(cfg.max_iterations):
            pose, jac = kin.model.fk_and_jacobian(q, kin.tcp)
            err = torch.cat(pose_error(target, pose), -1)
            jt = jac.transpose(-1, -2)
            x, _ = torch.linalg.solve_ex(jac @ jt + damping_sq, err[..., None], check_errors=False)
            q = project(q + cfg.step_size * (jt @ x)[..., 0])
        return self.evaluate(target, q)

    def evaluate(self, target: torch.Tensor, q: torch.Tensor) -> IKResult:
        """Residuals and success of joints ``q`` against ``target`` (broadcast), as the solve reports them."""
        kin, cfg = self.kinematics, self.cfg
        reached = kin.model.fk_and_jacobian(q, kin.tcp, with_jacobian=False)[0]
        position, rotation = pose_error(target, reached)
        pos_norm = position.norm(dim=-1)
        rot_norm = _safe_norm(rotation)
        inside = kin.within_limits(q)
        success = (pos_norm <= cfg.position_tolerance) & (rot_norm <= cfg.rotation_tolerance) & inside
        return IKResult(q, success, position, rotation, pos_norm, rot_norm, inside)

    def get_extra_state(self) -> dict:
        return {"cfg": asdict(self.cfg)}

    def _check_checkpoint(self, state_dict, prefix, *args) -> None:
        # Check chain and TCP before set_extra_state replaces cfg, so that a mismatching load changes nothing.
        self.kinematics._check_checkpoint(state_dict, prefix + "kinematics.", *args)

    def set_extra_state(self, state: dict) -> None:
        known = {f.name for f in fields(DifferentiableIKCfg)}
        cfg = state.get("cfg") if isinstance(state, dict) else None
        if not isinstance(cfg, dict) or not set(cfg) <= known:
            raise CheckpointMismatchError(f"the state dict's IK settings {cfg!r} do not match DifferentiableIKCfg")
        self.cfg = DifferentiableIKCfg(**cfg)


def _safe_norm(v: torch.Tensor) -> torch.Tensor:
    """Euclidean norm over the last axis with a zero (not NaN) gradient at the origin."""
    sq = (v * v).sum(-1)
    zero = sq == 0
    return torch.where(zero, 0.0, torch.where(zero, 1.0, sq).sqrt())
