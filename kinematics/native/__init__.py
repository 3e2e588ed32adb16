"""Compiled CPU kernels for the chain pass (FK + Jacobian, batch-last), the DLS step's products, the pose error and
the closed-form backward passes, the fused DLS solve, the kinematic tree, the support polygon's hull and solve_qp:
the C library built from ``csrc/`` (one unit per domain; ``csrc/kernels.h`` declares what it exports and
``signatures.py`` the same to ctypes).

The torch pass in ``kinematics.model.chain`` is about 90 small torch calls per evaluation; at batch 1024 most of its
time is dispatch. This kernel does the same arithmetic in one call: one loop over the joints and, inside, a loop
over the batch that the compiler vectorises (an x86-64-v3 clone, AVX2 and FMA, is dispatched at load time where the
CPU has it; the QP units let the compiler fuse a product and a sum, the others keep ISO rounding).
It computes the same quantities from the same buffers; the tests compare the two paths and Pinocchio.

Which library is loaded, at first use:

1. the one ``pip install`` built beside this file (``libkinematics_native.so``, ``setup.py``), where it loads and
   was built from the sources beside it (the source hash it records equals theirs: in a developer checkout edited
   since its install it does not);
2. else a build of the sources with the system C compiler into ``$XDG_CACHE_HOME/kinematics-native``
   (``~/.cache`` by default), once per source, flags, compiler, machine and OS, each unit's object kept so that
   an edit recompiles that unit only (``build.py``); a cached library that does not load, or lacks a kernel, is
   rebuilt once. ``CC`` names the compiler and may carry arguments (``CC="ccache gcc"``);
3. else (no working compiler, or ``KINEMATICS_NATIVE=0``) none: the torch ops run instead, with a warning saying
   why.

Each wrapper below is a CPU implementation of a ``kinematics.native.kernel.Kernel`` and returns ``None`` (the kernel then
runs its torch reference) unless ``_kernel`` accepts every tensor:
plain CPU strided tensors of one float32/float64 dtype with exactly the shapes the C code reads, no autograd
graph recorded through them, no forward-mode AD level, ``torch.func`` transform or dispatch mode active.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from kinematics.batch_last import transforms_active
from kinematics.lie.rotations import NEAR_PI_COS, SMALL_SIN_SQ
from kinematics.native import build, signatures

INSTALLED = Path(__file__).with_name(build.LIBRARY)  # built by setup.py (pip install), absent in a plain checkout
ENVIRONMENT = "KINEMATICS_NATIVE"  # "0": no compiled kernels
_DEPRECATED_ENVIRONMENT = "GRASP_YAW_IK_NATIVE"  # its former name, honoured (with a DeprecationWarning) until 0.2
_SUFFIX = {torch.float32: "float", torch.float64: "double"}
_TREE_TILE = 32  # TREE_TILE in csrc/tree.c: the scratch the Jacobian kernels need per row
_PLAIN = frozenset({torch.Tensor, torch.nn.Parameter})  # subclasses (FakeTensor, ...) may have no memory
_CPU = torch.device("cpu")
_lock = threading.Lock()
_state: dict[str, object] = {}


def _cache_dir() -> Path:
    return build.cache_dir()


def _compiler() -> list[str]:
    return build.compiler()


def library_path(compiler: list[str]) -> Path:
    """The cached library for this source, these flags, this compiler version, machine and OS."""
    return _cache_dir() / f"kinematics-{build.cache_key(compiler)}.so"


def _load(path: Path) -> ctypes.CDLL:
    """Open ``path`` and declare every function's signature (``signatures.py``); ``OSError`` if it does not load
    or lacks a function."""
    lib = ctypes.CDLL(str(path))
    for name, (restype, argtypes) in signatures.ctypes_declarations().items():
        try:
            function = getattr(lib, name)
        except AttributeError as exc:
            raise OSError(f"{path} has no {name}") from exc
        function.argtypes, function.restype = argtypes, restype
    return lib


def _objects_dir() -> Path:
    """Where the fallback build keeps each unit's object (``build.py``): an edit recompiles only its unit."""
    return _cache_dir() / "objects"


def _compile(compiler: list[str], library: Path) -> ctypes.CDLL:
    return build.build(library, _objects_dir(), compiler, accept=_load)


def _installed() -> ctypes.CDLL | None:
    """The library ``pip install`` built, where it loads and records the hash of the sources beside it (or they
    are not there to compare); else ``None``."""
    if not INSTALLED.exists():
        return None
    try:
        lib = _load(INSTALLED)
    except OSError:  # foreign, truncated, or from before a kernel was added: the sources are built instead
        return None
    if build.CSRC.is_dir() and lib.kinematics_native_source_hash().decode() != build.source_hash():
        return None  # stale: the sources were edited since the install
    return lib


def _build() -> ctypes.CDLL:
    lib = _installed()
    if lib is not None:
        _state["path"] = INSTALLED
        return lib
    compiler = _compiler()
    library = library_path(compiler)
    _state["path"] = library
    if library.exists():
        try:
            return _load(library)
        except OSError:  # truncated, foreign or stale: build it again, once
            library.unlink(missing_ok=True)
    return _compile(compiler, library)


def _functions(lib: ctypes.CDLL) -> dict[tuple[str, torch.dtype], Callable]:
    return {
        (name, dtype): getattr(lib, f"{name}_{suffix}")
        for name in signatures.KERNELS
        for dtype, suffix in _SUFFIX.items()
    }


def _enabled() -> bool:
    value = os.environ.get(ENVIRONMENT)
    if value is None and _DEPRECATED_ENVIRONMENT in os.environ:
        warnings.warn(
            f"{_DEPRECATED_ENVIRONMENT} is deprecated and will be removed; set {ENVIRONMENT} instead",
            DeprecationWarning,
            stacklevel=4,
        )
        value = os.environ[_DEPRECATED_ENVIRONMENT]
    return value != "0"


def library() -> ctypes.CDLL | None:
    """The loaded kernels, or ``None`` (disabled, or no working build: warned once)."""
    with _lock:
        if "lib" not in _state:
            lib = None
            if _enabled():
                try:
                    lib = _build()
                except (OSError, subprocess.SubprocessError) as exc:
                    _state.pop("path", None)
                    warnings.warn(
                        f"the compiled chain kernel is unavailable ({exc}); FK and Jacobians run as torch ops, "
                        "several times slower at large batches",
                        RuntimeWarning,
                        stacklevel=3,
                    )
            _state["lib"], _state["functions"] = lib, {} if lib is None else _functions(lib)
        return _state["lib"]


def library_file() -> Path | None:
    """Where the loaded kernels came from: ``INSTALLED``, a build in the cache, or ``None`` (none loaded)."""
    return _state.get("path") if library() is not None else None


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Run the torch ops instead of the kernels inside the block (the tests compare both paths)."""
    with _lock:
        saved = dict(_state)
        _state.update(lib=None, functions={})
    try:
        yield
    finally:
        with _lock:
            _state.clear()
            _state.update(saved)


def _kernel(name: str, tensors: tuple[torch.Tensor, ...], shapes: tuple[tuple[int, ...], ...]) -> Callable | None:
    """The compiled ``name`` for ``tensors``, or ``None`` when the torch ops must run instead.

    The C code reads ``prod(shape)`` contiguous values of one type behind each pointer, so every tensor must be a
    plain CPU strided tensor (not meta or fake, not a negative view), of the first tensor's dtype, float32 or
    float64, with exactly ``shape`` (a broadcastable one goes to torch, which broadcasts). No autograd graph may be
    recorded through them, and no forward-mode AD level, ``torch.func`` transform or dispatch mode may be active:
    the kernels have no tangents, batching rules or fake execution; torch ops have all three. Attribute checks
    only: no host synchronisation, nothing per element.
    """
    dtype = tensors[0].dtype
    if dtype not in _SUFFIX or transforms_active() or torch._C._len_torch_dispatch_stack():
        return None
    recording, strided = torch.is_grad_enabled(), torch.strided
    for t, shape in zip(tensors, shapes):  # noqa: B905 - equal lengths by construction; strict costs per call
        if (
            type(t) not in _PLAIN
            or not t.is_cpu
            or t.dtype is not dtype
            or t.shape != shape
            or t.layout is not strided
            or t.is_neg()
            or (recording and t.requires_grad)
        ):
            return None
    functions = _state.get("functions")
    if functions is None:
        library()
        functions = _state["functions"]
    return functions.get((name, dtype))


def _empty(*shape: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(*shape, dtype=dtype, device=_CPU)  # not the default device, which may be another


def fk_jacobian(
    q: torch.Tensor,
    local: torch.Tensor,
    revolute: torch.Tensor,
    end: torch.Tensor,
    revolute_only: bool,
    with_jacobian: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """``q`` ``(dof, B)``; ``local`` ``(dof, 4, 3, 4)``: each joint's constant, sine, versine and slide blocks;
    ``revolute`` ``(dof,)`` 1/0; ``end`` ``(3, 4)`` -> TCP rotation ``(3, 3, B)``, position ``(3, B)`` and the
    transposed Jacobian ``(dof, 6, B)`` (``(0, 6, B)`` without ``with_jacobian``), or ``None``
    (``kinematics.model.chain.FK_JACOBIAN``; the kernel reads ``revolute`` itself)."""
    if q.ndim != 2:
        return None
    dof, n = q.shape
    kernel = _kernel("fk_jacobian", (q, local, revolute, end), ((dof, n), (dof, 4, 3, 4), (dof,), (3, 4)))
    if kernel is None:
        return None
    q = q.contiguous()
    sine, versine = torch.sin(q), 1.0 - torch.cos(q)
    rot, pos, jac_t = _empty(3, 3, n, dtype=q.dtype), _empty(3, n, dtype=q.dtype), _empty(dof, 6, n, dtype=q.dtype)
    args = (sine, versine, q, local.contiguous(), revolute.contiguous(), end.contiguous(), rot, pos, jac_t)
    kernel(dof, n, *(t.data_ptr() for t in args))
    return rot, pos, jac_t if with_jacobian else jac_t[:0]


def gram(jac_t: torch.Tensor, constant: torch.Tensor) -> torch.Tensor | None:
    """``J J^T + C`` as contiguous ``(B, 6, 6)`` matrices from ``jac_t`` ``(dof, 6, B)`` and ``C`` ``(6, 6, 1)``,
    or ``None``."""
    if jac_t.ndim != 3:
        return None
    dof, _, n = jac_t.shape
    kernel = _kernel("gram", (jac_t, constant), ((dof, 6, n), (6, 6, 1)))
    if kernel is None:
        return None
    jac_t, constant = jac_t.contiguous(), constant.contiguous()
    work, out = _empty(21, n, dtype=jac_t.dtype), _empty(n, 6, 6, dtype=jac_t.dtype)
    kernel(dof, n, *(t.data_ptr() for t in (jac_t, constant, work, out)))
    return out


def jt_x(jac_t: torch.Tensor, x: torch.Tensor) -> torch.Tensor | None:
    """``J^T x`` ``(dof, B)`` from ``jac_t`` ``(dof, 6, B)`` and ``x`` ``(B, 6)``, or ``None``."""
    if jac_t.ndim != 3:
        return None
    dof, _, n = jac_t.shape
    kernel = _kernel("jt_x", (jac_t, x), ((dof, 6, n), (n, 6)))
    if kernel is None:
        return None
    jac_t, x = jac_t.contiguous(), x.contiguous()
    out = _empty(dof, n, dtype=jac_t.dtype)
    kernel(dof, n, *(t.data_ptr() for t in (jac_t, x, out)))
    return out


def pose_error(
    target_rot: torch.Tensor, target_pos: torch.Tensor, rot: torch.Tensor, pos: torch.Tensor
) -> torch.Tensor | None:
    """``(6, B)``: position error then ``log(R_target R^T)`` from rotations ``(3, 3, B)`` and positions ``(3, B)``
    (all four with the same ``B``), or ``None``."""
    n = rot.shape[-1] if rot.ndim == 3 else -1
    shapes = ((3, 3, n), (3, 3, n), (3, n), (3, n))
    kernel = _kernel("pose_error", (rot, target_rot, target_pos, pos), shapes)
    if kernel is None:
        return None
    tensors = [t.contiguous() for t in (target_rot, target_pos, rot, pos)]
    out = _empty(6, n, dtype=rot.dtype)
    kernel(n, *(t.data_ptr() for t in (*tensors, out)), SMALL_SIN_SQ, NEAR_PI_COS)
    return out


def pose_error_vjp(
    target_rot: torch.Tensor, rot: torch.Tensor, grad_rotation: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Gradients ``(3, 3, B)`` of the rotation error to ``target_rot`` and ``rot`` (both ``(3, 3, B)``) for
    ``grad_rotation`` ``(3, B)``, or ``None``."""
    n = rot.shape[-1] if rot.ndim == 3 else -1
    kernel = _kernel("pose_error_vjp", (rot, target_rot, grad_rotation), ((3, 3, n), (3, 3, n), (3, n)))
    if kernel is None:
        return None
    tensors = [t.contiguous() for t in (target_rot, rot, grad_rotation)]
    grad_target, grad_rot = _empty(3, 3, n, dtype=rot.dtype), _empty(3, 3, n, dtype=rot.dtype)
    kernel(n, *(t.data_ptr() for t in (*tensors, grad_target, grad_rot)), SMALL_SIN_SQ, NEAR_PI_COS)
    return grad_target, grad_rot


def chain_vjp(
    rot: torch.Tensor, jac_t: torch.Tensor, grad_rot: torch.Tensor, grad_pos: torch.Tensor, grad_jac: torch.Tensor
) -> torch.Tensor | None:
    """``(dof, B)``: the revolute chain's closed-form backward (``kinematics.model.chain_gradient``), or ``None``."""
    if jac_t.ndim != 3:
        return None
    dof, _, n = jac_t.shape
    shapes = ((3, 3, n), (dof, 6, n), (3, 3, n), (3, n), (dof, 6, n))
    kernel = _kernel("chain_vjp", (rot, jac_t, grad_rot, grad_pos, grad_jac), shapes)
    if kernel is None:
        return None
    tensors = [t.contiguous() for t in (rot, jac_t, grad_rot, grad_pos, grad_jac)]
    work, grad_q = _empty(12, n, dtype=rot.dtype), _empty(dof, n, dtype=rot.dtype)
    kernel(dof, n, *(t.data_ptr() for t in (*tensors, work, grad_q)))
    return grad_q


def _checked(code: int, name: str) -> int:
    """A row-parallel kernel's return value (its rows split over ``torch.get_num_threads()`` OpenMP threads): what
    it counts, or ``MemoryError`` where a thread could not allocate its scratch."""
    if code < 0:
        raise MemoryError(f"{name} could not allocate its scratch")
    return code


IKGeometry = list[torch.Tensor]


def _settings_tensor(params: list[float], dtype: torch.dtype) -> torch.Tensor:
    """The fused kernels' settings as the ``REAL`` array they read, one tensor per distinct list (a few)."""
    key = (tuple(params), dtype)
    cache = _state.setdefault("settings", {})
    tensor = cache.get(key)
    if tensor is None:
        if len(cache) > 64:
            cache.clear()
        tensor = cache[key] = torch.tensor(params, dtype=dtype)
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
    kernel = _kernel("ik_solve", tensors, shapes)
    if kernel is None or n == 0:
        return None
    out = _empty(dof, n, dtype=q0.dtype)
    held = [_settings_tensor(params, q0.dtype)] + [t.contiguous() for t in tensors]  # alive until the kernel ran
    pointers = [t.data_ptr() for t in (*held, out)]
    _checked(kernel(dof, n, torch.get_num_threads(), iterations, int(clamp), *pointers), "ik_solve")
    return out


def _evaluate_shapes(n: int, dof: int) -> tuple[tuple[int, ...], ...]:
    """What ``ik_solve_evaluate`` reads: the targets, the seeds and the six ``IKGeometry`` tensors."""
    return (n, 4, 4), (n, dof), (dof, 4, 3, 4), (dof,), (3, 4), (6, 6), (dof,), (dof,)


def _evaluate_kernel(target: torch.Tensor, seed: torch.Tensor, inputs: IKGeometry) -> Callable | None:
    if seed.ndim != 2:
        return None
    n, dof = seed.shape
    return _kernel("ik_solve_evaluate", (target, seed, *inputs), _evaluate_shapes(n, dof)) if n else None


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
    q, errors, norms = _empty(n, dof, dtype=dtype), _empty(n, 6, dtype=dtype), _empty(n, 2, dtype=dtype)
    flags = torch.empty(n, 2, dtype=torch.bool, device=_CPU)
    iterates = _empty(iterations + 1 if keep_iterates else 0, dof, n, dtype=dtype)
    held = [_settings_tensor(params, dtype)] + [t.contiguous() for t in tensors]  # alive until the kernel ran
    pointers = [t.data_ptr() for t in (*held, q, errors, norms, flags)]
    pointers.append(iterates.data_ptr() if keep_iterates else 0)
    invalid = _checked(kernel(dof, n, torch.get_num_threads(), iterations, int(clamp), *pointers), "ik_solve_evaluate")
    return q, errors, norms, flags, iterates, torch.tensor(invalid)


def _ik_solve_evaluate_accepts(target, seed, inputs, *_settings) -> bool:
    """Whether ``ik_solve_evaluate`` takes these tensors, from their metadata only (fake tensors too)."""
    if seed.ndim != 2 or seed.shape[0] == 0 or target.ndim != 3:
        return False
    dtype = seed.dtype
    metadata = all(
        t.device.type == "cpu" and t.dtype is dtype and t.shape == shape and t.layout is torch.strided
        for t, shape in zip((target, seed, *inputs), _evaluate_shapes(*seed.shape), strict=True)
    )
    if not metadata or dtype not in _SUFFIX:
        return False
    if "lib" not in _state and not torch.compiler.is_compiling():  # (dynamo cannot trace the build's lock)
        library()
    return _state.get("lib") is not None


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
    kernel = _kernel("ik_solve_vjp", tensors, shapes)
    if kernel is None or n == 0:
        return None
    outs = (_empty(n, dof, dtype=grad.dtype), _empty(n, 4, 4, dtype=grad.dtype))
    held = [_settings_tensor(params, grad.dtype)] + [t.contiguous() for t in tensors]  # alive until the kernel ran
    pointers = [t.data_ptr() for t in (*held, *outs)]
    _checked(kernel(dof, n, torch.get_num_threads(), steps - 1, int(clamp), *pointers), "ik_solve_vjp")
    return outs


# ------------------------------------------------------------------------------------------- KinematicTree
# The tree's kernels (kinematics.model.tree_kernels): nodes are ``(m + 1, 3, 4, B)`` batch-last (slot 0 the base). Index
# arguments are the tree's own int64 buffers; ``_indices`` checks them like ``_kernel`` checks the real ones.


def _indices(*tensors: torch.Tensor) -> bool:
    return all(
        type(t) in _PLAIN and t.is_cpu and t.dtype is torch.int64 and t.layout is torch.strided and t.is_contiguous()
        for t in tensors
    )


def tree_nodes(
    q: torch.Tensor,
    floating: bool,
    column: torch.Tensor,
    multiplier: torch.Tensor,
    offset: torch.Tensor,
    revolute: torch.Tensor,
    origin: torch.Tensor,
    parent: torch.Tensor,
) -> torch.Tensor | None:
    """The level pass: ``q`` ``(B, nq)`` -> nodes ``(m + 1, 3, 4, B)``, or ``None``. Node ``i`` (level order) is
    driven by ``q[:, column[i]] * multiplier[i] + offset[i]``, ``revolute[i]`` 1 (angle) or 0 (slide); ``origin``
    ``(m, 3, 4)``: its constant frame in its parent's; ``parent`` ``(m,)``: its parent's slot. Sine and cosine
    are computed in the kernel (no torch op: torch's would wait for its thread pool)."""
    if q.ndim != 2:
        return None
    n, nq = q.shape
    m = origin.shape[0]
    reals = (q, origin, revolute, multiplier, offset)
    kernel = _kernel("tree_nodes", reals, ((n, nq), (m, 3, 4), (m,), (m,), (m,)))
    if kernel is None or not _indices(column, parent) or column.shape != (m,) or parent.shape != (m,):
        return None
    nodes = _empty(m + 1, 3, 4, n, dtype=q.dtype)
    tensors = [t.contiguous() for t in reals] + [column, parent, nodes]
    kernel(m, n, int(floating), nq, *(t.data_ptr() for t in tensors))
    return nodes


def tree_frames(
    nodes: torch.Tensor, offset: torch.Tensor, slot: torch.Tensor, batch_first: bool = True
) -> torch.Tensor | None:
    """Every frame from nodes ``(m + 1, 3, 4, B)``, ``offset`` ``(nf, 4, 4)`` and owner ``slot`` ``(nf,)``:
    ``(B, nf, 4, 4)`` (``batch_first``) or ``(nf, 3, 4, B)``, or ``None``."""
    if nodes.ndim != 4 or offset.ndim != 3:
        return None
    n, nf = nodes.shape[-1], offset.shape[0]
    kernel = _kernel("tree_frames", (nodes, offset), ((nodes.shape[0], 3, 4, n), (nf, 4, 4)))
    if kernel is None or not _indices(slot) or slot.shape != (nf,):
        return None
    if batch_first:
        out, strides = _empty(n, nf, 4, 4, dtype=nodes.dtype), (nf * 16, 16, 1, 4)
    else:
        out, strides = _empty(nf, 3, 4, n, dtype=nodes.dtype), (1, 12 * n, n, 3)
    kernel(nf, n, *strides, *(t.data_ptr() for t in (nodes.contiguous(), offset.contiguous(), slot, out)))
    return out


def tree_frame_jacobian(
    nodes: torch.Tensor,
    slot: int,
    offset: torch.Tensor,
    ancestors: torch.Tensor,
    dofs: torch.Tensor,
    weights: torch.Tensor,
    revolute: torch.Tensor,
    nv: int,
    base_nv: int,
    batch_first: bool = True,
) -> torch.Tensor | None:
    """One frame's Jacobian ``(B, 6, nv)`` (``batch_first``) or ``(6, nv, B)``, or ``None``: the frame is node
    ``slot`` times ``offset`` ``(4, 4)``; its ``k`` ancestor nodes (slots ``ancestors``) drive columns
    ``base_nv + dofs`` with ``weights`` and ``revolute`` 1/0 (all ``(k,)``)."""
    if nodes.ndim != 4:
        return None
    n, k = nodes.shape[-1], ancestors.shape[0]
    shapes = ((nodes.shape[0], 3, 4, n), (4, 4), (k,), (k,))
    kernel = _kernel("tree_frame_jacobian", (nodes, offset, weights, revolute), shapes)
    if kernel is None or not _indices(ancestors, dofs) or dofs.shape != (k,) or not 0 <= slot < nodes.shape[0]:
        return None
    if batch_first:
        out, strides = _empty(n, 6, nv, dtype=nodes.dtype), (6 * nv, 1)
    else:
        out, strides = _empty(6, nv, n, dtype=nodes.dtype), (1, n)
    work = _empty((6 * nv + 15) * _TREE_TILE, dtype=nodes.dtype)
    tensors = (nodes.contiguous(), offset.contiguous(), ancestors, dofs, weights.contiguous(), revolute.contiguous())
    kernel(k, n, slot, nv, base_nv, *strides, *(t.data_ptr() for t in (*tensors, work, out)))
    return out


def tree_com(
    nodes: torch.Tensor,
    moment: torch.Tensor,
    subtree_mass: torch.Tensor,
    revolute: torch.Tensor,
    weights: torch.Tensor,
    total: torch.Tensor,
    dof: torch.Tensor,
    parent: torch.Tensor,
    nv: int,
    base_nv: int,
    jacobian: bool,
    batch_first: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """The centre of mass ``(B, 3)`` and, with ``jacobian``, its Jacobian ``(B, 3, nv)`` (``batch_first``; else
    ``(3, B)`` and ``(3, nv, B)``), or ``None``. ``moment`` ``(m + 1, 4)``: per slot, ``m [c; 1]`` of the links it
    carries; ``subtree_mass``, ``revolute``, ``weights`` ``(m,)``; ``total`` ``(1,)`` the total mass; ``dof`` and
    ``parent`` ``(m,)``: each node's joint and parent slot."""
    if nodes.ndim != 4:
        return None
    n, m = nodes.shape[-1], nodes.shape[0] - 1
    reals = (nodes, moment, subtree_mass, revolute, weights, total)
    kernel = _kernel("tree_com", reals, ((m + 1, 3, 4, n), (m + 1, 4), (m,), (m,), (m,), (1,)))
    if kernel is None or not _indices(dof, parent) or dof.shape != (m,) or parent.shape != (m,):
        return None
    dtype = nodes.dtype
    work = _empty((3 * nv + 3 * (m + 1) + 15) * _TREE_TILE, dtype=dtype)
    shape, strides = ((n, 3), (3 * nv, 1, 3, 1)) if batch_first else ((3, n), (1, n, 1, n))
    com = _empty(*shape, dtype=dtype)
    jac = None if not jacobian else _empty(*((n, 3, nv) if batch_first else (3, nv, n)), dtype=dtype)
    tensors = [t.contiguous() for t in reals] + [dof, parent, work, com]
    kernel(m, n, nv, base_nv, *strides, *(t.data_ptr() for t in tensors), None if jac is None else jac.data_ptr())
    return com, jac


def hull_edges(
    xy: torch.Tensor, first: torch.Tensor, second: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """The support polygon's hull edges of the ground points ``xy`` ``(n, k, 2)`` among the corner pairs
    ``first``, ``second`` ``(p,)``: outward normals ``(n, k, 2)``, offsets ``(n, k)`` and which rows are edges
    ``(n, k)`` bool (the edges first), or ``None``."""
    if xy.ndim != 3 or xy.shape[-1] != 2:
        return None
    n, k = xy.shape[:2]
    p = first.shape[0] if first.ndim == 1 else -1
    kernel = _kernel("hull_edges", (xy,), ((n, k, 2),))
    if kernel is None or not _indices(first, second) or second.shape != (p,) or p < k or n == 0:
        return None
    normal, offset, edge = _empty(n, k, 2, dtype=xy.dtype), _empty(n, k, dtype=xy.dtype), _empty(n, k, dtype=xy.dtype)
    tensors = (xy.contiguous(), first, second, normal, offset, edge)  # held: a copy lives while the kernel runs
    kernel(n, k, p, *(t.data_ptr() for t in tensors))
    return normal, offset, edge > 0


_QP_MAX_N = 256  # qp_ipm allocates one tile's factors, QP_LANES rows of about 2 n^2 + 2 (m_eq + m_in) n values


def _hessian(P: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``P (nb, n, n)`` as the QP kernels read it, and its row stride: one matrix broadcast over the batch (batch
    stride 0, a constant Hessian) is read in place, once, not copied per row; any other ``P`` contiguously."""
    n = P.shape[-1]
    if P.stride(0) == 0 and P.stride(1) == n and P.stride(2) == 1:
        return P, 0
    return P.contiguous(), n * n


def qp_ipm(
    P: torch.Tensor,
    q: torch.Tensor,
    A: torch.Tensor,
    b: torch.Tensor,
    G: torch.Tensor,
    h: torch.Tensor,
    lb: torch.Tensor,
    ub: torch.Tensor,
    iterations: int,
    elastic: float,
    prox: float,
) -> tuple[torch.Tensor, ...] | None:
    """``kinematics.qp.kernels._ipm`` on flat batch-first ``(nb, ...)`` tensors: ``(x, y, z, s, zu, su, zl, sl)``, or
    ``None``. The batch is split over ``torch.get_num_threads()`` OpenMP threads (ctypes releases the GIL), each solving
    its rows a tile of ``QP_LANES`` at a time."""
    if q.ndim != 2 or A.ndim != 3 or G.ndim != 3:
        return None
    nb, n = q.shape
    me, mi = A.shape[1], G.shape[1]
    if n > _QP_MAX_N or nb == 0:
        return None
    shapes = ((nb, n, n), (nb, n), (nb, me, n), (nb, me), (nb, mi, n), (nb, mi), (nb, n), (nb, n))
    kernel = _kernel("qp_ipm", (P, q, A, b, G, h, lb, ub), shapes)
    if kernel is None:
        return None
    dtype = q.dtype
    P, p_stride = _hessian(P)
    inputs = [P, *(t.contiguous() for t in (q, A, b, G, h, lb, ub))]
    params = torch.tensor([elastic, prox], dtype=dtype)
    outs = [_empty(nb, k, dtype=dtype) for k in (n, me, mi, mi, n, n, n, n)]
    pointers = [t.data_ptr() for t in (params, *inputs, *outs)]
    kernel(nb, torch.get_num_threads(), n, me, mi, iterations, p_stride, *pointers)
    return tuple(outs)


def qp_polish(
    problem: tuple[torch.Tensor, ...],
    interior: tuple[torch.Tensor, ...],
    steps: int,
    refinements: int,
    elastic: float,
    tolerance: float,
    infeasibility_tolerance: float,
) -> tuple[torch.Tensor, ...] | None:
    """``kinematics.qp.kernels._solve``'s active-set polish and status tests on flat batch-first tensors: ``problem`` =
    ``(P, q, A, b, G, h, lb, ub)``, ``interior`` = the interior point's ``(z, s, zu, su, zl, sl)``. Returns
    ``(sol, w, flags, rows)``: ``sol (nb, n + m_eq + m_in)`` = ``[x; y; z]``, the signed bound multipliers
    ``w (nb, n)``, ``flags (nb, m_in + 2 n)`` = active inequalities, fixed at ``ub``, fixed at ``lb`` (0 / 1),
    ``rows (nb, 4)`` = status, primal and dual residual, whether the original system's point was kept (1) or the
    elastic one (0); or ``None``."""
    P, q, A, b, G, h, lb, ub = problem
    nb, n = q.shape
    me, mi = A.shape[1], G.shape[1]
    if nb == 0:
        return None
    shapes = ((nb, n, n), (nb, n), (nb, me, n), (nb, me), (nb, mi, n), (nb, mi), (nb, n), (nb, n))
    shapes += ((nb, mi), (nb, mi), (nb, n), (nb, n), (nb, n), (nb, n))
    kernel = _kernel("qp_polish", (*problem, *interior), shapes)
    if kernel is None:
        return None
    dtype = q.dtype
    P, p_stride = _hessian(P)
    inputs = [P, *(t.contiguous() for t in (*problem[1:], *interior))]
    params = torch.tensor([elastic, tolerance, infeasibility_tolerance], dtype=dtype)
    outs = [_empty(nb, k, dtype=dtype) for k in (n + me + mi, n, mi + 2 * n, 4)]
    pointers = [t.data_ptr() for t in (params, *inputs, *outs)]
    kernel(nb, torch.get_num_threads(), n, me, mi, steps, refinements, p_stride, *pointers)
    if bool((outs[3][:, 0] < 0).any()):
        raise MemoryError("qp_polish could not allocate its scratch")
    return tuple(outs)


def qp_adjoint(
    P: torch.Tensor,
    A: torch.Tensor,
    G: torch.Tensor,
    flags: torch.Tensor,
    exact: torch.Tensor,
    g: torch.Tensor,
    refinements: int,
    elastic: float,
) -> tuple[torch.Tensor, ...] | None:
    """``kinematics.qp.solve``'s adjoint solve on flat batch-first tensors: the final active set ``flags (nb, m_in + 2 n)``
    (as ``qp_polish`` writes it), ``exact (nb,)`` (1 where the original system's point was kept), the upstream
    gradient ``g (nb, n)``. Returns ``(ls, lx, ly, lz)`` (``(nb, n)``, ``(nb, n)``, ``(nb, m_eq)``, ``(nb, m_in)``),
    or ``None``."""
    nb, n = g.shape
    me, mi = A.shape[1], G.shape[1]
    if nb == 0:
        return None
    shapes = ((nb, n, n), (nb, me, n), (nb, mi, n), (nb, mi + 2 * n), (nb,), (nb, n))
    kernel = _kernel("qp_adjoint", (P, A, G, flags, exact, g), shapes)
    if kernel is None:
        return None
    dtype = g.dtype
    P, p_stride = _hessian(P)
    inputs = [P, *(t.contiguous() for t in (A, G, flags, exact, g))]
    params = torch.tensor([elastic], dtype=dtype)
    outs = [_empty(nb, k, dtype=dtype) for k in (n, n, me, mi)]
    pointers = [t.data_ptr() for t in (params, *inputs, *outs)]
    _checked(kernel(nb, torch.get_num_threads(), n, me, mi, refinements, p_stride, *pointers), "qp_adjoint")
    return tuple(outs)
