"""The first-order gradient of an all-revolute chain's FK + Jacobian in closed form.

For revolute joint ``k`` with root-frame axis ``z_k`` through ``o_k`` and the TCP at ``p`` with rotation ``R``:
``dp/dq_k = J_k = z_k x (p - o_k)``, ``dR/dq_k = [z_k]x R``, and the Jacobian's own derivatives are
``dJ_i/dq_k = z_k x J_i`` and ``dz_i/dq_k = z_k x z_i`` for ``k < i``, ``dJ_i/dq_k = z_i x J_k`` and
``dz_i/dq_k = 0`` for ``k >= i``. Contracted with the output gradients ``G_R, G_p, G_J (linear), G_z``:

    dq_k = z_k . (omega + sum_{i > k} (J_i x G_J,i + z_i x G_z,i)) + J_k . (G_p + sum_{i <= k} G_J,i x z_i)

with ``omega = vex-like(R G_R^T)``: two running sums over the joints instead of the graph of the forward pass,
which costs several times the forward to traverse. First-order only, like the rest of the layer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from kinematics import native
from kinematics.batch_last import cross, first_order, matmul
from kinematics.native.kernel import Kernel


class RevoluteChainKinematics(torch.autograd.Function):
    """``apply(q, evaluate) -> (rotation (3, 3, B), position (3, B), jac_t (dof, 6, B))`` where ``evaluate`` runs
    the batch-last pass; the backward is the closed form above."""

    @staticmethod
    def forward(q: torch.Tensor, evaluate: Callable) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return evaluate(q)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        rot, _, jac_t = output
        ctx.save_for_backward(rot, jac_t)

    @staticmethod
    @first_order
    def backward(ctx, grad_rot, grad_pos, grad_jac) -> tuple[torch.Tensor, None]:
        rot, jac_t = ctx.saved_tensors
        return CHAIN_VJP(rot, jac_t, grad_rot, grad_pos, grad_jac), None


def _chain_vjp_reference(
    rot: torch.Tensor, jac_t: torch.Tensor, grad_rot: torch.Tensor, grad_pos: torch.Tensor, grad_jac: torch.Tensor
) -> torch.Tensor:
    linear, axes = jac_t.split([3, 3], 1)  # (dof, 3, B) each
    grad_linear, grad_axes = grad_jac.split([3, 3], 1)
    m = matmul(rot, grad_rot.transpose(0, 1))  # R G_R^T: <G_R, [z]x R> = z . omega
    omega = torch.stack((m[1, 2] - m[2, 1], m[2, 0] - m[0, 2], m[0, 1] - m[1, 0]))
    later = cross(linear, grad_linear) + cross(axes, grad_axes)
    after = later.sum(0) - later.cumsum(0)  # sum over i > k
    upto = cross(grad_linear, axes).cumsum(0)  # sum over i <= k
    grad_q = (axes * (after + omega)).sum(1) + (linear * (upto + grad_pos)).sum(1)
    return grad_q


# (dof, B): the gradient to q of an all-revolute chain's rotation (3, 3, B), position (3, B) and transposed
# Jacobian (dof, 6, B), from the pass's rotation and Jacobian and the three upstream gradients.
CHAIN_VJP = Kernel(
    "chain_vjp",
    "(Tensor rot, Tensor jac_t, Tensor grad_rot, Tensor grad_pos, Tensor grad_jac) -> Tensor",
    _chain_vjp_reference,
)
CHAIN_VJP.implement("cpu", native.chain_vjp)
