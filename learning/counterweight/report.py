"""The counterweight report: per split and method, mean and spread over seeds; rendered as markdown."""

from __future__ import annotations

from kinematics.benchmark.provenance import provenance_line
from learning.counterweight.goals import TEST_SPLITS
from learning.report import cell as mean_and_spread
from learning.report import summarize as summarize_seeds

LABELS = {
    "reach_only": "reach only (body at rest targets)",
    "constant": "one constant action (free hand fully back)",
    "rule": "hand-written rule (free hand back with distance)",
    "gradient": "policy trained through the layer",
    "es_evaluations": "policy by ES, equal layer evaluations",
    "es_time": "policy by ES, equal wall time",
    "online": "per-goal optimisation through the layer",
    "free_body": "whole body free (body tasks removed)",
    "no_balance": "reach only without balance (upper bound)",
}
METRICS = (
    "success",
    "reached",
    "balanced",
    "hand_error_median_mm",
    "hand_error_mean_mm",
    "balance_margin_median_mm",
    "balance_margin_min_mm",
    "latency_ms",
)


def summarize(rows: dict) -> dict:
    """``learning.report.summarize`` of every metric, with each method's goal count."""
    out = summarize_seeds(rows, METRICS)
    for split, methods in rows.items():
        for method, runs in methods.items():
            out[split][method] = {"goals": runs[0]["goals"], **out[split][method]}
    return out


def _cell(stat: dict, scale: float = 1.0) -> str:
    return mean_and_spread(stat, scale, digits=1)


def split_table(report: dict, split: str) -> str:
    lines = [
        f"**{split}**",
        "",
        "| method | goals | success % | hand error mm (median) | balance margin mm (median) | latency ms/goal |",
        "|---|---|---|---|---|---|",
    ]
    for method, stats in report["results"][split].items():
        lines.append(
            f"| {LABELS.get(method, method)} | {stats['goals']} | {_cell(stats['success'], 100)} | "
            f"{_cell(stats['hand_error_median_mm'])} | {_cell(stats['balance_margin_median_mm'])} | "
            f"{_cell(stats['latency_ms'])} |"
        )
    return "\n".join(lines)


def distribution_table(check: dict) -> str:
    lines = [
        "| split | goals | reach only succeeds % | succeeds without balance % | fails because of balance % |",
        "|---|---|---|---|---|",
    ]
    for split, row in check.items():
        lines.append(
            f"| {split} | {row['goals']} | {100 * row['reach_only']:.1f} | {100 * row['no_balance']:.1f} | "
            f"{100 * row['fails_because_of_balance']:.1f} |"
        )
    return "\n".join(lines)


def budget_table(report: dict) -> str:
    lines = ["| trainer | seed | layer evaluations | training s |", "|---|---|---|---|"]
    for method, runs in report["training"].items():
        for seed, run in enumerate(runs):
            lines.append(f"| {LABELS.get(method, method)} | {seed} | {run['evaluations']} | {run['seconds']:.1f} |")
    return "\n".join(lines)


def render_markdown(report: dict) -> str:
    parts = [
        "# Counterweight experiment: a G1 holding a payload reaches past its balance limit",
        "",
        provenance_line(report["provenance"]),
        "",
        f"Payload {report['config']['problem']['payload_kg']} kg in the reaching hand; the centre of mass kept "
        f"{1e3 * report['config']['problem']['margin']:.0f} mm inside the support polygon; success = hand within "
        f"{1e3 * report['config']['problem']['tolerance']:.0f} mm, feet held, CoM in the shrunk polygon, joint "
        "limits (the no-balance bound's success leaves out the CoM). Mean ± std over training seeds.",
        "",
        "Before training (`check-distribution`):",
        "",
        distribution_table(report["distribution"]),
        "",
    ]
    for split in report["results"]:
        parts += [split_table(report, split), ""]
    parts += ["Training budgets:", "", budget_table(report), ""]
    parts += [f"Figures: {', '.join(report['figures'])}", ""]
    return "\n".join(parts)


__all__ = ["LABELS", "METRICS", "TEST_SPLITS", "render_markdown", "summarize"]
