"""The DLS solve fused into one compiled call (``kinematics.native``), forward and backward.

``DifferentiableIKLayer`` with ``step="clamp"`` runs its whole solve here on the CPU: per tile of rows, the seed's
projection, every iteration (FK and the Jacobian, the pose error, the damped ``6 x 6`` system by an inline
Cholesky, the update and the projection) and the evaluation at the final iterate, with the input checks of
``validate_inputs``; the rows are split across threads. A singular system gives non-finite values and no error, as
``solve_ex(check_errors=False)`` does. The backward is fused too: the forward keeps every iterate, and the backward
applies the closed forms of the torch path's pieces (``kinematics.pose_error``, ``kinematics.chain_gradient``, the
projection's mask, ``kinematics.dls_step``) to the final evaluation and then to each step in reverse, recomputed at
its iterate. Each function returns ``None`` wherever the torch ops must run instead: no compiled kernels,
another device or dtype, a ``torch.func`` transform or forward-mode AD, a gradient asked of a chain with a
prismatic joint or of a ``tcp`` that requires one.
"""

from __future__ import annotations

import torch

from kinematics import native
from kinematics.batch_last import first_order, transforms_active
from kinematics.chain import SerialChainKinematics
from kinematics.rotations import NEAR_PI_COS, SMALL_SIN_SQ, rotation_tolerance


class KernelInputs:
    """The tensors the kernels read besides the rows (the chain's blocks, the end transform, the damping matrix,
    the limits, the scalar parameters), built once and rebuilt only when a tensor they come from is replaced or
    changed in place (tensor identity and version counter; the cache holds the tensors, so an identity is never
    reused by another)."""

    def __init__(self) -> None:
        self._key: tuple = ()
        self._sources: tuple[torch.Tensor, ...] = ()
        self._value: tuple = ()

    def get(self, chain: SerialChainKinematics, tcp: torch.Tensor, limits, numbers: tuple[float, ...]):
        buffers = chain._buffers
        sources = (*(buffers[k] for k in ("local_constant", "local_sine", "local_versine", "local_slide")),
                   buffers["revolute_mask"], buffers["tail"], tcp, *limits)  # fmt: skip
        key = (numbers, *(t._version for t in sources))
        if key == self._key and all(a is b for a, b in zip(sources, self._sources, strict=True)):
            return self._value
        damping, step_size, position_tolerance, rotation_tolerance_, input_tolerance, growth, hold, *weights = numbers
        with torch.no_grad():
            local, revolute, end = chain.kernel_geometry(tcp)
            dtype, device = tcp.dtype, tcp.device
            damping_sq = damping**2 * torch.diag(1.0 / torch.tensor(weights, dtype=dtype, device=device))
            inputs = (local, revolute, end.contiguous(), damping_sq, limits[0].detach(), limits[1].detach())
            values = [step_size, SMALL_SIN_SQ, NEAR_PI_COS, position_tolerance, rotation_tolerance_, input_tolerance]
            params = torch.tensor([*values, growth, float(hold), *weights], dtype=dtype)
        self._key, self._sources, self._value = key, sources, (inputs, params)
        return self._value


def settings(ik, cache: KernelInputs):
    """``(inputs, params)`` of ``ik``'s kinematics and settings, from ``cache``."""
    kin, cfg = ik.kinematics, ik.cfg
    numbers = (cfg.damping, cfg.step_size, cfg.position_tolerance, cfg.rotation_tolerance,
               rotation_tolerance(kin.dtype), cfg.residual_damping, cfg.hold_joint_box, *cfg.error_weights)  # fmt: skip
    return cache.get(kin.model, kin.tcp, (kin.lower, kin.upper), numbers)


def fused_iterations(ik, cache: KernelInputs, target_rot, target_pos, q0) -> torch.Tensor | None:
    """Without a graph: the final iterate ``(dof, B)`` of the solve from the projected seed ``q0`` ``(dof, B)``
    towards the target rotation ``(3, 3, B)`` and position ``(3, B)`` (batch-last), or ``None``."""
    recorded = (target_rot, target_pos, q0, ik.kinematics.tcp)
    if transforms_active() or (torch.is_grad_enabled() and any(t.requires_grad for t in recorded)):
        return None
    inputs, params = settings(ik, cache)
    return native.ik_solve(
        q0, target_rot, target_pos, inputs, ik.cfg.max_iterations, params, ik.cfg.enforce_joint_limits
    )


class _FusedSolve(torch.autograd.Function):
    @staticmethod
    def forward(ctx, target, seed, inputs, params, iterations, clamp):
        q, errors, norms, flags, iterates, invalid = native.ik_solve_evaluate(
            target, seed, inputs, iterations, params, clamp, keep_iterates=True
        )
        ctx.save_for_backward(target, seed, errors, norms, iterates)
        ctx.settings = (inputs, params, clamp)
        ctx.mark_non_differentiable(flags)
        return q, errors, norms, flags, invalid

    @staticmethod
    @first_order
    def backward(ctx, grad_q, grad_errors, grad_norms, _grad_flags, _grad_invalid):
        target, seed, errors, norms, iterates = ctx.saved_tensors
        inputs, params, clamp = ctx.settings
        grad_q = torch.zeros_like(seed) if grad_q is None else grad_q
        grad_errors = torch.zeros_like(errors) if grad_errors is None else grad_errors
        if grad_norms is not None:  # d|e|/de = e / |e|, 0 at the origin (as the torch path's _safe_norm)
            unit = torch.where(norms > 0, grad_norms / torch.where(norms > 0, norms, 1.0), 0.0)
            grad_errors = grad_errors + errors * unit.repeat_interleave(3, -1)
        grad_q0, grad_target = native.ik_solve_vjp(
            iterates, target, inputs, params, clamp, grad_q.contiguous(), grad_errors.contiguous()
        )
        if clamp:  # the seed's projection (torch.clamp: 1 inside the limits, the bounds included)
            lower, upper = inputs[4], inputs[5]
            grad_q0 = torch.where((seed >= lower) & (seed <= upper), grad_q0, 0.0)
        return grad_target, grad_q0, None, None, None, None


def fused_solve(ik, cache: KernelInputs, target: torch.Tensor, seed: torch.Tensor):
    """The whole solve of ``ik`` for batch-first ``target`` ``(B, 4, 4)`` and ``seed`` ``(B, dof)``: ``(q, errors
    (B, 6), norms (B, 2), flags (B, 2) within-limits / success, invalid)`` with ``invalid`` the number of rows
    whose inputs fail the checks of ``validate_inputs``, differentiable w.r.t. both inputs; or ``None``."""
    kin, cfg = ik.kinematics, ik.cfg
    if transforms_active() or target.ndim != 3 or seed.ndim != 2 or target.shape[0] == 0:
        return None
    grad = torch.is_grad_enabled()
    needs_grad = grad and (target.requires_grad or seed.requires_grad)
    if (grad and kin.tcp.requires_grad) or (needs_grad and not (kin.model.all_revolute and not cfg.adaptive)):
        return None  # the fused backward is the default step's (the opt-in ones differentiate by autograd)
    inputs, params = settings(ik, cache)
    if not needs_grad:
        done = native.ik_solve_evaluate(target, seed, inputs, cfg.max_iterations, params, cfg.enforce_joint_limits)
        return None if done is None else (*done[:4], done[5])
    with torch.no_grad():  # the kernel takes these tensors (checked without the graph the Function's forward has)
        if not native.ik_solve_evaluate_accepts(target, seed, inputs):
            return None
    return _FusedSolve.apply(target, seed, inputs, params, cfg.max_iterations, cfg.enforce_joint_limits)
