"""Writing a suite's results: JSON and markdown tables, each atomically (temp file, then os.replace)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from learning.benchmark import failures
from learning.benchmark.problem import NEAR_SEED
from learning.common.provenance import provenance_line


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual permissions.
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_suite(out_dir: Path, doc: dict, markdown: str) -> tuple[Path, Path]:
    """``<suite>.json`` and ``<suite>.md`` under ``out_dir``."""
    name = doc["suite"]
    paths = out_dir / f"{name}.json", out_dir / f"{name}.md"
    write_atomic(paths[0], json.dumps(doc, indent=2) + "\n")
    write_atomic(paths[1], markdown)
    return paths


def fmt_time(s: float | None) -> str:
    """Seconds in the largest unit that keeps the value at least 1; a negative time (a difference of two noisy
    medians) in the unit of its magnitude, with its sign."""
    if s is None or not math.isfinite(s):
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(s) >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_x(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.3g}×"


def fmt_mib(b: int | None) -> str:
    return "—" if b is None else f"{b / 2**20:.1f}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _meta_line(meta: dict) -> str:
    peers = ", ".join(f"{k} {v}" for k, v in meta["peer_versions"].items() if v)
    load = meta.get("loadavg_start"), meta.get("loadavg_end")
    line = (
        f"torch {meta['torch']} · {meta['torch_threads']} threads · OMP_WAIT_POLICY "
        f"{meta.get('omp_wait_policy', 'not recorded')} · device {meta['device']} · {peers} · "
        f"CPU {meta['cpu']} · load average (1 min) {load[0]} at start, {load[1]} at end · {meta['timestamp']}"
    )
    if "provenance" in meta:
        line += "\n\n" + provenance_line(meta["provenance"])
    return line


def _goals(goals: list[dict]) -> str:
    rows = [
        [
            g["goal"],
            "—" if g["value"] is None else f"{g['value']:.3g}",
            {True: "met", False: "NOT met", None: "not measured"}[g["met"]],
            g["detail"],
        ]
        for g in goals
    ]
    return _table(["target", "value", "status", "detail"], rows)


def _notes(notes: list[str], methods: dict) -> str:
    lines = [f"- `{name}`: {text}" for name, text in methods.items()]
    return "\n".join(lines + [f"- {note}" for note in notes])


def _footer(doc: dict) -> list[str]:
    """The targets and notes sections every suite's markdown ends with."""
    return ["## Targets", "", _goals(doc["goals"]), "", "## Notes", "", _notes(doc["notes"], doc["methods"]), ""]


def fk_markdown(doc: dict) -> str:
    idx = {(r["dtype"], r["batch"], r["op"], r["method"]): r for r in doc["results"]}
    methods = [m for m in doc["methods"] if any(k[3] == m for k in idx)]
    peers = [m for m in methods if m != "ours.layer"]
    parts = [
        "# FK and FK+Jacobian benchmark",
        "",
        _meta_line(doc["meta"]),
        "",
        "Median time per call for the whole batch; `x ours` = that method's time / `ours.layer` time "
        "(> 1: this project is faster).",
        "",
    ]
    for dtype in dict.fromkeys(k[0] for k in idx):
        parts += [f"## {dtype}", ""]
        rows = []
        for batch in dict.fromkeys(k[1] for k in idx if k[0] == dtype):
            for op in ("fk", "fk+jac"):
                ours = idx.get((dtype, batch, op, "ours.layer"), {}).get("median_s")
                cells = [str(batch), op]
                cells += [fmt_time(idx.get((dtype, batch, op, m), {}).get("median_s")) for m in methods]
                cells += [fmt_x(_div(idx.get((dtype, batch, op, m), {}).get("median_s"), ours)) for m in peers]
                rows.append(cells)
        parts += [_table(["batch", "op", *methods, *[f"{m} x ours" for m in peers]], rows), ""]
    single = [r for r in doc["results"] if r["method"] == "pin.single_x_batch"]
    if single:
        parts += [
            "## Pinocchio, one configuration (tight Python loop, measured beside each batch)",
            "",
            _table(
                ["dtype row", "batch row", "op", "per configuration", "calls per repeat", "repeats"],
                [
                    [
                        r["dtype"],
                        str(r["batch"]),
                        r["op"],
                        fmt_time(r["per_config_s"]),
                        str(r["calls"]),
                        str(r["repeats"]),
                    ]
                    for r in single
                ],
            ),
            "",
        ]
    agree = doc.get("agreement", {})
    rows = [[peer, *(f"{v:.2e}" for v in vals.values())] for peer, vals in agree.items() if isinstance(vals, dict)]
    if rows:
        parts += [
            f"## Agreement (float64, {agree['configs']} configurations, max abs difference to ours)",
            "",
            "\n".join(f"- {r[0]}: " + ", ".join(f"{k} {v:.2e}" for k, v in agree[r[0]].items()) for r in rows),
            "",
        ]
    return "\n".join(parts + _footer(doc))


def _div(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _err(stats: dict, scale: float) -> str:
    return " / ".join(f"{stats[k] * scale:.3g}" for k in ("mean", "median", "max"))


def ik_markdown(doc: dict) -> str:
    solves = doc["solves"]
    cuda = any(r["memory"]["cuda_peak_bytes"] is not None for r in solves)
    parts = [
        "# IK benchmark",
        "",
        _meta_line(doc["meta"]),
        "",
        "Median time per batch solve; `x ours fwd` = time / `ours.forward` time of the same case (> 1: "
        "slower than this project's forward solve). Errors over all rows, failed ones included: position in "
        "mm, rotation in mrad (mean / median / max). Peak memory: growth over one call, MiB.",
        "",
    ]
    headers = [
        "batch",
        "method",
        "time",
        "solves/s",
        "x ours fwd",
        "success",
        "pos err mm",
        "rot err mrad",
        "CPU peak MiB",
    ] + (["CUDA peak MiB"] if cuda else [])
    for dtype in dict.fromkeys(r["dtype"] for r in solves):
        for kind in dict.fromkeys(r["targets"] for r in solves):
            rows = []
            for r in (r for r in solves if r["dtype"] == dtype and r["targets"] == kind):
                ours = next(
                    o["median_s"]
                    for o in solves
                    if o["dtype"] == dtype
                    and o["targets"] == kind
                    and o["batch"] == r["batch"]
                    and o["method"] == "ours.forward"
                )
                cells = [
                    str(r["batch"]),
                    r["method"],
                    fmt_time(r["median_s"]),
                    f"{r['solves_per_s']:.3g}",
                    fmt_x(r["median_s"] / ours),
                    f"{100 * r['success_rate']:.1f}%",
                    _err(r["position_error_m"], 1e3),
                    _err(r["rotation_error_rad"], 1e3),
                    fmt_mib(r["memory"]["cpu_peak_rss_delta_bytes"]),
                ]
                rows.append(cells + ([fmt_mib(r["memory"]["cuda_peak_bytes"])] if cuda else []))
            parts += [f"## {dtype}, targets: {kind}", "", _table(headers, rows), ""]
    comps = doc["components"]
    names = list(doc["component_descriptions"])
    iterations = doc["meta"]["iterations"]
    for dtype in dict.fromkeys(c["dtype"] for c in comps):
        rows = []
        for batch in dict.fromkeys(c["batch"] for c in comps if c["dtype"] == dtype):
            t = {c["component"]: c["median_s"] for c in comps if c["dtype"] == dtype and c["batch"] == batch}
            fwd = next(
                (
                    r["median_s"]
                    for r in solves
                    if r["dtype"] == dtype
                    and r["batch"] == batch
                    and r["targets"] == NEAR_SEED
                    and r["method"] == "ours.forward"
                ),
                None,
            )
            rows.append(
                [
                    str(batch),
                    *(fmt_time(t.get(n)) for n in names),
                    fmt_time(iterations * t["iteration"]),
                    fmt_time(fwd),
                ]
            )
        parts += [
            f"## Components of one iteration, {dtype} ({NEAR_SEED} targets)",
            "",
            _table(["batch", *names, f"{iterations} x iteration", "ours.forward"], rows),
            "",
        ]
    if "near_seed_failures" in doc:
        parts += failures.markdown(doc["near_seed_failures"])
    extra = [r for r in solves if "max_abs_qpos_diff_vs_ours" in r and r["method"] in ("pk.matched", "pin.dls")]
    if extra:
        parts += [
            "## Same iterates?",
            "",
            "Max |q - q_ours| of the methods that run the same algorithm (pk.matched stops updating a row "
            "once it meets the tolerance; float32 rounding differs), and pk's own convergence rate:",
            "",
            _table(
                ["dtype", "batch", "targets", "method", "max abs dq (rad)", "own-tolerance converged"],
                [
                    [
                        r["dtype"],
                        str(r["batch"]),
                        r["targets"],
                        r["method"],
                        f"{r['max_abs_qpos_diff_vs_ours']:.2e}",
                        f"{100 * r['converged_own_tolerance_rate']:.1f}%"
                        if "converged_own_tolerance_rate" in r
                        else "—",
                    ]
                    for r in extra
                ],
            ),
            "",
        ]
    return "\n".join(parts + _footer(doc))
