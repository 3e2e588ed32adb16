"""The differentiable damped-least-squares IK layer: a fixed number of unsynchronised steps, gradients through them.

Each iteration computes FK and the TCP Jacobian once, then
``q <- clamp(q + step_size * J^T solve(J J^T + damping^2 I, e))`` with ``e`` the root-frame position error and
the shortest axis-angle rotation error. There is no early stop, no ``.item()`` and no data-dependent Python
control flow in the loop, so it runs without host synchronisation on a GPU. Tolerances only classify the final
iterate. Failed solves return the last iterate with differentiable residuals.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, fields

import torch
from torch import nn

from kinematics.batch_last import from_batch_last, to_batch_last, transforms_active
from kinematics.errors import CheckpointMismatchError, ConfigError, ShapeError, UnsupportedTransformError
from kinematics.ik.box_qp import solve_box_qp
from kinematics.ik.fused_solve import KernelInputs, dls_iteration, fused_iterations, fused_solve, settings
from kinematics.ik.implicit import ImplicitIKSolve
from kinematics.lie import pose_error, pose_error_batch_last
from kinematics.lie.rotations import validate_transform
from kinematics.model import KinematicsLayer
from kinematics.model.kinematics_layer import check_tensor
from kinematics.qp import SOLVED, solve_qp


@dataclass(frozen=True)
class DifferentiableIKCfg:
    """Numerical settings of the DLS solve. Units: metres and radians. ``iterations``: DLS steps per solve
    (fixed)."""

    iterations: int = 16
    damping: float = 0.05
    step_size: float = 0.5
    position_tolerance: float = 5e-4
    rotation_tolerance: float = 5e-4
    enforce_joint_limits: bool = True
    validate_inputs: bool = True
    # "clamp": the DLS step, then a hard projection onto the limits. "qp": the damped least-squares step solved
    # as a box-constrained QP (limits as inequalities on q + step_size * dq), ``qp_iterations`` active-set passes.
    step: str = "clamp"
    qp_iterations: int = 8
    # With step="qp" and posture_gain > 0, the second level of a strict cascade pulls bounded joints toward the
    # middle of their range (dq_posture = posture_gain * (middle - q)) while keeping the first level's task motion
    # exactly: J dq = J dq_1 as equality constraints of ``solve_qp`` (a row it cannot solve keeps dq_1).
    posture_gain: float = 0.0
    # Opt-in (the defaults leave the DLS step as the docs define it):
    # residual_damping c > 0: Levenberg-Marquardt style, damping^2 + c |e|_w^2 in each row's system (steps shrink
    # far from the target, the damping falls to ``damping`` near it);
    # error_weights (m for the three position rows, rad for the three rotation rows): the step minimises
    # |W^1/2 (J dq - e)|^2 + lambda |dq|^2, so the system is J J^T + lambda W^-1;
    # hold_joint_box: a joint whose step would leave its limits is held for that step and the step solved again
    # over the other joints (one more 6x6 solve where a joint is blocked), instead of only projected afterwards.
    residual_damping: float = 0.0
    error_weights: tuple[float, float, float, float, float, float] = (1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
    hold_joint_box: bool = False
    # "unrolled": backpropagate through every iteration. "implicit": differentiate the converged solution with
    # the implicit function theorem (one linear solve on the free joints); memory independent of iterations.
    gradient: str = "unrolled"
    implicit_regularization: float = 1e-9

    @property
    def adaptive(self) -> bool:
        """Whether an opt-in option changes the DLS step (``residual_damping``, ``error_weights``,
        ``hold_joint_box``)."""
        return self.residual_damping > 0 or self.error_weights != (1.0,) * 6 or self.hold_joint_box

    def __post_init__(self) -> None:
        check_iterations(self.iterations)
        for name in ("damping", "position_tolerance", "rotation_tolerance"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not self.step_size > 0:
            raise ConfigError(f"step_size must be > 0, got {self.step_size!r}")
        if self.step not in ("clamp", "qp"):
            raise ConfigError(f"step must be 'clamp' or 'qp', got {self.step!r}")
        if self.gradient not in ("unrolled", "implicit"):
            raise ConfigError(f"gradient must be 'unrolled' or 'implicit', got {self.gradient!r}")
        if not isinstance(self.qp_iterations, int) or self.qp_iterations < 1:
            raise ConfigError(f"qp_iterations must be an int >= 1, got {self.qp_iterations!r}")
        if self.posture_gain > 0 and self.step != "qp":
            raise ConfigError("posture_gain > 0 (the second cascade level) needs step='qp'")
        weights = self.error_weights
        if not (isinstance(weights, (tuple, list)) and len(weights) == 6):
            raise ConfigError(f"error_weights must be 6 numbers (3 position, 3 rotation), got {weights!r}")
        if not all(isinstance(w, (int, float)) and math.isfinite(w) and w > 0 for w in weights):
            raise ConfigError(f"error_weights must be finite and > 0, got {weights!r}")
        object.__setattr__(self, "error_weights", tuple(float(w) for w in weights))
        if self.hold_joint_box and (self.step != "clamp" or not self.enforce_joint_limits):
            raise ConfigError("hold_joint_box needs step='clamp' and enforce_joint_limits=True")
        for name in ("posture_gain", "implicit_regularization", "residual_damping"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")


def check_iterations(iterations) -> None:
    if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 0:
        raise ConfigError(f"iterations must be an int >= 0, got {iterations!r}")


@dataclass(frozen=True)
class IKResult:
    """Everything a solve returns; every tensor keeps the broadcast leading dimensions ``(...)``."""

    q: torch.Tensor  # (..., dof) final iterate
    success: torch.Tensor  # (...) bool: residuals under tolerance and inside the physical limits
    position_error: torch.Tensor  # (..., 3) target minus reached TCP position, root frame, metres
    rotation_error: torch.Tensor  # (..., 3) rotation vector taking the reached TCP rotation to the target's
    position_error_norm: torch.Tensor  # (...)
    rotation_error_norm: torch.Tensor  # (...)
    within_limits: torch.Tensor  # (...) bool


class DifferentiableIKLayer(nn.Module):
    """Differentiable fixed-step DLS IK on a ``KinematicsLayer``; one seed per target, no multi-start, no state."""

    def __init__(self, kinematics: KinematicsLayer, cfg: DifferentiableIKCfg | None = None) -> None:
        super().__init__()
        self.kinematics = kinematics
        self.cfg = cfg if cfg is not None else DifferentiableIKCfg()
        self._kernel_inputs = KernelInputs()  # what the fused solve reads besides the rows, rebuilt on change
        self._register_load_state_dict_pre_hook(self._check_checkpoint)

    def forward(
        self, target: torch.Tensor, seed: torch.Tensor | None = None, *, iterations: int | None = None
    ) -> torch.Tensor:
        """``(..., 4, 4)`` targets -> ``(..., dof)`` joints (the final iterate); see ``solve``."""
        return self.solve(target, seed, iterations=iterations).q

    def solve(
        self, target: torch.Tensor, seed: torch.Tensor | None = None, *, iterations: int | None = None
    ) -> IKResult:
        """Solve for ``target`` ``(..., 4, 4)`` in the root frame, seeded at ``seed`` ``(dof,)`` or ``(..., dof)``
        (the default seed when omitted). Leading dimensions broadcast. ``iterations`` overrides
        ``cfg.iterations`` for this call."""
        kin, cfg = self.kinematics, self.cfg
        if iterations is None:
            iterations = cfg.iterations
        check_iterations(iterations)
        if seed is None:
            seed = kin.default_seed()
        check_tensor(target, "target", kin.tcp)
        check_tensor(seed, "seed", kin.tcp)
        needs_grad = torch.is_grad_enabled() and (target.requires_grad or seed.requires_grad)
        if not (needs_grad and cfg.gradient == "implicit"):
            fused = self._solve_fused(target, seed, iterations)
            if fused is not None:
                return fused
        if cfg.validate_inputs:
            validate_transform(target, "target")
            kin.check_joints(seed, "seed")
        elif target.shape[-2:] != (4, 4) or seed.shape[-1:] != (kin.dof,):
            raise ShapeError(f"target must be (..., 4, 4) and seed (..., {kin.dof})")
        try:
            batch = torch.broadcast_shapes(target.shape[:-2], seed.shape[:-1])
        except RuntimeError:
            raise ShapeError(
                f"the batch dimensions of target {tuple(target.shape)} and seed {tuple(seed.shape)} do not broadcast"
            ) from None
        target = target.expand(*batch, 4, 4)
        q = seed.expand(*batch, kin.dof)
        if cfg.gradient == "implicit" and transforms_active():
            raise UnsupportedTransformError(
                "gradient='implicit' supports reverse-mode autograd only (its backward is one linear solve); under "
                "forward-mode AD or torch.func use gradient='unrolled', whose iterations run as plain torch ops"
            )
        if cfg.gradient == "implicit" and torch.is_grad_enabled() and (target.requires_grad or q.requires_grad):
            iterate = functools.partial(self._iterate, iterations=iterations)
            q = ImplicitIKSolve.apply(
                target, q, iterate, self._fk_and_jacobian, _stacked_error, self._free, cfg.implicit_regularization
            )
        else:
            q = self._iterate(target, q, iterations)
        return self.evaluate(target, q)

    def _solve_fused(self, target: torch.Tensor, seed: torch.Tensor, iterations: int) -> IKResult | None:
        """The whole solve as one compiled call (``kinematics.ik.fused_solve``), differentiable; the kernel counts
        the rows whose inputs fail the checks of ``validate_inputs``, and the validators themselves raise the
        failed check's error. ``None`` where the general path must run (it also raises the shape errors)."""
        kin, cfg = self.kinematics, self.cfg
        if cfg.step != "clamp" or iterations == 0 or target.ndim < 2 or target.shape[-2:] != (4, 4):
            return None
        if seed.ndim < 1 or seed.shape[-1] != kin.dof:
            return None
        try:
            batch = torch.broadcast_shapes(target.shape[:-2], seed.shape[:-1])
        except RuntimeError:
            return None
        flat_target = target.expand(*batch, 4, 4).reshape(-1, 4, 4)
        flat_seed = seed.expand(*batch, kin.dof).reshape(-1, kin.dof)
        done = fused_solve(self, self._kernel_inputs, flat_target, flat_seed, iterations)
        if done is None:
            return None
        q, errors, norms, flags, invalid = done
        if cfg.validate_inputs and invalid:
            validate_transform(target, "target")  # raises the failed check's own error
            kin.check_joints(seed, "seed")
            return None
        if len(batch) != 1:
            q, errors, norms, flags = (t.reshape(*batch, t.shape[-1]) for t in (q, errors, norms, flags))
        return IKResult(q, flags[..., 1], errors[..., :3], errors[..., 3:], norms[..., 0], norms[..., 1], flags[..., 0])

    def _iterate(self, target: torch.Tensor, seed: torch.Tensor, iterations: int) -> torch.Tensor:
        """``iterations`` fixed steps from the (projected) seed ``(..., dof)``; no host synchronisation.

        The loop runs in the batch-last layout (``kinematics.batch_last``); only the linear solve takes its
        ``(B, 6, 6)`` view of the damped ``J J^T``.
        """
        kin, cfg = self.kinematics, self.cfg
        batch = seed.shape[:-1]
        target_rot, target_pos = to_batch_last(target[..., :3, :3], 2), to_batch_last(target[..., :3, 3], 1)
        lower, upper = kin.lower[:, None], kin.upper[:, None]
        q = to_batch_last(seed, 1)
        q = torch.clamp(q, lower, upper) if cfg.enforce_joint_limits else q
        recorded = (target_rot, target_pos, q, kin.tcp)
        graph = torch.is_grad_enabled() and any(t.requires_grad for t in recorded)
        if cfg.step == "clamp" and not graph and not transforms_active():  # every iteration in one kernel call
            q = fused_iterations(self, self._kernel_inputs, target_rot, target_pos, q, iterations)
            return from_batch_last(q, batch)
        inputs, params = settings(self, self._kernel_inputs)
        damping_sq = inputs[3][..., None]  # damping^2 W^-1 (6, 6, 1), as the fused kernels read it
        for _ in range(iterations):
            rot, pos, jac_t = kin.model.fk_and_jacobian(q, kin.tcp, batch_last=True)
            if cfg.step == "clamp":  # the fused kernels' step, here with the graph of the chain's own pass
                clamp = cfg.enforce_joint_limits
                q = dls_iteration(q, target_rot, target_pos, rot, pos, jac_t, params, damping_sq, lower, upper, clamp)
            else:
                err = torch.cat(pose_error_batch_last(target_rot, target_pos, rot, pos))  # (6, B)
                q = self._qp_step(q.T, jac_t.permute(2, 1, 0), err.T).T
        return from_batch_last(q, batch)

    def _qp_step(self, q: torch.Tensor, jac: torch.Tensor, err: torch.Tensor) -> torch.Tensor:
        """One step as a box QP: min |J dq - e|^2 + damping^2 |dq|^2 s.t. lower <= q + step_size dq <= upper,
        then (with posture_gain > 0) the posture level of the cascade. Batch first: ``(B, dof)``, ``(B, 6, dof)``."""
        kin, cfg = self.kinematics, self.cfg
        damping_sq = cfg.damping**2 * torch.eye(kin.dof, dtype=q.dtype, device=q.device)
        if cfg.enforce_joint_limits:
            low, high = (kin.lower - q) / cfg.step_size, (kin.upper - q) / cfg.step_size
        else:
            low, high = torch.full_like(q, -torch.inf), torch.full_like(q, torch.inf)
        jt = jac.transpose(-1, -2)
        jtj = jt @ jac
        dq, _ = solve_box_qp(jtj + damping_sq, -(jt @ err[..., None])[..., 0], low, high, cfg.qp_iterations)
        if cfg.posture_gain > 0:
            bounded = torch.isfinite(kin.lower) & torch.isfinite(kin.upper)
            toward_middle = torch.where(bounded, cfg.posture_gain * (kin.default_seed() - q), 0.0)
            eye = torch.eye(kin.dof, dtype=q.dtype, device=q.device)
            kept = (jac @ dq[..., None])[..., 0]
            posture = solve_qp(eye, -toward_middle, jac, kept, lb=low, ub=high)
            dq = torch.where((posture.status == SOLVED)[..., None], posture.x, dq)
        q = q + cfg.step_size * dq
        # The QP keeps q inside; the projection only removes round-off at an active bound.
        return kin.clamp(q) if cfg.enforce_joint_limits else q

    def _fk_and_jacobian(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.kinematics.model.fk_and_jacobian(q, self.kinematics.tcp)

    def _free(self, q: torch.Tensor) -> torch.Tensor:
        """Joints strictly inside their limits (all of them when limits are not enforced)."""
        kin = self.kinematics
        if not self.cfg.enforce_joint_limits:
            return torch.ones_like(q, dtype=torch.bool)
        return (q > kin.lower) & (q < kin.upper)

    def evaluate(self, target: torch.Tensor, q: torch.Tensor) -> IKResult:
        """Residuals and success of joints ``q`` against ``target`` (broadcast), as the solve reports them."""
        kin, cfg = self.kinematics, self.cfg
        batch = torch.broadcast_shapes(target.shape[:-2], q.shape[:-1])
        target, q = target.expand(*batch, 4, 4), q.expand(*batch, kin.dof)
        rot, pos, _ = kin.model.fk_and_jacobian(to_batch_last(q, 1), kin.tcp, with_jacobian=False, batch_last=True)
        position, rotation = pose_error_batch_last(
            to_batch_last(target[..., :3, :3], 2), to_batch_last(target[..., :3, 3], 1), rot, pos
        )
        pos_norm, rot_norm = _safe_norm(position), _safe_norm(rotation)
        inside = kin.within_limits(q)
        success = from_batch_last((pos_norm <= cfg.position_tolerance) & (rot_norm <= cfg.rotation_tolerance), batch)
        success = success & inside
        return IKResult(
            q,
            success,
            from_batch_last(position, batch),
            from_batch_last(rotation, batch),
            from_batch_last(pos_norm, batch),
            from_batch_last(rot_norm, batch),
            inside,
        )

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


def _stacked_error(target: torch.Tensor, reached: torch.Tensor) -> torch.Tensor:
    """``(..., 6)``: position error then rotation error, the DLS right-hand side."""
    return torch.cat(pose_error(target, reached), -1)


def _safe_norm(v: torch.Tensor) -> torch.Tensor:
    """Euclidean norm over the first axis (batch-last vectors ``(3, B)``) with a zero (not NaN) gradient at the
    origin."""
    sq = (v * v).sum(0)
    zero = sq == 0
    return torch.where(zero, 0.0, torch.where(zero, 1.0, sq).sqrt())
