"""The whole-body layer's cascade steps in one call (``csrc/wholebody_step.c``).

The binding returns ``None`` (the kernel then runs its torch reference) where ``loader.compiled`` refuses the
configuration or a target is not what the plan reads."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kinematics.native import loader


@dataclass(frozen=True)
class StepPlan:
    """What the kernel reads of a layer (``csrc/wholebody_step.c`` documents the layout): the int64 ``plan``, the
    float64 ``settings``, ``arrays`` (the addresses of ``held``, the tree's buffers, which it keeps alive), and per
    target what it reads of one row (``target_specs``: shape, dtype, contiguous strides, size); ``nv``, the levels'
    and inequality rows' counts, the tasks' residuals' total width and the constraints' count."""

    plan: torch.Tensor
    settings: torch.Tensor
    arrays: ctypes.Array
    held: tuple[torch.Tensor, ...]
    target_specs: tuple[tuple[tuple[int, ...], torch.dtype, tuple[int, ...], int], ...]
    nv: int
    n_levels: int
    n_inequalities: int
    residual_width: int
    n_constraints: int


def wholebody_step(
    plan: StepPlan, q: torch.Tensor, targets: Sequence[torch.Tensor], steps: int, evaluate: bool
) -> tuple[torch.Tensor, ...] | None:
    """``steps`` cascade steps from ``q`` ``(B, nq)``: ``(q_next (B, nq), dq (B, nv), level_status (B, n_levels)
    int8, active_inequalities (B, m_in) bool, active_bounds (B, nv) int8)`` (the last step's), then, with
    ``evaluate``, the residuals ``(B, residual_width)`` and violations ``(B, n_constraints)`` at ``q_next`` (else
    ``(B, 0)`` each), or ``None``. Each target
    is ``(B, *shape)`` of its ``plan.target_specs`` entry; a target whose rows are neither one apart nor all one (batch
    stride 0) is copied."""
    if q.ndim != 2 or len(targets) != len(plan.target_specs) or q.dtype is not plan.held[0].dtype:
        return None
    n, nq = q.shape
    kernel = loader.compiled("wholebody_step", (q,), ((n, nq),))
    if kernel is None or n == 0:
        return None
    recording = torch.is_grad_enabled()
    held, addresses, strides = [], [], []
    for target, (shape, dtype, row_strides, size) in zip(targets, plan.target_specs, strict=True):
        if (
            type(target) not in loader.PLAIN
            or not target.is_cpu
            or target.dtype is not dtype
            or target.shape[1:] != shape
            or target.shape[0] != n
            or (recording and target.requires_grad)
        ):
            return None
        stride = target.stride()
        if stride[1:] != row_strides or stride[0] not in (0, size):
            target = target.contiguous()
            stride = (size,)
        held.append(target)
        addresses.append(target.data_ptr())
        strides.append(stride[0])
    q = q.contiguous()
    nv = plan.nv
    q_next, dq = loader.empty(n, nq, dtype=q.dtype), loader.empty(n, nv, dtype=q.dtype)
    status = torch.empty(n, plan.n_levels, dtype=torch.int8)
    active_inequalities = torch.empty(n, plan.n_inequalities, dtype=torch.bool)
    active_bounds = torch.empty(n, nv, dtype=torch.int8)
    pointers = (ctypes.c_void_p * max(1, len(addresses)))(*addresses)
    stride_array = (ctypes.c_longlong * max(1, len(strides)))(*strides)
    residuals = loader.empty(n, plan.residual_width if evaluate else 0, dtype=q.dtype)
    violations = loader.empty(n, plan.n_constraints if evaluate else 0, dtype=q.dtype)
    outputs = (q_next, dq, status, active_inequalities, active_bounds, residuals, violations)
    code = kernel(
        n, torch.get_num_threads(), steps, plan.plan.data_ptr(), plan.settings.data_ptr(), ctypes.addressof(plan.arrays),
        ctypes.addressof(pointers), ctypes.addressof(stride_array), q.data_ptr(),
        *(t.data_ptr() for t in outputs[:5]), *((residuals.data_ptr(), violations.data_ptr()) if evaluate else (None, None)),
    )  # fmt: skip
    loader.checked(code, "wholebody_step")
    return outputs
