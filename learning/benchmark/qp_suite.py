"""``solve_qp`` against the QP references: accuracy on random feasible / infeasible QPs and timing beside proxsuite.

Accuracy: ``count`` random feasible QPs of 7 to 60 variables (equalities, inequalities, bounds; feasible by
construction: ``b = A x0``, ``h = G x0 + slack`` with zeros, bounds around ``x0`` with zeros and infinities),
solved in float64 by ``solve_qp`` and by proxsuite's dense ProxQP (``eps_abs 1e-12``; where ProxQP does not report
solved, qpsolvers + daqp is the reference); a QP counts as agreeing when ``solve_qp`` says SOLVED and
``max|x - x_ref| <= 1e-6 (1 + max|x_ref|)``. Infeasible QPs (contradictory bounds, a pair of opposite inequalities,
an inequality contradicting an equality) count as flagged when the status is INFEASIBLE; none may be SOLVED.

Timing (n = 35, 12 equalities, 8 inequalities + bounds on every variable, batch 1 / 64 / 1024, float32 and
float64): ``ours.forward`` (no graph), ``ours.fwd+bwd`` (gradient w.r.t. P, q, A, b, G, h); proxsuite's
``QPFunction`` (QPLayer, float64, the bounds as 35 more rows of ``l <= G x <= u``) forward and forward+backward;
qpsolvers + daqp as a per-problem forward loop (float64). Times are medians measured round-robin per batch.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import io
import sys
import time

import numpy as np
import torch

from kinematics.qp import INFEASIBLE, SOLVED, solve_qp
from learning.benchmark.report import _table, fmt_time, fmt_x
from learning.benchmark.timing import TimingPolicy, measure

SIZES = ((7, 2, 4), (12, 0, 6), (20, 5, 10), (30, 10, 0), (35, 12, 8), (45, 15, 25), (60, 24, 40), (15, 0, 20))
TIMING_SIZE = (35, 12, 8)
METHODS = {
    "ours.forward": "kinematics.solve_qp, no autograd graph",
    "ours.fwd+bwd": "kinematics.solve_qp forward + backward (gradient w.r.t. P, q, A, b, G, h)",
    "qplayer.forward": "proxsuite.torch.qplayer.QPFunction()(...) (float64; bounds as rows of l <= G x <= u)",
    "qplayer.fwd+bwd": "the same, forward + backward",
    "daqp.loop": "qpsolvers.solve_qp(..., solver='daqp') in a Python loop over the batch (float64, forward only)",
}


def _log(msg: str) -> None:
    print(f"[qp] {msg}", file=sys.stderr, flush=True)


def random_qps(batch: int, n: int, m_eq: int, m_in: int, seed: int, infeasible: bool = False) -> dict:
    """``batch`` random QPs as float64 numpy arrays ``P, q, A, b, G, h, lb, ub`` (leading dimension ``batch``).

    Feasible by construction (``x0`` satisfies every constraint, some with zero slack) unless ``infeasible``:
    then each gets one contradiction (``lb > ub`` on a variable, ``g x <= h`` with ``-g x <= -h - 1``, or
    ``a x <= b - 1`` against the equality ``a x = b``).
    """
    g = np.random.default_rng(seed)
    M = g.standard_normal((batch, n, n))
    P = M @ M.transpose(0, 2, 1) / n + 1e-2 * np.eye(n)
    q = g.standard_normal((batch, n))
    A = g.standard_normal((batch, m_eq, n))
    G = g.standard_normal((batch, m_in, n))
    x0 = g.standard_normal((batch, n))
    b = np.einsum("bij,bj->bi", A, x0)
    slack = g.exponential(1.0, (batch, m_in)) * (g.random((batch, m_in)) > 0.3)
    h = np.einsum("bij,bj->bi", G, x0) + slack
    below = g.exponential(1.0, (batch, n)) * (g.random((batch, n)) > 0.2)
    above = g.exponential(1.0, (batch, n)) * (g.random((batch, n)) > 0.2)
    lb = np.where(g.random((batch, n)) < 0.3, -np.inf, x0 - below)
    ub = np.where(g.random((batch, n)) < 0.3, np.inf, x0 + above)
    if infeasible:
        kind = g.integers(0, 3, batch)
        for i in range(batch):
            if kind[i] == 1 and m_in >= 2:
                G[i, 1], h[i, 1] = -G[i, 0], -h[i, 0] - 1.0
            elif kind[i] == 2 and m_eq >= 1 and m_in >= 1:
                G[i, 0], h[i, 0] = A[i, 0], b[i, 0] - 1.0
            else:
                j = g.integers(n)
                lb[i, j], ub[i, j] = x0[i, j] + 0.5, x0[i, j] - 0.5
    return {"P": P, "q": q, "A": A, "b": b, "G": G, "h": h, "lb": lb, "ub": ub}


def to_torch(problem: dict, dtype=torch.float64, device="cpu") -> dict:
    return {k: torch.as_tensor(v, dtype=dtype, device=device) for k, v in problem.items()}


def reference(problem: dict, i: int) -> tuple[np.ndarray | None, str]:
    """``(x, solver)`` of problem ``i``: proxsuite's dense ProxQP, or qpsolvers + daqp where ProxQP fails."""
    p = {k: v[i] for k, v in problem.items()}
    big = 1e20
    with contextlib.suppress(ImportError):
        import proxsuite

        r = proxsuite.proxqp.dense.solve(
            H=p["P"], g=p["q"], A=p["A"], b=p["b"], C=p["G"], l=np.full(p["h"].shape, -big), u=p["h"],
            l_box=np.where(np.isinf(p["lb"]), -big, p["lb"]), u_box=np.where(np.isinf(p["ub"]), big, p["ub"]),
            eps_abs=1e-12, eps_rel=0.0, max_iter=10000,
        )  # fmt: skip
        if r.info.status == proxsuite.proxqp.QPSolverOutput.PROXQP_SOLVED:
            return r.x.copy(), "proxsuite"
    with contextlib.suppress(ImportError):
        import qpsolvers

        x = qpsolvers.solve_qp(
            p["P"], p["q"], p["G"] if p["G"].size else None, p["h"] if p["h"].size else None,
            p["A"] if p["A"].size else None, p["b"] if p["b"].size else None,
            np.where(np.isinf(p["lb"]), -big, p["lb"]), np.where(np.isinf(p["ub"]), big, p["ub"]), solver="daqp",
        )  # fmt: skip
        if x is not None:
            return x, "daqp"
    return None, "none"


def relative_error(x: np.ndarray, x_ref: np.ndarray) -> float:
    return float(np.abs(x - x_ref).max() / (1.0 + np.abs(x_ref).max()))


def accuracy(count: int = 1000, infeasible_count: int = 100, seed: int = 0) -> dict:
    """Fractions of feasible QPs within 1e-6 of the reference and of infeasible QPs flagged."""
    per = max(1, count // len(SIZES))
    agree = total = 0
    errors, by_size, ref_used = [], [], {}
    for k, (n, me, mi) in enumerate(SIZES):
        problem = random_qps(per, n, me, mi, seed + k)
        sol = solve_qp(**to_torch(problem))
        hits = 0
        for i in range(per):
            x_ref, solver = reference(problem, i)
            ref_used[solver] = ref_used.get(solver, 0) + 1
            if x_ref is None:
                continue
            total += 1
            err = relative_error(sol.x[i].numpy(), x_ref)
            errors.append(err)
            ok = err <= 1e-6 and int(sol.status[i]) == SOLVED
            hits += ok
        agree += hits
        by_size.append({"n": n, "m_eq": me, "m_in": mi, "count": per, "agree": hits})
    flagged = solved = inf_total = 0
    per_inf = max(1, infeasible_count // 4)
    for k, (n, me, mi) in enumerate(((7, 2, 4), (20, 5, 10), (35, 12, 8), (60, 24, 40))):
        problem = random_qps(per_inf, n, me, mi, seed + 100 + k, infeasible=True)
        status = solve_qp(**to_torch(problem)).status
        flagged += int((status == INFEASIBLE).sum())
        solved += int((status == SOLVED).sum())
        inf_total += per_inf
    errs = np.asarray(errors)
    return {
        "feasible": total,
        "agree": agree,
        "agree_fraction": agree / max(total, 1),
        "max_relative_error": float(errs.max()) if errs.size else None,
        "median_relative_error": float(np.median(errs)) if errs.size else None,
        "references": ref_used,
        "by_size": by_size,
        "infeasible": inf_total,
        "flagged": flagged,
        "flagged_fraction": flagged / max(inf_total, 1),
        "infeasible_reported_solved": solved,
    }


def _peer(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _timing_fns(batch: int, dtype: torch.dtype, seed: int) -> dict:
    n, me, mi = TIMING_SIZE
    problem = random_qps(batch, n, me, mi, seed)
    problem["lb"] = np.where(np.isinf(problem["lb"]), -10.0, problem["lb"])
    problem["ub"] = np.where(np.isinf(problem["ub"]), 10.0, problem["ub"])
    t = to_torch(problem, dtype)
    names = ("P", "q", "A", "b", "G", "h")
    upstream = torch.randn(batch, n, dtype=dtype, generator=torch.Generator().manual_seed(seed))

    def forward():
        with torch.no_grad():
            return solve_qp(**t)

    def fwd_bwd():
        inputs = {k: (v.requires_grad_(True) if k in names else v) for k, v in ((k, t[k].clone()) for k in t)}
        x = solve_qp(**inputs).x
        grads = torch.autograd.grad((x * upstream).sum(), [inputs[k] for k in names])
        return grads

    fns = {"ours.forward": forward, "ours.fwd+bwd": fwd_bwd}
    if dtype == torch.float64 and _peer("proxsuite") is not None:
        from proxsuite.torch.qplayer import QPFunction

        t64 = to_torch(problem)
        eye = torch.eye(n, dtype=torch.float64).expand(batch, n, n)
        G = torch.cat((t64["G"], eye), 1)
        lower = torch.cat((torch.full_like(t64["h"], -1e20), t64["lb"]), 1)
        upper = torch.cat((t64["h"], t64["ub"]), 1)
        layer = QPFunction()

        def ql_forward():
            with torch.no_grad():
                return layer(t64["P"], t64["q"], t64["A"], t64["b"], G, lower, upper)

        def ql_fwd_bwd():
            P, q = t64["P"].clone().requires_grad_(True), t64["q"].clone().requires_grad_(True)
            A, b = t64["A"].clone().requires_grad_(True), t64["b"].clone().requires_grad_(True)
            Gr, ur = G.clone().requires_grad_(True), upper.clone().requires_grad_(True)
            x = layer(P, q, A, b, Gr, lower, ur)[0]
            return torch.autograd.grad((x * upstream.double()).sum(), [P, q, A, b, Gr, ur])

        fns |= {"qplayer.forward": ql_forward, "qplayer.fwd+bwd": ql_fwd_bwd}
    if dtype == torch.float64 and _peer("qpsolvers") is not None and _peer("daqp") is not None:
        import qpsolvers

        rows = [{k: v[i] for k, v in problem.items()} for i in range(batch)]

        def daqp_loop():
            for p in rows:
                qpsolvers.solve_qp(p["P"], p["q"], p["G"], p["h"], p["A"], p["b"], p["lb"], p["ub"], solver="daqp")

        fns["daqp.loop"] = daqp_loop
    return fns


def run(batches=(1, 64, 1024), dtypes=("float32", "float64"), timing: TimingPolicy | None = None, seed: int = 0,
        count: int = 1000, infeasible_count: int = 100) -> dict:  # fmt: skip
    """Accuracy and timings; returns the ``qp.json`` document (without ``meta``)."""
    timing = timing or TimingPolicy(min_repeats=5, budget_s=2.0, floor_repeats=3)
    start = time.perf_counter()
    acc = accuracy(count, infeasible_count, seed)
    _log(f"accuracy: {time.perf_counter() - start:.1f} s")
    results = []
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for batch in batches:
            start = time.perf_counter()
            fns = _timing_fns(batch, dtype, seed)
            with contextlib.redirect_stdout(io.StringIO()):
                timings = measure(fns, timing)
            for method, t in timings.items():
                results.append(
                    {"dtype": dtype_name, "batch": batch, "method": method, **t.as_dict(),
                     "per_row_s": t.median_s / batch}
                )  # fmt: skip
            _log(f"{dtype_name} batch {batch}: {time.perf_counter() - start:.1f} s")
    goals = [
        {
            "goal": "solve_qp within 1e-6 (relative) of the reference on >= 99.9% of random feasible QPs",
            "value": acc["agree_fraction"],
            "met": acc["agree_fraction"] >= 0.999,
            "detail": f"{acc['agree']} of {acc['feasible']}",
        },
        {
            "goal": "every infeasible QP flagged, none reported solved",
            "value": acc["flagged_fraction"],
            "met": acc["flagged"] == acc["infeasible"] and acc["infeasible_reported_solved"] == 0,
            "detail": f"{acc['flagged']} of {acc['infeasible']} flagged, {acc['infeasible_reported_solved']} solved",
        },
    ]
    index = {(r["dtype"], r["batch"], r["method"]): r["per_row_s"] for r in results}
    ql = index.get(("float64", 1024, "qplayer.fwd+bwd"))
    for dtype_name in dtypes:
        ours = index.get((dtype_name, 1024, "ours.fwd+bwd"))
        ratio = ql / ours if ql and ours else None
        goals.append(
            {
                "goal": f"forward+backward >= 10x faster per row than QPLayer at batch 1024, n=35 ({dtype_name})",
                "value": ratio,
                "met": None if ratio is None else ratio >= 10,
                "detail": "QPLayer float64 time per row / ours per row",
            }
        )
    return {
        "suite": "qp",
        "methods": METHODS,
        "accuracy": acc,
        "results": results,
        "goals": goals,
        "peer_versions": {d: _version(d) for d in ("proxsuite", "qpsolvers", "daqp")},
        "notes": [
            "Times are medians of repeats measured round-robin across methods at each (dtype, batch).",
            "ratio = peer time per row / ours time per row (> 1: this project is faster); the peers run float64.",
        ],
    }


def markdown(doc: dict) -> str:
    from learning.benchmark.report import _footer, _meta_line

    acc = doc["accuracy"]
    parts = ["# QP solver benchmark", ""]
    if "meta" in doc:
        parts += [_meta_line(doc["meta"]), ""]
    parts += [
        "## Accuracy (float64)",
        "",
        f"- feasible QPs within 1e-6 of the reference: {acc['agree']} / {acc['feasible']} "
        f"({100 * acc['agree_fraction']:.2f}%); relative error median {acc['median_relative_error']:.2e}, "
        f"max {acc['max_relative_error']:.2e}; references used: {acc['references']}",
        f"- infeasible QPs flagged INFEASIBLE: {acc['flagged']} / {acc['infeasible']}; reported SOLVED: "
        f"{acc['infeasible_reported_solved']}",
        "",
        _table(
            ["n", "m_eq", "m_in", "QPs", "agree"],
            [[str(r["n"]), str(r["m_eq"]), str(r["m_in"]), str(r["count"]), str(r["agree"])] for r in acc["by_size"]],
        ),
        "",
    ]
    index = {(r["dtype"], r["batch"], r["method"]): r for r in doc["results"]}
    methods = list(dict.fromkeys(r["method"] for r in doc["results"]))
    for dtype in dict.fromkeys(r["dtype"] for r in doc["results"]):
        rows = []
        for batch in dict.fromkeys(r["batch"] for r in doc["results"] if r["dtype"] == dtype):
            ours = index.get((dtype, batch, "ours.fwd+bwd"), {}).get("per_row_s")
            ours_f = index.get((dtype, batch, "ours.forward"), {}).get("per_row_s")
            ql = index.get(("float64", batch, "qplayer.fwd+bwd"), {}).get("per_row_s")
            ql_f = index.get(("float64", batch, "qplayer.forward"), {}).get("per_row_s")
            cells = [str(batch)]
            cells += [fmt_time(index.get((dtype, batch, m), {}).get("per_row_s")) for m in methods]
            cells += [
                fmt_x(ql_f / ours_f if ql_f and ours_f else None),
                fmt_x(ql / ours if ql and ours else None),
            ]
            rows.append(cells)
        parts += [
            f"## Time per row, {dtype} (n = 35, 12 equalities, 8 inequalities + bounds; peers float64)",
            "",
            _table(["batch", *methods, "QPLayer fwd / ours fwd", "QPLayer fwd+bwd / ours fwd+bwd"], rows),
            "",
        ]
    doc.setdefault("notes", [])
    return "\n".join(parts + _footer(doc))
