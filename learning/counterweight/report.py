"""The counterweight report: per split and method (each trained one as its selected checkpoint and its last
iterate), mean ± std and the IQM with its 95 % bootstrap interval over seeds; the budgets (validation solves
included), the tuning, the task's diagnostics and the claim's verdict; rendered as markdown."""

from __future__ import annotations

from learning.common.provenance import provenance_line
from learning.counterweight.evaluation import POLICY_METHODS
from learning.counterweight.statistics import seed_summary

LABELS = {
    "reach_only": "reach only (body at rest targets)",
    "rule": "hand-written rule (free hand away from the goal)",
    "constant": "best constant R^9 offset",
    "gradient": "policy trained through the layer (R^9)",
    "gradient_axes": "through the layer, 7-D hand-chosen action (ablation)",
    "es_evaluations": "OpenAI-ES, network, equal layer evaluations",
    "es_seconds": "OpenAI-ES, network, equal wall time",
    "sep_cma_evaluations": "sep-CMA-ES, network, equal layer evaluations",
    "sep_cma_seconds": "sep-CMA-ES, network, equal wall time",
    "linear_cma_evaluations": "CMA-ES, linear policy, equal layer evaluations",
    "linear_cma_seconds": "CMA-ES, linear policy, equal wall time",
    "online": "per-goal optimisation through the layer",
    "free_body": "whole body free (body tasks removed)",
    "no_balance": "reach only without balance (upper bound)",
}
LABELS.update({f"{key}_last": f"{label}, last iterate" for key, label in list(LABELS.items())})
METRICS = ("success", "reached", "balanced", "hand_error_median_mm", "balance_margin_median_mm", "latency_ms")
SECTOR_METRICS = ("success_front", "success_behind")
ZERO_ORDER_ROWS = tuple(m for m in POLICY_METHODS if m not in ("gradient", "gradient_axes"))


def summarize(rows: dict) -> dict:
    """``rows[split][method]`` = metrics per seed -> per metric ``seed_summary``, with the goal count."""
    out: dict = {}
    for split, methods in rows.items():
        out[split] = {}
        for method, runs in methods.items():
            out[split][method] = {"goals": runs[0]["goals"], "seeds": len(runs)}
            for metric in METRICS:
                out[split][method][metric] = seed_summary([r[metric] for r in runs])
            for metric in SECTOR_METRICS:
                values = [r.get(metric) for r in runs]
                if None not in values:
                    out[split][method][metric] = seed_summary(values)
    return out


def _mean_std(stat: dict, scale: float = 1.0, digits: int = 1) -> str:
    text = f"{stat['mean'] * scale:.{digits}f}"
    if len(stat["per_seed"]) > 1:
        text += f" ± {stat['std'] * scale:.{digits}f}"
    return text


def _iqm(stat: dict, scale: float = 100.0) -> str:
    if len(stat["per_seed"]) < 2:
        return ""
    return f"{stat['iqm'] * scale:.1f} [{stat['iqm_low'] * scale:.1f}, {stat['iqm_high'] * scale:.1f}]"


def split_table(report: dict, split: str) -> str:
    lines = [
        f"**{split}**",
        "",
        "| method | goals × seeds | success % (mean ± std) | success IQM % [95 % CI] | hand error mm (median) | "
        "balance margin mm (median) | latency ms/goal |",
        "|---|---|---|---|---|---|---|",
    ]
    for method, stats in report["results"][split].items():
        lines.append(
            f"| {LABELS.get(method, method)} | {stats['goals']} × {stats['seeds']} | "
            f"{_mean_std(stats['success'], 100)} | {_iqm(stats['success'])} | "
            f"{_mean_std(stats['hand_error_median_mm'])} | {_mean_std(stats['balance_margin_median_mm'])} | "
            f"{_mean_std(stats['latency_ms'])} |"
        )
    return "\n".join(lines)


def distribution_table(check: dict) -> str:
    """The task's diagnostics (``learning.counterweight.distribution``) as markdown."""
    lines = [
        "| split | goals | candidates drawn | kept (need a counterweight) % | front % | reach only % | without balance % |",
        "|---|---|---|---|---|---|---|",
    ]
    for split, row in check["splits"].items():
        reach = f"{100 * row['reach_only']:.1f}" if "reach_only" in row else ""
        free = f"{100 * row['no_balance']:.1f}" if "no_balance" in row else ""
        lines.append(
            f"| {split} | {row['goals']} | {row['candidates']} | {100 * row['kept']:.1f} | "
            f"{100 * row['front_share']:.0f} | {reach} | {free} |"
        )
    iid = check["iid"]
    sectors = ", ".join(f"{name} {100 * v:.0f} %" for name, v in iid["best_constant_by_sector"].items())
    lines += [
        "",
        f"On the IID test split: reach only {100 * iid['reach_only']:.1f} %, without balance "
        f"{100 * iid['no_balance']:.1f} %, the best constant R^9 offset {100 * iid['best_constant']:.1f} % "
        f"({sectors}), per-goal optimisation {100 * iid['per_goal']:.1f} % (first {iid['per_goal_goals']} goals).",
        "",
        "Properties the task must keep: "
        + ", ".join(f"{name} {'✔' if held else '✘'}" for name, held in iid["properties"].items()),
    ]
    return "\n".join(lines)


def budget_table(report: dict) -> str:
    """Each trainer's budget, and its validation success at its best checkpoint (the one evaluated) and at the end
    of training (the last iterate: how much the checkpoint choice gives it)."""
    lines = [
        "| trainer | budget | runs | layer evaluations (mean) | training s (mean ± std) | validation % at the chosen "
        "checkpoint (mean) | validation % at the end (mean) |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, runs in report["training"].items():
        evaluations = sum(r["evaluations"] for r in runs) / len(runs)
        seconds = seed_summary([r["seconds"] for r in runs])
        best = sum(r["curve"]["validation_success"][r["selected"]] for r in runs) / len(runs)
        last = sum(r["curve"]["validation_success"][-1] for r in runs) / len(runs)
        lines.append(
            f"| {LABELS.get(key, key)} | {runs[0]['budget']} | {len(runs)} | {evaluations:.0f} | {_mean_std(seconds)} "
            f"| {100 * best:.1f} | {100 * last:.1f} |"
        )
    return "\n".join(lines)


def sector_table(report: dict, split: str = "test_iid") -> str:
    """Success by sector (mean ± std over seeds): where each method's counterweight works."""
    lines = [f"**{split}, by sector**", "", "| method | front % | behind % |", "|---|---|---|"]
    for method, stats in report["results"][split].items():
        if all(metric in stats for metric in SECTOR_METRICS):
            cells = " | ".join(_mean_std(stats[metric], 100) for metric in SECTOR_METRICS)
            lines.append(f"| {LABELS.get(method, method)} | {cells} |")
    return "\n".join(lines)


def tuning_table(report: dict) -> str:
    lines = [
        "| method | configuration | tuning split % (selected checkpoint) | tuning split % (last iterate) | "
        "validation % (selected) | chosen |",
        "|---|---|---|---|---|---|",
    ]
    for method, rows in report["tuning"].items():
        for row in rows:
            chosen = "✔" if row["settings"] == report["chosen"][method] else ""
            settings = ", ".join(f"{k} {v:g}" for k, v in row["settings"].items())
            lines.append(
                f"| {method} | {settings} | {100 * row['tuning_success']:.1f} | {100 * row['last_tuning_success']:.1f} "
                f"| {100 * row['best_validation_success']:.1f} | {chosen} |"
            )
    return "\n".join(lines)


def verdict_text(report: dict) -> str:
    verdict = report["verdict"]
    gradient = report["results"]["test_iid"]["gradient"]["success"]
    lines = [
        f"Gradient policy on the IID split: IQM {100 * gradient['iqm']:.1f} % [{100 * gradient['iqm_low']:.1f}, "
        f"{100 * gradient['iqm_high']:.1f}]. The claim needs every zero-order method at least "
        f"{100 * verdict['gap_required']:.0f} points below it, intervals apart, at both budgets:",
        "",
        "| zero-order method | gap (points) | intervals apart | holds |",
        "|---|---|---|---|",
    ]
    for method, row in verdict["methods"].items():
        lines.append(
            f"| {LABELS.get(method, method)} | {100 * row['gap']:.1f} | {'yes' if row['separated'] else 'no'} | "
            f"{'✔' if row['holds'] else '✘'} |"
        )
    lines += ["", f"**Verdict: the claim {'holds' if verdict['holds'] else 'does not hold'} on this task.**"]
    return "\n".join(lines)


def render_markdown(report: dict) -> str:
    cfg = report["config"]
    parts = [
        "# Counterweight experiment: a G1 holding a payload reaches in front of and behind itself",
        "",
        provenance_line(report["provenance"]),
        "",
        f"Payload {cfg['problem']['payload_kg']} kg in the reaching hand; the centre of mass kept "
        f"{1e3 * cfg['problem']['margin']:.0f} mm inside the support polygon; success = hand within "
        f"{1e3 * cfg['problem']['tolerance']:.0f} mm, feet held, CoM in the shrunk polygon, joint limits (the "
        "no-balance bound's success leaves out the CoM). Seeds: "
        f"{', '.join(str(s) for s in cfg['seeds'])}; IQM = interquartile mean over seeds.",
        "",
        "The task, before any training (`check-distribution`):",
        "",
        distribution_table(report["distribution"]),
        "",
        "## The claim",
        "",
        verdict_text(report),
        "",
    ]
    for split in report["results"]:
        parts += [split_table(report, split), ""]
    parts += [sector_table(report), ""]
    parts += [
        "Tuning (one seed; chosen on the tuning split, at each run's checkpoint selected on the validation split):",
        "",
        tuning_table(report),
        "",
    ]
    parts += [
        f"Training budgets (the whole protocol, tuning included, took {report['train_seconds']:.0f} s"
        f"{' in its last, resumed session' if report.get('train_resumed') else ''} on {report['config']['workers']} "
        f"{'Ray ' if report.get('executor') == 'ray' else ''}worker processes of one torch thread each):",
        "",
        budget_table(report),
        "",
    ]
    parts += [f"Figures: {', '.join(report['figures'])}", ""]
    return "\n".join(parts)
