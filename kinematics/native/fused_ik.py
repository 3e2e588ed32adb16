"""The fused DLS solve: every iteration in one call, with the residuals and the checks of ``validate_inputs``,
and its backward.

Each wrapper returns ``None`` (the kernel then runs its torch reference) where ``loader.compiled`` refuses its
tensors."""

from __future__ import annotations

from collections.abc import Callable

import torch

from kinematics.native import loader

IKGeometry = list[torch.Tensor]


_SETTINGS: dict[tuple[tuple[float, ...], torch.dtype], torch.Tensor] = {}


def _settings_tensor(params: list[float], dtype: torch.dtype) -> torch.Tensor:
    """The fused kernels' settings as the ``REAL`` array they read, one tensor per distinct list (a few)."""
    key = (tuple(params), dtype)
    cache = _SETTINGS
    tensor = cache.get(key)
    if tensor is None:
        if len(cache) > 64:
            cache.clear()
        tensor = cache[key] = torch.tensor(params, dtype=dtype, device=loader.CPU)
    return tensor


def ik_solve(
    q0: torch.Tensor,
    target_rot: torch.Tensor,
    target_pos: torch.Tensor,
    inputs: IKGeometry,
    iterations: int,
    params: list[float],
    clamp: bool,
) -> torch.Tensor | None:
    """Every iteration of the DLS solve in one call per thread, batch-last: ``q0`` ``(dof, B)`` the projected
    seed, the target rotation ``(3, 3, B)`` and position ``(3, B)`` -> the final iterate ``(dof, B)``, or
    ``None``. ``inputs = [local (dof, 4, 3, 4), revolute (dof,), end (3, 4), damping_sq (6, 6), lower (dof,),
    upper (dof,)]``; ``params``: the settings list of ``kinematics.ik.fused_solve``."""
    if q0.ndim != 2:
        return None
    dof, n = q0.shape
    tensors = (q0, target_rot, target_pos, *inputs)
    shapes = ((dof, n), (3, 3, n), (3, n), (dof, 4, 3, 4), (dof,), (3, 4), (6, 6), (dof,), (dof,))
    kernel = loader.compiled("ik_solve", tensors, shapes)
    if kernel is None or n == 0:
        return None
    out = loader.empty(dof, n, dtype=q0.dtype)
    held = [_settings_tensor(params, q0.dtype)] + [t.contiguous() for t in tensors]  # alive until the kernel ran
    pointers = [t.data_ptr() for t in (*held, out)]
    loader.checked(kernel(dof, n, torch.get_num_threads(), iterations, int(clamp), *pointers), "ik_solve")
    return out


def _evaluate_shapes(n: int, dof: int) -> tuple[tuple[int, ...], ...]:
    """What ``ik_solve_evaluate`` reads: the targets, the seeds and the six ``IKGeometry`` tensors."""
    return (n, 4, 4), (n, dof), (dof, 4, 3, 4), (dof,), (3, 4), (6, 6), (dof,), (dof,)


def _evaluate_kernel(target: torch.Tensor, seed: torch.Tensor, inputs: IKGeometry) -> Callable | None:
    if seed.ndim != 2:
        return None
    n, dof = seed.shape
    return loader.compiled("ik_solve_evaluate", (target, seed, *inputs), _evaluate_shapes(n, dof)) if n else None


def ik_solve_evaluate(
    target: torch.Tensor,
    seed: torch.Tensor,
    inputs: IKGeometry,
    iterations: int,
    params: list[float],
    clamp: bool,
    keep_iterates: bool,
) -> tuple[torch.Tensor, ...] | None:
    """The whole solve, batch-first: ``target`` ``(B, 4, 4)``, ``seed`` ``(B, dof)`` (projected in the kernel when
    ``clamp``) -> the final iterate ``(B, dof)``, the position and rotation errors ``(B, 6)``, their norms ``(B,
    2)``, within-limits and success ``(B, 2)`` bool, every iterate ``(iterations + 1, dof, B)`` with
    ``keep_iterates`` (what ``ik_solve_vjp`` reads; else ``(0, dof, B)``) and the number of rows whose inputs
    fail the checks (an int64 scalar tensor); or ``None``."""
    kernel = _evaluate_kernel(target, seed, inputs)
    if kernel is None:
        return None
    (n, dof), dtype, tensors = seed.shape, seed.dtype, (target, seed, *inputs)
    q, errors, norms = (
        loader.empty(n, dof, dtype=dtype),
        loader.empty(n, 6, dtype=dtype),
        loader.empty(n, 2, dtype=dtype),
    )
    flags = torch.empty(n, 2, dtype=torch.bool, device=loader.CPU)
    iterates = loader.empty(iterations + 1 if keep_iterates else 0, dof, n, dtype=dtype)
    held = [_settings_tensor(params, dtype)] + [t.contiguous() for t in tensors]  # alive until the kernel ran
    pointers = [t.data_ptr() for t in (*held, q, errors, norms, flags)]
    pointers.append(iterates.data_ptr() if keep_iterates else 0)
    invalid = loader.checked(
        kernel(dof, n, torch.get_num_threads(), iterations, int(clamp), *pointers), "ik_solve_evaluate"
    )
    return q, errors, norms, flags, iterates, torch.tensor(invalid, device=loader.CPU)


def _ik_solve_evaluate_accepts(target, seed, inputs, *_settings) -> bool:
    """Whether ``ik_solve_evaluate`` takes these tensors, from their metadata only (fake tensors too)."""
    if seed.ndim != 2 or seed.shape[0] == 0 or target.ndim != 3:
        return False
    dtype = seed.dtype
    metadata = all(
        t.device.type == "cpu" and t.dtype is dtype and t.shape == shape and t.layout is torch.strided
        for t, shape in zip((target, seed, *inputs), _evaluate_shapes(*seed.shape), strict=True)
    )
    if not metadata or dtype not in loader.SUFFIX:
        return False
    if "lib" not in loader._state and not torch.compiler.is_compiling():  # (dynamo cannot trace the build's lock)
        loader.library()
    return loader._state.get("lib") is not None


ik_solve_evaluate.accepts = _ik_solve_evaluate_accepts


def ik_solve_vjp(
    iterates: torch.Tensor,
    target: torch.Tensor,
    inputs: IKGeometry,
    params: list[float],
    clamp: bool,
    grad: torch.Tensor,
    grad_errors: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The backward of ``ik_solve_evaluate`` for an all-revolute chain, batch-first: ``grad`` ``(B, dof)`` on the
    final iterate, ``grad_errors`` ``(B, 6)`` on its errors -> gradients on the projected seed ``(B, dof)`` and
    on the target ``(B, 4, 4)``; or ``None``."""
    steps, dof, n = iterates.shape
    tensors = (iterates, target, *inputs, grad, grad_errors)
    shapes = ((steps, dof, n), (n, 4, 4), (dof, 4, 3, 4), (dof,), (3, 4), (6, 6), (dof,), (dof,), (n, dof), (n, 6))
    kernel = loader.compiled("ik_solve_vjp", tensors, shapes)
    if kernel is None or n == 0:
        return None
    outs = (loader.empty(n, dof, dtype=grad.dtype), loader.empty(n, 4, 4, dtype=grad.dtype))
    held = [_settings_tensor(params, grad.dtype)] + [t.contiguous() for t in tensors]  # alive until the kernel ran
    pointers = [t.data_ptr() for t in (*held, *outs)]
    loader.checked(kernel(dof, n, torch.get_num_threads(), steps - 1, int(clamp), *pointers), "ik_solve_vjp")
    return outs
