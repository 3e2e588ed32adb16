"""The DLS solve fused into one kernel call, forward and backward (``IK_SOLVE``, ``IK_SOLVE_EVALUATE``,
``IK_SOLVE_VJP``: ``kinematics.native.kernel``).

``DifferentiableIKLayer`` with ``step="clamp"`` runs its whole solve here. On the CPU the compiled kernels of
``kinematics.native`` do, per tile of rows, the seed's projection, every iteration (FK and the Jacobian, the pose
error, the damped ``6 x 6`` system by an inline Cholesky, the update and the projection) and the evaluation at the
final iterate, with the input checks of ``validate_inputs``; the rows are split across threads. A singular system
gives non-finite values and no error, as ``solve_ex(check_errors=False)`` does. Elsewhere (another device or
dtype, no compiler) the kernels' torch references below run the same steps as torch ops. The backward is fused
too: the forward keeps every iterate, and the backward applies the closed forms of the torch path's pieces
(``kinematics.lie.pose_error``, ``kinematics.model.chain_gradient``, the projection's mask, ``kinematics.ik.dls_step``) to the
final evaluation and then to each step in reverse, recomputed at its iterate. ``fused_solve`` returns ``None``
where the layer must record its own iterations' graph instead: a gradient asked of a chain with a prismatic
joint, of the opt-in settings or of a ``tcp`` that requires one, or where no compiled kernel keeps the iterates,
and under a ``torch.func`` transform or forward-mode AD.
"""

from __future__ import annotations

import torch

from kinematics import native
from kinematics.batch_last import first_order, to_batch_last, transforms_active
from kinematics.ik.dls_step import adaptive_dls_step, dls_step
from kinematics.lie import pose_error_batch_last
from kinematics.lie.pose_error import POSE_ERROR
from kinematics.lie.rotations import rotation_tolerance
from kinematics.log_thresholds import NEAR_PI_COS, SMALL_SIN_SQ
from kinematics.model import SerialChainKinematics
from kinematics.model.chain import FK_JACOBIAN
from kinematics.native.kernel import Kernel

# Indices into the settings list the fused kernels take (``native/csrc/fused_ik.c`` reads the first 14 by position;
# 1 and 2 are the rotation log's thresholds, which only the compiled kernels read from it).
STEP, POSITION_TOL, ROTATION_TOL, INPUT_TOL, GROWTH, HOLD = 0, 3, 4, 5, 6, 7
WEIGHTS, DAMPING, REVOLUTE_ONLY = slice(8, 14), 14, 15


class KernelInputs:
    """The tensors the kernels read besides the rows (the chain's blocks, the end transform, the damping matrix,
    the limits) and the settings list, built once and rebuilt only when a tensor they come from is replaced or
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
        # Built afresh, not cached, while torch.compile traces (version counters are data to dynamo) and under a
        # torch.func transform or forward-mode AD (the tensors would be the transform's wrappers).
        fresh = torch.compiler.is_compiling() or transforms_active()
        key = () if fresh else (numbers, *(t._version for t in sources))
        if not fresh and key == self._key and all(a is b for a, b in zip(sources, self._sources, strict=True)):
            return self._value
        damping, step_size, position_tolerance, rotation_tolerance_, input_tolerance, growth, hold, *weights = numbers
        with torch.no_grad():
            local, revolute, end = chain.kernel_geometry(tcp)
            dtype, device = tcp.dtype, tcp.device
            damping_sq = damping**2 * torch.diag(1.0 / torch.tensor(weights, dtype=dtype, device=device))
            inputs = [local, revolute, end.contiguous(), damping_sq, limits[0].detach(), limits[1].detach()]
        values = [step_size, SMALL_SIN_SQ, NEAR_PI_COS, position_tolerance, rotation_tolerance_, input_tolerance]
        params = [*map(float, (*values, growth, hold, *weights, damping)), float(chain.all_revolute)]
        if fresh:
            return inputs, params
        self._key, self._sources, self._value = key, sources, (inputs, params)
        return self._value


def settings(ik, cache: KernelInputs):
    """``(inputs, params)`` of ``ik``'s kinematics and settings, from ``cache``."""
    kin, cfg = ik.kinematics, ik.cfg
    numbers = (cfg.damping, cfg.step_size, cfg.position_tolerance, cfg.rotation_tolerance,
               rotation_tolerance(kin.dtype), cfg.residual_damping, cfg.hold_joint_box, *cfg.error_weights)  # fmt: skip
    return cache.get(kin.model, kin.tcp, (kin.lower, kin.upper), numbers)


# ------------------------------------------------------------------------------------------ torch references
def dls_iteration(q, target_rot, target_pos, rot, pos, jac_t, params, damping_sq, lower, upper, clamp: bool):
    """One iteration of the ``step="clamp"`` solve from FK and Jacobian at ``q`` (batch-last): the DLS step, the
    opt-in one of ``dls_step.adaptive_dls_step`` where the settings ask for it, then the projection."""
    err = torch.cat(pose_error_batch_last(target_rot, target_pos, rot, pos))  # (6, B)
    weights = params[WEIGHTS]
    if params[GROWTH] != 0.0 or params[HOLD] != 0.0 or any(w != 1.0 for w in weights):
        q = adaptive_dls_step(q, jac_t, err, params[DAMPING], params[GROWTH], weights, bool(params[HOLD]),
                              params[STEP], lower, upper)  # fmt: skip
    else:
        q = dls_step(q, jac_t, err, damping_sq, params[STEP])
    return torch.clamp(q, lower, upper) if clamp else q


def _iterations_reference(q, target_rot, target_pos, inputs, iterations, params, clamp, iterates=None):
    local, revolute, end, damping_sq, lower, upper = inputs
    lower, upper, damping_sq = lower[:, None], upper[:, None], damping_sq[..., None]
    revolute_only = params[REVOLUTE_ONLY] == 1.0
    for _ in range(iterations):
        if iterates is not None:
            iterates.append(q)
        rot, pos, jac_t = FK_JACOBIAN(q, local, revolute, end, revolute_only, True)
        q = dls_iteration(q, target_rot, target_pos, rot, pos, jac_t, params, damping_sq, lower, upper, clamp)
    if iterates is not None:
        iterates.append(q)
    return q


def _ik_solve_reference(q0, target_rot, target_pos, inputs, iterations, params, clamp):
    return _iterations_reference(q0, target_rot, target_pos, inputs, iterations, params, clamp).clone()


def _invalid_rows(target: torch.Tensor, seed: torch.Tensor, tolerance: float) -> torch.Tensor:
    """The number of rows whose target ``(B, 4, 4)`` or seed ``(B, dof)`` fails ``validate_inputs``'s checks."""
    finite = torch.isfinite(target).flatten(1).all(1) & torch.isfinite(seed).all(1)
    target = torch.nan_to_num(target)
    eye = torch.eye(4, dtype=target.dtype, device=target.device)
    bottom = (target[:, 3] - eye[3]).abs().amax(1) <= tolerance
    rot = target[:, :3, :3]
    orthonormal = (rot.transpose(1, 2) @ rot - eye[:3, :3]).abs().flatten(1).amax(1) <= tolerance
    return (~(finite & bottom & orthonormal & (torch.linalg.det(rot) > 0))).sum()


def _ik_solve_evaluate_reference(target, seed, inputs, iterations, params, clamp, keep_iterates):
    local, revolute, end, _, lower, upper = inputs
    target_rot, target_pos = to_batch_last(target[:, :3, :3], 2), to_batch_last(target[:, :3, 3], 1)
    q = to_batch_last(seed, 1)
    q = torch.clamp(q, lower[:, None], upper[:, None]) if clamp else q
    stored = [] if keep_iterates else None
    q = _iterations_reference(q, target_rot, target_pos, inputs, iterations, params, clamp, stored)
    rot, pos, _ = FK_JACOBIAN(q, local, revolute, end, params[REVOLUTE_ONLY] == 1.0, False)
    errors = POSE_ERROR(target_rot, target_pos, rot, pos)  # (6, B)
    norms = torch.stack((errors[:3].norm(dim=0), errors[3:].norm(dim=0)), 1)
    inside = ((q >= lower[:, None]) & (q <= upper[:, None])).all(0)
    converged = (norms[:, 0] <= params[POSITION_TOL]) & (norms[:, 1] <= params[ROTATION_TOL])
    flags = torch.stack((inside, inside & converged), 1)
    iterates = torch.stack(stored) if keep_iterates else q.new_empty(0, *q.shape)
    return (
        q.T.contiguous(),
        errors.T.contiguous(),
        norms,
        flags,
        iterates,
        _invalid_rows(target, seed, params[INPUT_TOL]),
    )


def _ik_solve_vjp_reference(iterates, target, inputs, params, clamp, grad, grad_errors):
    """The backward by autograd through the reference's steps, one step at a time from the stored iterates."""
    local, revolute, end = inputs[:3]
    with torch.enable_grad():
        target = target.detach().requires_grad_(True)
        target_rot, target_pos = to_batch_last(target[:, :3, :3], 2), to_batch_last(target[:, :3, 3], 1)
        final = iterates[-1].detach().requires_grad_(True)
        rot, pos, _ = FK_JACOBIAN(final, local, revolute, end, False, False)
        errors = POSE_ERROR(target_rot, target_pos, rot, pos)
        grad_q, grad_target = torch.autograd.grad(errors, (final, target), grad_errors.T, retain_graph=True)
        grad_q = grad_q + grad.T
        for k in range(iterates.shape[0] - 2, -1, -1):
            q = iterates[k].detach().requires_grad_(True)
            step = _iterations_reference(q, target_rot, target_pos, inputs, 1, params, clamp)
            grad_q, more = torch.autograd.grad(step, (q, target), grad_q, retain_graph=True)
            grad_target = grad_target + more
    return grad_q.T.contiguous(), grad_target


IK_SOLVE = Kernel(
    "ik_solve",
    "(Tensor q0, Tensor target_rot, Tensor target_pos, Tensor[] inputs, int iterations, float[] params,"
    " bool clamp) -> Tensor",
    _ik_solve_reference,
)
IK_SOLVE.implement("cpu", native.ik_solve)
IK_SOLVE_EVALUATE = Kernel(
    "ik_solve_evaluate",
    "(Tensor target, Tensor seed, Tensor[] inputs, int iterations, float[] params, bool clamp, bool keep_iterates)"
    " -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    _ik_solve_evaluate_reference,
)
IK_SOLVE_EVALUATE.implement("cpu", native.ik_solve_evaluate)
IK_SOLVE_VJP = Kernel(
    "ik_solve_vjp",
    "(Tensor iterates, Tensor target, Tensor[] inputs, float[] params, bool clamp, Tensor grad, Tensor grad_errors)"
    " -> (Tensor, Tensor)",
    _ik_solve_vjp_reference,
    fake=lambda iterates, target, inputs, params, clamp, grad, grad_errors: (
        torch.empty_like(grad),
        torch.empty_like(target),
    ),
)
IK_SOLVE_VJP.implement("cpu", native.ik_solve_vjp)


# ------------------------------------------------------------------------------------------------- the solve
def fused_iterations(ik, cache: KernelInputs, target_rot, target_pos, q0, iterations: int) -> torch.Tensor:
    """Without a graph: the final iterate ``(dof, B)`` of ``iterations`` steps from the projected seed ``q0``
    ``(dof, B)`` towards the target rotation ``(3, 3, B)`` and position ``(3, B)`` (batch-last)."""
    inputs, params = settings(ik, cache)
    return IK_SOLVE(q0, target_rot, target_pos, inputs, iterations, params, ik.cfg.enforce_joint_limits)


class _FusedSolve(torch.autograd.Function):
    @staticmethod
    def forward(ctx, target, seed, inputs, params, iterations, clamp):
        q, errors, norms, flags, iterates, invalid = IK_SOLVE_EVALUATE(
            target, seed, inputs, iterations, params, clamp, True
        )
        ctx.save_for_backward(target, seed, errors, norms, iterates)
        ctx.settings = (inputs, params, clamp)
        ctx.mark_non_differentiable(flags, invalid)
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
        grad_q0, grad_target = IK_SOLVE_VJP(
            iterates, target, inputs, params, clamp, grad_q.contiguous(), grad_errors.contiguous()
        )
        if clamp:  # the seed's projection (torch.clamp: 1 inside the limits, the bounds included)
            lower, upper = inputs[4], inputs[5]
            grad_q0 = torch.where((seed >= lower) & (seed <= upper), grad_q0, 0.0)
        return grad_target, grad_q0, None, None, None, None


def fused_solve(ik, cache: KernelInputs, target: torch.Tensor, seed: torch.Tensor, iterations: int):
    """The whole solve of ``ik`` (``iterations`` steps) for batch-first ``target`` ``(B, 4, 4)`` and ``seed`` ``(B, dof)``: ``(q, errors
    (B, 6), norms (B, 2), flags (B, 2) within-limits / success, invalid)`` with ``invalid`` the number of rows
    whose inputs fail the checks of ``validate_inputs`` (a tensor), differentiable w.r.t. both inputs where the
    fused backward applies; ``None`` where the layer's own iterations must run instead (their autograd graph): a
    gradient asked through a chain with a prismatic joint, the opt-in settings, a ``tcp`` that requires one or
    an implementation that keeps no iterates, and under ``torch.func`` or forward-mode AD."""
    kin, cfg = ik.kinematics, ik.cfg
    if transforms_active() or target.ndim != 3 or seed.ndim != 2 or target.shape[0] == 0:
        return None
    grad = torch.is_grad_enabled()
    needs_grad = grad and (target.requires_grad or seed.requires_grad)
    if (grad and kin.tcp.requires_grad) or (needs_grad and not (kin.model.all_revolute and not cfg.adaptive)):
        return None
    inputs, params = settings(ik, cache)
    clamp = cfg.enforce_joint_limits
    if not needs_grad:
        q, errors, norms, flags, _, invalid = IK_SOLVE_EVALUATE(target, seed, inputs, iterations, params, clamp, False)
        return q, errors, norms, flags, invalid
    if not IK_SOLVE_EVALUATE.implemented(target, seed, inputs, iterations, params, clamp, True):
        return None  # the torch reference of the fused backward recomputes every step: the layer's graph is cheaper
    return _FusedSolve.apply(target, seed, inputs, params, iterations, clamp)
