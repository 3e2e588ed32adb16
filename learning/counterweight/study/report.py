"""The study's report as markdown: the cells' diagnostics, the verdict per cell and budget, where each axis breaks
zero-order, every method's numbers per cell, H2 and H3, the tuning with each edge-rule extension, and the time
it took."""

from __future__ import annotations

import math

from learning.common.provenance import provenance_line
from learning.counterweight.study.design import BUDGETS, GRADIENT_STUDY_METHODS, STUDY_METHODS

BUDGET_NAMES = {"1x": "1x", "equal_time": "equal wall time", "10x": "10x"}


def axis_label(report: dict, axis: str, cell: str) -> str:
    """A level's name on an axis: the base cell named by that axis's value."""
    if cell != "base":
        return report["levels"][cell]
    cfg = report["config"]
    base = {
        "goal_dependence": "full circle",
        "width": f"width {cfg['base_width']}",
        "tolerance": f"{1e3 * cfg['base_tolerance']:g} mm",
    }
    return f"{base[axis]} (base)"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _ci(stat: dict) -> str:
    return f"{_pct(stat['iqm'])} [{_pct(stat['low'])}, {_pct(stat['high'])}]"


def _settings(settings: dict) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in sorted(settings.items()))


def diagnostics_table(report: dict) -> str:
    lines = [
        "| cell | level | goals kept of candidates (train) %, per sector % | reach only % | without balance % | "
        "best constant % | per-goal % | kept (the properties it lost) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cell, d in report["diagnostics"].items():
        sectors = ", ".join(_pct(share) for share in d["kept_by_interval"])
        lost = [name for name, held in d["properties"].items() if not held]
        kept = "yes" if d["kept_cell"] else f"no ({'; '.join(lost)})"
        lines.append(
            f"| {cell} | {report['levels'][cell]} | {_pct(d['kept']['train'])} ({sectors}) | "
            f"{_pct(d['reach_only'])} | {_pct(d['no_balance'])} | {_pct(d['best_constant'])} | "
            f"{_pct(d['per_goal'])} | {kept} |"
        )
    return "\n".join(lines)


def verdict_table(report: dict, gradient: str = "gradient") -> str:
    lines = [
        f"| cell | level | {gradient} (1x) IQM % [95 % CI] | closest zero-order at 1x | at equal wall time | at 10x | "
        "verdict 1x | verdict equal time | verdict 10x |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for cell, analysis in report["analysis"]["cells"].items():
        if gradient not in analysis["verdicts"]:
            continue
        verdicts = analysis["verdicts"][gradient]
        closest = []
        for budget in BUDGETS:
            v = verdicts[budget]
            stat = analysis["rows"][v["closest"]][budget]["selected"]
            closest.append(f"{v['closest']} {_ci(stat)}, {_pct(v['closest_gap'])} points below")
        reference = analysis["rows"][gradient]["1x"]["selected"]
        outcomes = " | ".join(verdicts[b]["outcome"] for b in BUDGETS)
        lines.append(f"| {cell} | {report['levels'][cell]} | {_ci(reference)} | {' | '.join(closest)} | {outcomes} |")
    return "\n".join(lines)


def cell_table(report: dict, cell: str) -> str:
    analysis = report["analysis"]["cells"][cell]
    lines = [
        f"**{cell}** ({report['levels'][cell]}; equal wall time {analysis['equal_time_seconds']:.2f} s, the median "
        f"gradient run)",
        "",
        "| method | budget | settings | test % selected, IQM [95 % CI] | test % last iterate, IQM [95 % CI] | "
        "layer evaluations to 90 % within the budget (median) | seeds reaching 90 % | ms per layer evaluation "
        "(training and selection) | layer evaluations spent | seeds ended before the budget |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for method in STUDY_METHODS:
        for budget, row in analysis["rows"].get(method, {}).items():
            settings = (report["choices"].get(cell, {}).get(method) or report["choices"]["base"][method])[budget]
            to_90 = "> run" if math.isinf(row["evaluations_to_90"]) else f"{row['evaluations_to_90']:.0f}"
            lines.append(
                f"| {method} | {BUDGET_NAMES[budget]} | {_settings(settings)} | {_ci(row['selected'])} | "
                f"{_ci(row['last'])} | {to_90} | {_pct(row['reached_90'])} | {row['ms_per_evaluation']:.3f} | "
                f"{row['evaluations']:.0f} | {row['ended_before_budget']} |"
            )
    return "\n".join(lines)


def axes_text(report: dict) -> str:
    lines = []
    for axis, row in report["analysis"]["axes"].items():
        outcomes = ", ".join(f"{axis_label(report, axis, level)}: {row['outcomes'][level]}" for level in row["levels"])
        where = row["breaks_down_at"]
        broken = (
            f"the claim first holds at {axis_label(report, axis, where)}" if where else "the claim holds at no level"
        )
        dropped = [
            axis_label(report, axis, level) for level in report["config_axes"][axis] if level not in row["levels"]
        ]
        not_kept = (
            f" Not kept (lost the task's properties, see the diagnostics): {', '.join(dropped)}." if dropped else ""
        )
        lines.append(f"- **{axis}** (at 10x): {outcomes}. {broken[0].upper()}{broken[1:]}.{not_kept}")
    return "\n".join(lines)


def h2_text(report: dict) -> str:
    lines = []
    for axis, row in report["analysis"]["h2"].items():
        if row["supported"] is None:
            lines.append(f"- {axis}: not tested ({row['why']}).")
            continue
        easy, hard = row["gaps"][row["easiest"]], row["gaps"][row["hardest"]]
        lines.append(
            f"- {axis}: gap {_pct(easy['gap'])} points [{_pct(easy['low'])}, {_pct(easy['high'])}] at "
            f"{axis_label(report, axis, row['easiest'])} (best zero-order: {easy['best_zero_order']}), "
            f"{_pct(hard['gap'])} [{_pct(hard['low'])}, {_pct(hard['high'])}] at "
            f"{axis_label(report, axis, row['hardest'])} ({hard['best_zero_order']}): "
            f"{'supported' if row['supported'] else 'not supported'}."
        )
    return "\n".join(lines)


def h3_text(report: dict) -> str:
    lines = [
        "| method | last minus selected at the chosen settings (points) | at stage A's largest step | by goals per "
        "candidate (stage B) | runs whose loss falls while success falls % |",
        "|---|---|---|---|---|",
    ]
    for method, row in report["analysis"]["h3"].items():
        largest = row.get("largest_step_last_minus_selected")
        by_goals = ", ".join(f"{k}: {_pct(v)}" for k, v in row.get("last_minus_selected_by_goals", {}).items())
        lines.append(
            f"| {method} | {_pct(row['chosen_last_minus_selected'])} | "
            f"{'' if largest is None else _pct(largest)} | {by_goals} | {_pct(row['loss_falls_as_success_falls'])} |"
        )
    return "\n".join(lines)


def tuning_table(report: dict) -> str:
    lines = [
        "| cell | method | stage | configurations x seeds | rounds | extensions | chosen per budget |",
        "|---|---|---|---|---|---|---|",
    ]
    for search in report["tuning"]:
        count = 1
        for _, values in search["grid"]:
            count *= len(values)
        extensions = "; ".join(f"{e['setting']} {e['from']:g} -> {e['to']:g}" for e in search["extensions"]) or "none"
        if search["not_extended"]:
            extensions += "; not extended: " + "; ".join(f"{e['setting']} ({e['why']})" for e in search["not_extended"])
        chosen = "; ".join(f"{BUDGET_NAMES[b]}: {_settings(s)}" for b, s in search["choices"].items())
        seeds = len(report["config"]["tuning_seeds"])
        lines.append(
            f"| {search['cell']} | {search['method']} | {search['stage']} | {count} x {seeds} | {search['rounds']} | "
            f"{extensions} | {chosen} |"
        )
    return "\n".join(lines)


def verdict_paragraph(report: dict) -> str:
    """The study's answer in one paragraph, from its numbers: per kept cell the 10x verdict against the gradient
    policy (by how many points the closest zero-order method is below it), where along each axis zero-order breaks
    down, and the cells not kept. What the README and the experiment's page quote."""
    cells = report["analysis"]["cells"]
    holds, not_holds = [], []
    for cell, analysis in cells.items():
        v = analysis["verdicts"]["gradient"]["10x"]
        label = f"{report['levels'][cell]}" if cell != "base" else "the base cell"
        gap = v["closest_gap"]
        side = f"{_pct(abs(gap))} points {'below' if gap >= 0 else 'above'} the gradient policy"
        (not_holds if v["outcome"] == "does not hold" else holds).append((label, v["outcome"], v["closest"], side))
    parts = [
        f"At 10x the gradient trainer's layer evaluations, every zero-order method given {len(report['config']['seeds'])}"
        f" seeds and its own tuning, the claim that zero-order fails "
    ]
    if not not_holds:
        parts.append("holds in every kept cell")
    elif not holds:
        parts.append("holds in no kept cell")
    else:
        parts.append(f"holds in {len(holds)} of {len(cells)} kept cells")
    if holds:
        parts.append(
            ": it holds in "
            + "; ".join(f"{label} ({outcome}; the closest, {m}, {side})" for label, outcome, m, side in holds)
        )
    if not_holds:
        parts.append(
            ("; it does not hold in " if holds else ": it does not hold in ")
            + "; ".join(f"{label} ({m} {side})" for label, _, m, side in not_holds)
        )
    parts.append(". ")
    breaks = []
    for axis, row in report["analysis"]["axes"].items():
        where = row["breaks_down_at"]
        breaks.append(
            f"along {axis.replace('_', '-')} zero-order "
            + (f"breaks down first at {axis_label(report, axis, where)}" if where else "breaks down at no kept level")
        )
    parts.append("; ".join(breaks).capitalize() + ".")
    dropped = [report["levels"][name] for name in report["diagnostics"] if name not in cells]
    if dropped:
        parts.append(f" Not kept (the task loses its properties there, so they test nothing): {', '.join(dropped)}.")
    return "".join(parts)


def _sessions_note(report: dict) -> str:
    sessions = report.get("sessions") or []
    if len(sessions) < 2:
        return ""
    return (
        f", summed over the {len(sessions)} sessions that ran it (started {', '.join(s['started'] for s in sessions)})"
    )


def render_markdown(report: dict) -> str:
    cfg = report["config"]
    minutes = report["seconds"] / 60
    parts = [
        "# The counterweight study: the paper's claim against zero-order methods",
        "",
        provenance_line(report["provenance"]),
        "",
        *(
            [f"The study's runs: {provenance_line(report['study_provenance'])}", ""]
            if report.get("study_provenance")
            else []
        ),
        f"Pre-registered in `docs/counterweight-study.md`. Seeds {len(cfg['seeds'])} per cell; 1x = "
        f"{report['one_x']} layer evaluations (selection included), 10x = {cfg['multiple'] * report['one_x']}. "
        f"The whole study took {minutes:.1f} min on {cfg['workers']} worker processes of one torch thread each"
        f"{_sessions_note(report)}.",
        "",
        "## Verdict",
        "",
        verdict_paragraph(report),
        "",
        "## The cells, before any training",
        "",
        diagnostics_table(report),
        "",
        "## The verdict per cell and budget",
        "",
        "Against the gradient policy (`gradient`, unrolled, at its 1x):",
        "",
        verdict_table(report),
        "",
        "Against `gradient_implicit` (the paper's implicit differentiation, at its 1x):",
        "",
        verdict_table(report, "gradient_implicit"),
        "",
        "## Along each axis",
        "",
        axes_text(report),
        "",
        "H2 (the gap grows along the axis by at least 20 points):",
        "",
        h2_text(report),
        "",
        "## The decline of the zero-order curves (H3, base cell, 10x)",
        "",
        h3_text(report),
        "",
        "## Every method, per cell",
        "",
    ]
    for cell in report["analysis"]["cells"]:
        parts += [cell_table(report, cell), ""]
    parts += ["## Tuning", "", tuning_table(report), ""]
    phases = ", ".join(f"{name} {seconds / 60:.1f} min" for name, seconds in report["phase_seconds"].items())
    parts += [f"Time by phase: {phases}.", "", f"Figures: {', '.join(report['figures'])}", ""]
    gradient_only = ", ".join(GRADIENT_STUDY_METHODS)
    parts += [f"The gradient methods ({gradient_only}) run at 1x only; their rows are their 1x.", ""]
    return "\n".join(parts)
