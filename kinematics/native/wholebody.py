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
    """What the kernel reads of a layer (``csrc/wholebody_shared.h`` documents the layout): the int64 ``plan``, the
    float64 ``settings``, ``arrays`` (the addresses of ``held``, the tree's buffers, which it keeps alive), and per
    target what it reads of one row (``target_specs``: shape, dtype, contiguous strides, size; ``target_sizes``, the
    sizes as the int64 array the backward reads); ``nv``, the levels'
    and inequality rows' counts, the tasks' residuals' total width and the constraints' count; the most equality rows
    a level's QP has (the contacts' and every level's rows above the last)."""

    plan: torch.Tensor
    settings: torch.Tensor
    arrays: ctypes.Array
    held: tuple[torch.Tensor, ...]
    target_specs: tuple[tuple[tuple[int, ...], torch.dtype, tuple[int, ...], int], ...]
    target_sizes: torch.Tensor
    nq: int
    nv: int
    n_levels: int
    n_inequalities: int
    residual_width: int
    n_constraints: int
    most_equalities: int


def wholebody_step(
    plan: StepPlan,
    q: torch.Tensor,
    targets: Sequence[torch.Tensor],
    steps: int,
    evaluate: bool,
    save: bool = False,
    binding: TargetBinding | None = None,
) -> tuple[torch.Tensor, ...] | None:
    """``steps`` cascade steps from ``q`` ``(B, nq)``: ``(q_next (B, nq), dq (B, nv), level_status (B, n_levels)
    int8, active_inequalities (B, m_in) bool, active_bounds (B, nv) int8)`` (the last step's), then, with
    ``evaluate``, the residuals ``(B, residual_width)`` and violations ``(B, n_constraints)`` at ``q_next`` (else
    ``(B, 0)`` each), or ``None``; with ``save``, one more output: what ``wholebody_step_backward`` reads of the last
    step (float64, ``(B, saved_size(plan))``). Each target
    is ``(B, *shape)`` of its ``plan.target_specs`` entry; a target whose rows are neither one apart nor all one (batch
    stride 0) is copied. ``binding``: ``bind_targets(plan, q, targets, ...)``, taken here when omitted."""
    found = _kernel_and_binding("wholebody_step", plan, q, targets, binding, recording=torch.is_grad_enabled())
    if found is None:
        return None
    kernel, binding = found
    n = q.shape[0]
    q = q.contiguous()
    q_next, dq, status, active_inequalities, active_bounds = step_outputs(plan, n, q.dtype)
    residuals = loader.empty(n, plan.residual_width if evaluate else 0, dtype=q.dtype)
    violations = loader.empty(n, plan.n_constraints if evaluate else 0, dtype=q.dtype)
    saved = loader.empty(n, saved_size(plan) if save else 0, dtype=torch.float64)
    outputs = (q_next, dq, status, active_inequalities, active_bounds, residuals, violations)
    code = kernel(
        n, torch.get_num_threads(), steps, plan.plan.data_ptr(), plan.settings.data_ptr(), ctypes.addressof(plan.arrays),
        *binding.addresses, q.data_ptr(),
        *(t.data_ptr() for t in outputs[:5]), *((residuals.data_ptr(), violations.data_ptr()) if evaluate else (None, None)),
        saved.data_ptr() if save else None,
    )  # fmt: skip
    loader.checked(code, "wholebody_step")
    return (*outputs, saved) if save else outputs


def step_outputs(plan: StepPlan, n: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """A step's five outputs for ``n`` rows, uninitialised: ``q_next (n, nq)``, ``dq (n, nv)``, ``level_status
    (n, n_levels)`` int8, ``active_inequalities (n, m_in)`` bool, ``active_bounds (n, nv)`` int8."""
    return (
        loader.empty(n, plan.nq, dtype=dtype),
        loader.empty(n, plan.nv, dtype=dtype),
        loader.empty(n, plan.n_levels, dtype=torch.int8),
        loader.empty(n, plan.n_inequalities, dtype=torch.bool),
        loader.empty(n, plan.nv, dtype=torch.int8),
    )


class BoundStep:
    """``wholebody_step`` for ``rows`` robots whose targets stay in the same tensors from call to call (a control
    loop's: written in place between calls): the targets' checks and addresses are taken once, here, and each call
    checks only ``q``. ``kernel`` is None where the plan's kernel does not take these targets (``wholebody_step``
    would return None); so is a call whose ``q`` it does not take. The targets must outlive this object and keep
    their storage (it holds them; writing into them is what they are for)."""

    def __init__(self, plan: StepPlan, targets: Sequence[torch.Tensor], rows: int) -> None:
        self.plan, self.rows = plan, rows
        template = loader.empty(rows, plan.nq, dtype=plan.held[0].dtype)
        found = _kernel_and_binding("wholebody_step", plan, template, targets, None, recording=False)
        if found is not None and any(h is not t for h, t in zip(found[1].held, targets, strict=True)):
            found = None  # a target the binding copied: writes into the caller's tensor would not reach the kernel
        self.kernel, binding = found or (None, None)
        self._binding = binding  # the targets and the addresses' arrays, kept alive
        if binding is not None:
            self._plan_args = (
                plan.plan.data_ptr(),
                plan.settings.data_ptr(),
                ctypes.addressof(plan.arrays),
                *binding.addresses,
            )

    def __call__(
        self, q: torch.Tensor, steps: int = 1, saved: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, ...] | None:
        """``wholebody_step(plan, q, targets, steps, False)``'s five outputs, or None where the kernel does not take
        ``q`` (``loader.compiled``: another shape or dtype, a graph recorded through it, a transform active). Where
        ``saved`` is given (float64 ``(rows, saved_size(plan))``, contiguous), what ``wholebody_step_backward``
        reads of the last step is written into it."""
        plan, n = self.plan, self.rows
        # the kernel of q's dtype must be the one bound (the plan's): another dtype's would misread the plan's arrays
        if self.kernel is None or loader.compiled("wholebody_step", (q,), ((n, plan.nq),)) is not self.kernel:
            return None
        q = q.contiguous()
        outputs = step_outputs(plan, n, q.dtype)
        self.into(q, outputs, steps, saved)
        return outputs

    def into(
        self, q: torch.Tensor, outputs: tuple[torch.Tensor, ...], steps: int = 1, saved: torch.Tensor | None = None
    ) -> None:
        """The C call alone, writing ``outputs`` (``step_outputs``') and, where given, ``saved`` (float64 ``(rows,
        saved_size(plan))``): ``q`` must be one that ``__call__`` takes, contiguous (nothing is checked here)."""
        code = self.kernel(
            self.rows, torch.get_num_threads(), steps, *self._plan_args, q.data_ptr(),
            *(t.data_ptr() for t in outputs), None, None, None if saved is None else saved.data_ptr(),
        )  # fmt: skip
        loader.checked(code, "wholebody_step")

    def backward(
        self,
        q: torch.Tensor,
        forward: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        grad_q_next: torch.Tensor,
        grad_dq: torch.Tensor | None,
        grad_targets: ctypes.Array,
        grad_q: torch.Tensor | None,
    ) -> bool:
        """``wholebody_step_backward``'s C call for a step this object took from ``q`` (contiguous) with ``save``
        (``forward``: its ``dq``, ``level_status`` and saved output), for the upstream gradients ``grad_q_next``
        and ``grad_dq`` (or None; contiguous, ``q``'s dtype): the gradients written at ``grad_targets`` (a ctypes
        array of one address per target, None where not wanted) and into ``grad_q`` where given. False (nothing
        written) where the kernel is not there now (``native.disabled``)."""
        kernel = loader.compiled("wholebody_step_backward", (q,), ((self.rows, self.plan.nq),))
        if kernel is None:
            return False
        _backward_call(kernel, self.rows, self._plan_args, q, forward, grad_q_next, grad_dq, grad_targets,
                       self.plan.target_sizes, grad_q)  # fmt: skip
        return True


def saved_size(plan: StepPlan) -> int:
    """What a step saves per row for its backward, in float64 values (``WB_SAVED_DOUBLES``): per level its solution
    and multipliers (``nv + most_equalities + m_in``), then per level, as bytes, its final active set's flags
    (``m_in + 2 nv``) and which system's point was kept (1)."""
    nv, m_in, levels = plan.nv, plan.n_inequalities, plan.n_levels
    return levels * (nv + plan.most_equalities + m_in) + (levels * (m_in + 2 * nv + 1) + 7) // 8


def wholebody_step_backward(
    plan: StepPlan,
    q: torch.Tensor,
    targets: Sequence[torch.Tensor],
    forward: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    grad_q_next: torch.Tensor,
    grad_dq: torch.Tensor | None,
    wanted: Sequence[bool],
    configuration: bool = False,
    binding: TargetBinding | None = None,
) -> tuple[list[torch.Tensor | None], torch.Tensor | None] | None:
    """One step's backward w.r.t. the tasks' targets (``csrc/wholebody_backward.c``, ``wb_backward_chunk``): for the
    step from ``q`` for which ``wholebody_step(..., save=True)`` gave ``forward`` (its ``dq``, ``level_status`` and
    saved output, the tensors it returned) and the upstream gradients on its ``q_next`` ``(B, nq)`` and ``dq``
    ``(B, nv)``, or ``None`` where ``dq`` has none, the gradient ``(B, *shape)`` of each target where ``wanted`` (a task's
    target only), ``None`` elsewhere; with ``configuration`` also the gradient ``(B, nq)`` w.r.t. ``q``, else
    ``None``; or ``None`` where the kernel is not there. ``binding``: the forward's ``bind_targets`` (the same
    targets), taken here when omitted."""
    found = _kernel_and_binding("wholebody_step_backward", plan, q, targets, binding, recording=False)
    if found is None:
        return None
    kernel, binding = found
    n, dtype = q.shape[0], q.dtype
    grads = [loader.empty(n, *spec[0], dtype=dtype) if want else None
             for want, spec in zip(wanted, plan.target_specs, strict=True)]  # fmt: skip
    addresses = (ctypes.c_void_p * max(1, len(grads)))(*[None if g is None else g.data_ptr() for g in grads])
    q = q.contiguous()  # the forward's own outputs are
    if grad_q_next.dtype is not dtype or not grad_q_next.is_contiguous():  # a sum's gradient is an expanded view
        grad_q_next = grad_q_next.to(dtype).contiguous()
    if grad_dq is not None and (grad_dq.dtype is not dtype or not grad_dq.is_contiguous()):
        grad_dq = grad_dq.to(dtype).contiguous()
    grad_q = loader.empty(n, plan.nq, dtype=dtype) if configuration else None
    plan_args = (plan.plan.data_ptr(), plan.settings.data_ptr(), ctypes.addressof(plan.arrays), *binding.addresses)
    _backward_call(kernel, n, plan_args, q, forward, grad_q_next, grad_dq, addresses, plan.target_sizes, grad_q)
    return grads, grad_q


def _backward_call(kernel, n, plan_args, q, forward, grad_q_next, grad_dq, grad_targets, target_sizes, grad_q) -> None:
    """The C backward's call: ``plan_args`` the plan's, settings', arrays' and targets' addresses, the tensors
    contiguous of ``q``'s dtype (``forward``: the step's ``dq``, ``level_status`` and saved output)."""
    dq, status, saved = forward
    code = kernel(
        n, torch.get_num_threads(), *plan_args, q.data_ptr(), dq.data_ptr(), saved.data_ptr(), status.data_ptr(),
        grad_q_next.data_ptr(), None if grad_dq is None else grad_dq.data_ptr(), ctypes.addressof(grad_targets),
        target_sizes.data_ptr(), None if grad_q is None else grad_q.data_ptr(),
    )  # fmt: skip
    loader.checked(code, "wholebody_step_backward")


@dataclass(frozen=True)
class TargetBinding:
    """What a compiled call reads of a step's targets: ``held`` (the targets, or contiguous copies of those whose
    rows the kernel cannot step through), kept alive with the addresses; ``addresses``, the two ctypes arguments
    (the targets' addresses, their row strides). A step and its backward share one."""

    held: tuple[torch.Tensor, ...]
    pointers: ctypes.Array
    strides: ctypes.Array

    @property
    def addresses(self) -> tuple[int, int]:
        return ctypes.addressof(self.pointers), ctypes.addressof(self.strides)


def bind_targets(
    plan: StepPlan, q: torch.Tensor, targets: Sequence[torch.Tensor], recording: bool
) -> TargetBinding | None:
    """What the plan's kernels read of ``targets`` for ``q`` (``(B, nq)``, already taken by ``loader.compiled``), or
    ``None`` where a target is not what the plan reads: a plain strided CPU tensor of its spec's dtype and row
    shape, ``B`` rows, not a negative view, without a graph where one records (``recording``)."""
    n = q.shape[0]
    if len(targets) != len(plan.target_specs) or n == 0:
        return None
    held, addresses, strides = [], [], []
    for target, (shape, dtype, row_strides, size) in zip(targets, plan.target_specs, strict=True):
        if (
            type(target) not in loader.PLAIN
            or not target.is_cpu
            or target.layout is not torch.strided
            or target.is_neg()  # its memory holds the negated values
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
    pointers = (ctypes.c_void_p * max(1, len(addresses)))(*addresses)
    stride_array = (ctypes.c_longlong * max(1, len(strides)))(*strides)
    return TargetBinding(tuple(held), pointers, stride_array)


def _kernel_and_binding(
    name: str,
    plan: StepPlan,
    q: torch.Tensor,
    targets: Sequence[torch.Tensor],
    binding: TargetBinding | None,
    recording: bool,
) -> tuple[object, TargetBinding] | None:
    """The compiled ``name`` for ``q`` (``(B, nq)`` of the plan's dtype, as ``loader.compiled`` takes it) and the
    targets' binding (``binding``, or ``bind_targets``' where it is None), or ``None`` where either is missing."""
    if q.ndim != 2 or q.dtype is not plan.held[0].dtype:
        return None
    kernel = loader.compiled(name, (q,), ((q.shape[0], plan.nq),))
    if kernel is None:
        return None
    binding = binding or bind_targets(plan, q, targets, recording)
    return None if binding is None else (kernel, binding)
