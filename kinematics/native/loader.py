"""Loading the compiled kernels, and the one test every binding asks before it calls one (``compiled``).

Which library is loaded, at first use:

1. the one ``pip install`` built beside this package (``libkinematics_native.so``, ``setup.py``), where it loads and
   was built from the sources beside it (the source hash it records equals theirs: in a developer checkout edited
   since its install it does not);
2. else a build of the sources with the system C compiler into ``$XDG_CACHE_HOME/kinematics-native``
   (``~/.cache`` by default), once per source, flags, compiler, machine and OS, each unit's object kept so that
   an edit recompiles that unit only (``build.py``); a cached library that does not load, or lacks a kernel, is
   rebuilt once. ``CC`` names the compiler and may carry arguments (``CC="ccache gcc"``);
3. else (no working compiler, or ``KINEMATICS_NATIVE=0``) none: the torch ops run instead, with a warning saying
   why.
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
from kinematics.native import build, signatures

INSTALLED = Path(__file__).with_name(build.LIBRARY)  # built by setup.py (pip install), absent in a plain checkout


ENVIRONMENT = "KINEMATICS_NATIVE"  # "0": no compiled kernels


SUFFIX = {torch.float32: "float", torch.float64: "double"}


PLAIN = frozenset({torch.Tensor, torch.nn.Parameter})  # subclasses (FakeTensor, ...) may have no memory


CPU = torch.device("cpu")


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
        for dtype, suffix in SUFFIX.items()
    }


def _enabled() -> bool:
    return os.environ.get(ENVIRONMENT) != "0"


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


def compiled(name: str, tensors: tuple[torch.Tensor, ...], shapes: tuple[tuple[int, ...], ...]) -> Callable | None:
    """The compiled ``name`` for ``tensors``, or ``None`` when the torch ops must run instead.

    The C code reads ``prod(shape)`` contiguous values of one type behind each pointer, so every tensor must be a
    plain CPU strided tensor (not meta or fake, not a negative view), of the first tensor's dtype, float32 or
    float64, with exactly ``shape`` (a broadcastable one goes to torch, which broadcasts). No autograd graph may be
    recorded through them, and no forward-mode AD level, ``torch.func`` transform or dispatch mode may be active:
    the kernels have no tangents, batching rules or fake execution; torch ops have all three. Attribute checks
    only: no host synchronisation, nothing per element.
    """
    dtype = tensors[0].dtype
    if dtype not in SUFFIX or transforms_active() or torch._C._len_torch_dispatch_stack():
        return None
    recording, strided = torch.is_grad_enabled(), torch.strided
    for t, shape in zip(tensors, shapes):  # noqa: B905 - equal lengths by construction; strict costs per call
        if (
            type(t) not in PLAIN
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


def empty(*shape: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(*shape, dtype=dtype, device=CPU)  # not the default device, which may be another


def checked(code: int, name: str) -> int:
    """A row-parallel kernel's return value (its rows split over ``torch.get_num_threads()`` OpenMP threads): what
    it counts, or ``MemoryError`` where a thread could not allocate its scratch."""
    if code < 0:
        raise MemoryError(f"{name} could not allocate its scratch")
    return code


def indices(*tensors: torch.Tensor) -> bool:
    """Whether every index tensor is what the C code reads: a plain contiguous int64 CPU tensor."""
    return all(
        type(t) in PLAIN and t.is_cpu and t.dtype is torch.int64 and t.layout is torch.strided and t.is_contiguous()
        for t in tensors
    )
