"""The batch-last layout the solver computes in: small matrices ``(n, m, B)`` with the batch as the last axis.

Batched 3x3 and 6x6 products with the batch first run through per-matrix BLAS calls and strided kernels that
are several times slower on a CPU than elementwise operations over contiguous rows of ``B`` values. In the
batch-last layout every matrix entry is one such row, so a small product is ``k`` fused multiply-adds of
``(n, m, B)`` tensors. The public API keeps the batch first; these helpers convert at its boundary.

The products carry their own backward (two products of the same kind) instead of the per-operation graph of
broadcast multiply-adds, which costs several times more to traverse. First-order gradients only; under
forward-mode AD or a ``torch.func`` transform (``transforms_active``) the plain torch ops run instead.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
import torch.autograd.forward_ad as _forward_ad
from torch._C import _functorch

from kinematics.errors import UnsupportedTransformError


def transforms_active() -> bool:
    """Whether forward-mode AD (an open ``torch.autograd.forward_ad.dual_level``; ``torch.func.jvp`` opens one
    too) or a ``torch.func`` transform (``vmap``, ``grad``, ``jacrev``, ...) is active.

    The project's custom autograd Functions and compiled kernels define no forward-mode or batching rule, so while
    this holds every caller runs plain torch ops, which carry both. Two global reads: cheap enough per call.
    While ``torch.compile`` traces, the interpreter stack is dynamo's own and says nothing; the forward-mode level
    still does.
    """
    if _forward_ad._current_level >= 0:
        return True
    return not torch.compiler.is_compiling() and _functorch.peek_interpreter_stack() is not None


def first_order(backward: Callable) -> Callable:
    """For the closed-form ``backward`` of a custom autograd Function: refuse, with a typed error, to build a graph
    of it (``create_graph=True``, ``torch.autograd.functional.jvp`` / ``hessian``), whose second-order terms it
    would drop silently. ``torch.func`` transforms run the plain torch ops (``transforms_active``) and so give
    higher derivatives."""

    @functools.wraps(backward)
    def checked(ctx, *grads):
        if torch.is_grad_enabled():  # the engine enables grad mode inside backward only for create_graph=True
            function = type(ctx).__name__.removesuffix("Backward")
            raise UnsupportedTransformError(
                f"second-order gradients through the closed-form backward of {function} are unsupported "
                "(create_graph=True, torch.autograd.functional.jvp or hessian); use torch.autograd.forward_ad or "
                "torch.func (jvp, jacfwd, hessian), which run the plain torch ops"
            )
        return backward(ctx, *grads)

    return checked


def to_batch_last(x: torch.Tensor, event_dims: int) -> torch.Tensor:
    """``(..., *event)`` -> contiguous ``(*event, B)`` with the leading dimensions flattened into ``B``."""
    event = x.shape[x.ndim - event_dims :]
    flat = x.reshape(math.prod(x.shape[: x.ndim - event_dims]), *event)  # not -1: ambiguous for an empty batch
    return flat.permute(*range(1, event_dims + 1), 0).contiguous()


def from_batch_last(x: torch.Tensor, batch: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """``(*event, B)`` -> ``(*batch, *event)``, the inverse of ``to_batch_last``."""
    moved = x.permute(x.ndim - 1, *range(x.ndim - 1))
    return moved.reshape((*batch, *moved.shape[1:]))


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    columns, rows = a[:, :, None].unbind(1), b[None].unbind(1)  # k x (n, 1, B) and k x (1, m, B)
    out = columns[0] * rows[0]
    for column, row in zip(columns[1:], rows[1:], strict=True):
        out = torch.addcmul(out, column, row)
    return out


class _Product(torch.autograd.Function):
    @staticmethod
    def forward(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _product(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(*inputs)

    @staticmethod
    @first_order
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        a, b = ctx.saved_tensors
        grad_a = _product(grad, b.transpose(0, 1)) if ctx.needs_input_grad[0] else None
        grad_b = _product(a.transpose(0, 1), grad) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


def _tracked(*tensors: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors) and not transforms_active()


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``(n, k, B) @ (k, m, B) -> (n, m, B)``; either side may be a strided view (e.g. a transpose)."""
    return _Product.apply(a, b) if _tracked(a, b) else _product(a, b)


def gram(rows: torch.Tensor, constant: torch.Tensor) -> torch.Tensor:
    """``constant + sum_k rows[k] rows[k]^T``: ``(K, n, B)`` vectors -> ``(n, n, B)``, i.e. ``J J^T + C`` with ``J^T``
    stored as ``rows``; ``constant`` broadcasts to ``(n, n, B)``."""
    return (rows[:, :, None] * rows[:, None]).sum(0) + constant


def matmul_constant(a: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """``(n, k, B) @ (k, p) -> (n, p, B)`` for a matrix ``m`` without a batch axis."""
    return (a[:, :, None, :] * m[None, :, :, None]).sum(1)


def cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cross product over axis 1 of ``(n, 3, B)`` vectors."""
    ax, ay, az = a.unbind(1)
    bx, by, bz = b.unbind(1)
    return torch.stack((ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx), 1)
