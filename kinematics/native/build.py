"""Builds the kinematics native library, ``csrc/`` into one plain C shared library (no Python.h, no torch: loaded
with ``ctypes``), with the system C compiler.

Each unit of ``UNITS`` is compiled on its own, once per type of ``TYPES`` (``per_type.h``; ``identity.c`` once), in
parallel, into an object named after the hash of what it is built from (its source, the headers, the flags, the
compiler's version), so a rebuild after an edit compiles only the units whose inputs changed; the objects are then
linked. ``identity.c`` carries ``source_hash()``, the hash of every file in ``csrc/`` and the flags, which the loader
compares with the sources beside the library to tell a stale one.

Two callers: ``setup.py`` (the library installed beside this file, at ``pip install``) and ``kinematics.native``
(its developer fallback: a build into the user's cache where no installed library matches the sources). This module
imports only the standard library, so that ``setup.py`` can run it in an isolated build environment without torch.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

CSRC = Path(__file__).with_name("csrc")
# the longest compiles first: the parallel build's wall time is the longest unit's where cores allow
UNITS = (
    "qp_active_set.c",
    "fused_ik.c",
    "qp_ipm.c",
    "tree.c",
    "chain.c",
    "hull.c",
    "wholebody_step.c",
    "wholebody_backward.c",
    "identity.c",
)
# Each unit but ONE_OBJECT is compiled once per type, its other type's half left out by the type's flag: the two
# halves are independent objects, and the longest unit's two compile on two cores at once (a unit calls the other
# type's kernels only through kernels.h, as it would call another unit's)
TYPES = {"float": "-DKINEMATICS_ONLY_FLOAT", "double": "-DKINEMATICS_ONLY_DOUBLE"}
ONE_OBJECT = ("identity.c",)  # no per-type code: compiled once
LIBRARY = "libkinematics_native.so"  # the installed library, beside this file
# -std=c99 (ISO C) keeps GCC's fp-contract off (ISO rounding); qp_ipm.c and qp_active_set.c turn it on for themselves
CFLAGS = ("-O3", "-fPIC", "-std=c99")
LDFLAGS = ("-shared",)
LIBRARIES = ("-lm",)
# added to the compile and the link where the compiler has it; without it the row-parallel kernels run on one thread
OPENMP = "-fopenmp"
_OPENMP_PROBE = "#include <omp.h>\nint kinematics_openmp_probe(void) { return omp_get_max_threads(); }\n"
_KEEP_OBJECTS = 3  # per unit, in an object folder: the newest few (a branch switch back finds its objects)
_probed: dict[tuple[str, ...], tuple[str, ...]] = {}
T = TypeVar("T")


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/kinematics-native`` (``~/.cache`` by default): the first-use builds, and every build's
    objects (``objects/``), the install's included, so that a build after an edit compiles the edited units only."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kinematics-native"


def sources() -> list[Path]:
    """Every file the library is built from, in a fixed order."""
    return sorted(p for p in CSRC.iterdir() if p.suffix in (".c", ".h"))


def source_hash() -> str:
    """The hash of every source file (name and content) and the flags: what ``identity.c`` records at build time."""
    digest = hashlib.sha256(" ".join((*CFLAGS, *LDFLAGS, *LIBRARIES)).encode())
    for path in sources():
        digest.update(b"\0" + path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:32]


def compiler() -> list[str]:
    """``CC`` (it may carry arguments: ``CC="ccache gcc"``), else ``cc``."""
    return shlex.split(os.environ.get("CC") or "cc") or ["cc"]


def compiler_version(command: list[str]) -> str:
    """``command --version``; ``OSError`` or ``subprocess.SubprocessError`` where there is no such compiler."""
    return subprocess.run([*command, "--version"], capture_output=True, text=True, check=True).stdout


def openmp_flags(command: list[str]) -> tuple[str, ...]:
    """``(OPENMP,)`` where ``command`` compiles and links an OpenMP source, else ``()``; asked once per compiler."""
    key = tuple(command)
    if key not in _probed:
        with tempfile.TemporaryDirectory() as scratch:
            source = Path(scratch) / "probe.c"
            source.write_text(_OPENMP_PROBE)
            probe = [*command, *CFLAGS, *LDFLAGS, OPENMP, "-o", str(Path(scratch) / "probe.so"), str(source)]
            try:
                ok = subprocess.run(probe, capture_output=True).returncode == 0
            except OSError:
                ok = False
        _probed[key] = (OPENMP,) if ok else ()
    return _probed[key]


def _run(command: list[str], what: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise OSError(f"{shlex.join(what)} failed: {result.stderr.strip()[:500]}")


def _compile_unit(
    command: list[str], unit: str, stem: str, flags: tuple[str, ...], objects: Path, identity: str
) -> Path:
    """The object ``stem`` of ``unit``: found in ``objects`` under the hash of its inputs (its source, every header
    and ``identity``: the compiler command and its version; the flags), or compiled there (atomically)."""
    headers = [p.read_bytes() for p in sources() if p.suffix == ".h"]
    inputs = [unit.encode(), (CSRC / unit).read_bytes(), *headers, identity.encode(), " ".join(flags).encode()]
    key = hashlib.sha256(b"\0".join(inputs))
    target = objects / f"{stem}-{key.hexdigest()[:16]}.o"
    if target.exists():
        return target
    fd, scratch = tempfile.mkstemp(dir=objects, prefix=f".{stem}-", suffix=".o")
    os.close(fd)
    try:
        _run([*command, *flags, "-c", str(CSRC / unit), "-o", scratch], command)
        os.replace(scratch, target)  # atomic: a concurrent build of the same key writes the same bytes
    finally:
        Path(scratch).unlink(missing_ok=True)
    for old in sorted(objects.glob(f"{stem}-*.o"), key=lambda p: p.stat().st_mtime, reverse=True)[_KEEP_OBJECTS:]:
        old.unlink(missing_ok=True)
    return target


def objects_of_units() -> list[tuple[str, str, tuple[str, ...]]]:
    """``(unit, object stem, its own flags)`` of every object the library is linked from, in ``UNITS``' order (the
    longest compiles first): ``qp_active_set.c`` as ``qp_active_set-float`` and ``qp_active_set-double``, ...,
    ``identity.c`` once, with the source hash it records."""
    found = []
    for unit in UNITS:
        stem = unit.removesuffix(".c")
        if unit in ONE_OBJECT:
            found.append((unit, stem, (f'-DKINEMATICS_NATIVE_SOURCE_HASH="{source_hash()}"',)))
        else:
            found += [(unit, f"{stem}-{name}", (flag,)) for name, flag in TYPES.items()]
    return found


def build(
    output: Path,
    objects: Path,
    command: list[str] | None = None,
    accept: Callable[[Path], T] | None = None,
    jobs: int | None = None,
    extra_flags: tuple[str, ...] = (),
) -> T | None:
    """Compile the units into ``objects`` (those not already there) and link them into ``output``.

    The library is linked under a scratch name beside ``output`` and handed to ``accept`` (which may raise to reject
    it) before it replaces ``output`` atomically; ``accept``'s result is returned. ``OSError`` (with the compiler's
    message) where a unit does not compile or the link fails. ``extra_flags`` go to every compile (the tests add
    warnings as errors)."""
    command = command or compiler()
    version = compiler_version(command)
    objects.mkdir(parents=True, exist_ok=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    openmp = openmp_flags(command)
    identity = "\n".join((shlex.join(command), version))
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        futures = [
            pool.submit(
                _compile_unit, command, unit, stem, (*CFLAGS, *openmp, *extra_flags, *unit_flags), objects, identity
            )
            for unit, stem, unit_flags in objects_of_units()
        ]
        built = [future.result() for future in futures]
    with tempfile.TemporaryDirectory(dir=output.parent) as scratch:
        linked = Path(scratch) / output.name
        _run([*command, *LDFLAGS, *openmp, "-o", str(linked), *map(str, built), *LIBRARIES], command)
        # Accepted under its own name: the dynamic loader would answer a second open of the output path with a
        # handle it already holds for that path (a rejected library's).
        result = accept(linked) if accept is not None else None
        os.replace(linked, output)
    return result


def cache_key(command: list[str]) -> str:
    """The developer build's identity: these sources and flags, this compiler version, machine and OS."""
    identity = [source_hash(), compiler_version(command), platform.machine(), platform.system()]
    return hashlib.sha256("\n".join(identity).encode()).hexdigest()[:16]
