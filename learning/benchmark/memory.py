"""Peak memory of one call.

CPU: growth of the resident set over its level just before the call, i.e. the extra physical memory the call
needed at its peak. Two ways to read it:

- ``hwm`` (Linux): in this process; free heap pages are handed back (``malloc_trim``), the kernel's peak-RSS
  mark is reset (``/proc/self/clear_refs`` = 5), the call runs, and ``VmHWM - VmRSS(before)`` is read.
- ``subprocess``: a fresh interpreter per case builds the same inputs, warms the method up at batch 1, and
  reports the growth of ``getrusage(RUSAGE_SELF).ru_maxrss`` over the call.

CUDA: ``torch.cuda.max_memory_allocated`` over the call, minus what was allocated before it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import re
import subprocess
import sys
from collections.abc import Callable
from functools import lru_cache

import torch

MODES = ("auto", "hwm", "subprocess", "off")


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as fh:
        match = re.search(rf"^{key}:\s+(\d+) kB", fh.read(), re.MULTILINE)
    if match is None:
        raise OSError(f"{key} missing from /proc/self/status")
    return int(match.group(1))


def _reset_hwm() -> None:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


@lru_cache(maxsize=1)
def _libc():
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


def _trim() -> None:
    gc.collect()
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


@lru_cache(maxsize=1)
def hwm_supported() -> bool:
    """Whether this kernel lets the process reset and read its own peak RSS."""
    try:
        _reset_hwm()
        return _status_kib("VmHWM") > 0 and _status_kib("VmRSS") > 0
    except OSError:
        return False


def resolve_mode(mode: str) -> str:
    """``auto`` -> ``hwm`` where supported, else ``subprocess``."""
    if mode not in MODES:
        raise ValueError(f"memory mode must be one of {MODES}, got {mode!r}")
    if mode == "auto":
        return "hwm" if hwm_supported() else "subprocess"
    if mode == "hwm" and not hwm_supported():
        raise RuntimeError("--memory hwm needs Linux's /proc/self/clear_refs; use --memory subprocess")
    return mode


def rss_peak_delta_hwm(fn: Callable[[], object]) -> int:
    """Bytes of resident-set growth at the peak of ``fn()`` (``hwm`` mode)."""
    _trim()
    before = _status_kib("VmRSS")
    _reset_hwm()
    fn()
    return max(0, _status_kib("VmHWM") - before) * 1024


def cuda_peak_delta(fn: Callable[[], object], device: torch.device) -> int:
    """Bytes the CUDA caching allocator handed out at the peak of ``fn()``, over what was allocated before."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return max(0, torch.cuda.max_memory_allocated(device) - before)


def rss_peak_delta_subprocess(spec: dict, timeout_s: float = 900.0) -> int:
    """Run one IK case (``spec``, see ``ik_suite.probe_case``) in a fresh interpreter; its RSS growth."""
    cmd = [sys.executable, "-m", "learning.benchmark.memory_probe", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"memory probe {spec} failed: {proc.stderr[-2000:]}")
    return int(json.loads(lines[-1])["rss_peak_delta_bytes"])
