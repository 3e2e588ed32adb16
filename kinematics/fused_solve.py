"""The DLS solve's iterations fused into one compiled call (``kinematics.native.ik_solve``), forward and backward.

``DifferentiableIKLayer`` with ``step="clamp"`` runs every iteration of its solve here on the CPU: per tile of rows,
FK and the Jacobian, the pose error, the damped ``6 x 6`` system by an inline Cholesky (no error on a singular
system: non-finite values, as ``solve_ex(check_errors=False)`` gives), the update and the projection, with the
rows split across threads. The backward is fused too: the forward keeps the iterate before each step, and the
backward walks the steps in reverse, recomputing each step at its iterate and applying the closed forms of the
torch path's pieces (the projection's mask, ``kinematics.dls_step``, ``kinematics.pose_error``,
``kinematics.chain_gradient``). ``fused_dls_solve`` returns ``None`` wherever the torch ops must run instead:
no compiled kernels, another device or dtype, a ``torch.func`` transform or forward-mode AD, a gradient asked of
a chain with a prismatic joint or of a ``tcp`` that requires one.
"""

from __future__ import annotations

import torch

from kinematics import native
from kinematics.batch_last import first_order, transforms_active
from kinematics.chain import SerialChainKinematics


class _FusedSolveGradient(torch.autograd.Function):
    """Attaches ``ik_solve_vjp`` to a final iterate the forward kernel already computed."""

    @staticmethod
    def forward(ctx, q0, target_rot, target_pos, final, iterates, settings):
        ctx.save_for_backward(iterates, target_rot, target_pos)
        ctx.settings = settings
        return final

    @staticmethod
    @first_order
    def backward(ctx, grad):
        iterates, target_rot, target_pos = ctx.saved_tensors
        geometry, damping_sq, limits, step_size, clamp = ctx.settings
        grads = native.ik_solve_vjp(
            iterates, target_rot, target_pos, geometry, damping_sq, limits, step_size, clamp, grad.contiguous()
        )
        if grads is None:  # the forward's kernel ran, so its backward exists for the same tensors
            raise RuntimeError("the fused IK backward is unavailable for tensors its forward accepted")
        grad_q0, grad_rot, grad_pos = grads
        return grad_q0, grad_rot, grad_pos, None, None, None


def fused_dls_solve(
    chain: SerialChainKinematics,
    tcp: torch.Tensor,
    limits: tuple[torch.Tensor, torch.Tensor],
    target_rot: torch.Tensor,
    target_pos: torch.Tensor,
    q0: torch.Tensor,
    iterations: int,
    damping: float,
    step_size: float,
    clamp: bool,
) -> torch.Tensor | None:
    """The final iterate ``(dof, B)`` of ``iterations`` DLS steps from the projected seed ``q0`` ``(dof, B)``
    towards the target rotation ``(3, 3, B)`` and position ``(3, B)`` (batch-last, full batch), or ``None``."""
    if transforms_active() or iterations == 0:
        return None
    inputs = (q0, target_rot, target_pos)
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in inputs)
    if tcp.requires_grad and torch.is_grad_enabled():
        return None
    if needs_grad and not chain.all_revolute:
        return None
    with torch.no_grad():
        geometry = chain.kernel_geometry(tcp)
        damping_sq = damping**2 * torch.eye(6, dtype=q0.dtype, device=q0.device)
        done = native.ik_solve(
            q0, target_rot, target_pos, geometry, damping_sq, limits, iterations, step_size, clamp, needs_grad
        )
    if done is None:
        return None
    final, iterates = done
    if not needs_grad:
        return final
    settings = (geometry, damping_sq, limits, step_size, clamp)
    return _FusedSolveGradient.apply(q0, target_rot, target_pos, final, iterates, settings)


def fused_solve_without_graph(
    chain: SerialChainKinematics,
    tcp: torch.Tensor,
    limits: tuple[torch.Tensor, torch.Tensor],
    target: torch.Tensor,
    seed: torch.Tensor,
    iterations: int,
    damping: float,
    step_size: float,
    clamp: bool,
    tolerances: tuple[float, float],
) -> tuple[torch.Tensor, ...] | None:
    """A whole solve without a graph in one compiled call, the evaluation at the final iterate included:
    ``target`` ``(B, 4, 4)`` and ``seed`` ``(B, dof)`` batch-first -> ``native.ik_solve_evaluate``'s outputs, or
    ``None`` where the torch ops must run (the caller checks that no gradient is asked for)."""
    if transforms_active():
        return None
    damping_sq = damping**2 * torch.eye(6, dtype=seed.dtype, device=seed.device)
    geometry = chain.kernel_geometry(tcp)
    return native.ik_solve_evaluate(
        target, seed, geometry, damping_sq, limits, iterations, step_size, clamp, tolerances
    )
