"""What produced a results file: the command, the commit of this checkout, and the machine.

Written into every benchmark and experiment JSON (and shown in their markdown), so that a number quoted from a
committed results file can be traced to the code and the machine that measured it.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import os
import platform
import re
import shlex
import subprocess
import warnings
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
# Environment variables that change what is measured; a set one is written in front of the command.
SETTINGS = ("KINEMATICS_NATIVE", "GRASP_YAW_IK_NATIVE", "OMP_WAIT_POLICY", "OMP_NUM_THREADS", "CC")


STATED_COMMIT = "PROVENANCE_COMMIT"


def _commit_from_git(results: Path | None) -> str | None:
    """The checkout's commit from git, with ``+changes`` when tracked files differ from it (other than under
    ``results``, the folder a run is writing its results into as it goes); ``None`` outside a git checkout."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        inside = results is not None and Path(results).resolve().is_relative_to(REPO.resolve())
        excluded = [f":(exclude,literal){Path(results).resolve()}"] if inside else []
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *excluded],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+changes" if dirty else "")


def git_commit(results: Path | None = None) -> str:
    """The checkout's commit (``_commit_from_git``). Outside git, the commit that ``PROVENANCE_COMMIT`` states (40 hex
    digits), for a copy of a clean checkout's files without its ``.git`` (what a lent machine runs; ``provenance``
    then says the commit was stated, and ``source_fingerprint`` lets the files be checked against it); else
    ``unknown``."""
    return _commit(results)[0]


def _commit(results: Path | None) -> tuple[str, bool]:
    """``git_commit(results)``, and whether it is ``PROVENANCE_COMMIT``'s (no git checkout, a commit stated)."""
    from_git = _commit_from_git(results)
    if from_git is not None:
        return from_git, False
    stated = _stated_commit()
    return stated, stated != "unknown"


def _stated_commit() -> str:
    """``PROVENANCE_COMMIT`` where it is a commit (40 hex digits; a warning where it is set and is not), else
    ``unknown``."""
    stated = os.environ.get(STATED_COMMIT)
    if stated is None:
        return "unknown"
    if not re.fullmatch(r"[0-9a-f]{40}", stated):
        warnings.warn(
            f"{STATED_COMMIT}={stated!r} is not a commit (40 hex digits): the commit is unknown", stacklevel=2
        )
        return "unknown"
    return stated


FINGERPRINTED = ("assets", "kinematics", "learning")  # the packages a run's code lies in


def _fingerprinted(relative: Path) -> bool:
    return relative.suffix in (".py", ".c", ".h") and "__pycache__" not in relative.parts


def _digest(files) -> str:
    """The fingerprint of ``(relative path, bytes)`` pairs, in the order of ``sorted`` paths per package."""
    digest = hashlib.sha256()
    for relative, data in files:
        digest.update(str(relative).encode() + b"\0" + data + b"\0")
    return digest.hexdigest()[:16]


@functools.cache
def source_fingerprint() -> str:
    """A digest of the project's code that a grid's workers run (every ``.py``, ``.c`` and ``.h`` of
    ``kinematics``, ``learning`` and ``assets``): equal on two machines when they run the same code."""
    paths = [path for package in FINGERPRINTED for path in sorted((REPO / package).rglob("*"))]
    return _digest(
        (path.relative_to(REPO), path.read_bytes()) for path in paths if _fingerprinted(path.relative_to(REPO))
    )


def fingerprint_at(commit: str) -> str:
    """``source_fingerprint`` of ``commit``'s own files, read from git: what a copy of a clean checkout of ``commit``
    records, to check a stated commit (``PROVENANCE_COMMIT``) against the fingerprint a run recorded."""
    listing = subprocess.run(["git", "ls-tree", "-r", "-z", commit, "--", *FINGERPRINTED], cwd=REPO,
                             capture_output=True, check=True, timeout=30).stdout  # fmt: skip
    blobs = {}
    for entry in filter(None, listing.split(b"\0")):
        meta, name = entry.split(b"\t", 1)
        relative = Path(name.decode())
        if meta.split()[1] == b"blob" and _fingerprinted(relative):
            blobs[relative] = meta.split()[2]
    batch = subprocess.run(["git", "cat-file", "--batch"], cwd=REPO, input=b"\n".join(blobs.values()) + b"\n",
                           capture_output=True, check=True, timeout=60).stdout  # fmt: skip
    contents, at = [], 0
    for _ in blobs:
        header_end = batch.index(b"\n", at)
        size = int(batch[at:header_end].split()[2])
        contents.append(batch[header_end + 1 : header_end + 1 + size])
        at = header_end + 1 + size + 1
    data = dict(zip(blobs, contents, strict=True))
    order = [path for package in FINGERPRINTED for path in sorted(p for p in data if p.parts[0] == package)]
    return _digest((relative, data[relative]) for relative in order)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> list[float] | None:
    """The machine's load averages over 1, 5 and 15 minutes (``None`` where the OS has none): how busy it was while
    a run measured, its own processes included."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except (OSError, AttributeError):  # AttributeError: an OS without getloadavg
        return None


def provenance(command: str, results: Path | None = None) -> dict:
    """``command`` as typed (after the settings of ``SETTINGS`` that are set), the commit (``git_commit(results)``),
    and the machine (CPU, logical cores, OS, Python, torch and its threads, and its load averages when stamped)."""
    settings = {name: os.environ[name] for name in SETTINGS if name in os.environ}
    commit, stated = _commit(results)
    return {
        "command": " ".join([*(f"{name}={shlex.quote(value)}" for name, value in settings.items()), command]),
        "commit": commit,
        **({"commit_stated_by": STATED_COMMIT} if stated else {}),
        "settings": settings,
        "source_fingerprint": source_fingerprint(),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpu": cpu_name(),
            "logical_cores": os.cpu_count(),
            "os": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "load_average": load_average(),
        },
    }


def provenance_line(record: dict) -> str:
    """One markdown line: ``command`` at commit on machine (and its load, where recorded)."""
    m = record["machine"]
    gpu = f", GPU {m['cuda']}" if m.get("cuda") else ", no GPU"
    load = m.get("load_average")
    load_text = f", load average {' / '.join(map(str, load))} (1 / 5 / 15 min) when written" if load else ""
    return (
        f"Produced by `{record['command']}` at commit `{record['commit']}`"
        f"{f' (stated by {STATED_COMMIT}: no git checkout there)' if record.get('commit_stated_by') else ''} on "
        f"{m['cpu']} ({m['logical_cores']} "
        f"logical cores{gpu}), {m['os']}, Python {m['python']}, torch {m['torch']} with {m['torch_threads']} "
        f"threads{load_text}, {record['timestamp']}."
    )
