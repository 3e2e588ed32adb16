"""Small grid tasks for the executor tests (module-level, so pool and Ray workers import them), and the processes
a run leaves behind, read from /proc."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import torch

from learning.common.jobs import GridTask, Job

BUILDS: list[int] = []  # in this process: one entry per problem built


def build(context: dict) -> dict:
    BUILDS.append(os.getpid())
    return {"offset": context["offset"], "marks": context.get("marks"), "built_in": os.getpid()}


def run(problem: dict, job: Job) -> dict:
    """``value = seed + offset``; ``raise`` raises; ``die_once`` kills its own worker on its first attempt."""
    if job.method == "raise":
        raise ValueError(f"job {job.seed} raised on purpose")
    if job.method in ("die_once", "die_always"):
        mark = Path(problem["marks"]) / f"attempt-{job.seed}"
        first = not mark.exists()
        mark.write_text(str(os.getpid()))
        if first or job.method == "die_always":
            os.kill(os.getpid(), signal.SIGKILL)
    if job.method == "sleep":
        time.sleep(dict(job.settings)["seconds"])
    return {
        "value": torch.tensor(float(job.seed) + problem["offset"]),
        "pid": os.getpid(),
        "built_in": problem["built_in"],
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "omp_threads": os.environ.get("OMP_NUM_THREADS"),
        "torch_threads": torch.get_num_threads(),
    }


def toy_task(offset: float = 0.5, marks: Path | None = None, name: str = "toy") -> GridTask:
    context = {"offset": offset, "marks": str(marks) if marks is not None else None}
    return GridTask(name, build, run, context, config=f"offset={offset},marks={marks}")  # the whole context


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (by parent links in /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, stack = set(), [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    """The processes of ``pids`` still running (zombies count as gone)."""
    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if state[state.rindex(")") + 2] != "Z":
            out.add(pid)
    return out


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "<gone>"


def wait_gone(pids: set[int], seconds: float) -> set[int]:
    """Wait up to ``seconds`` for ``pids`` to exit; the ones still alive."""
    deadline = time.monotonic() + seconds
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive(pids)
