"""The report: per split and method, mean and spread over seeds of every metric; rendered as markdown."""

from __future__ import annotations

import statistics

from learning.common.provenance import provenance_line
from learning.grasp_yaw.scoring import METRICS
from learning.grasp_yaw.splits import TEST_SPLITS

LABELS = {
    "radial": "radial rule",
    "heading": "heading (current TCP yaw kept)",
    "shared_constant": "shared constant (IK-trained)",
    "ik_trained": "IK-trained predictor",
    "ik_trained_one_yaw": "IK-trained predictor, one yaw",
    "zero_order": "zero-order (ES) predictor",
    "zero_order_wall_time": "zero-order (ES), equal wall time",
    "teacher_supervised": "teacher-supervised predictor",
    "online_optimization": "online optimization",
    "angular_grid": "angular grid",
    "teacher": "teacher / reference",
}


# Runs written before the project took the seed's words call the radial rule "heading" and keeping the current TCP
# heading "current_yaw". Such a run has a "current_yaw" key; reading it maps both names.
LEGACY_METHOD_NAMES = {"heading": "radial", "current_yaw": "heading"}
LEGACY_NOTE = (
    "Written before the method names changed: the run's `heading` is the radial rule and its `current_yaw` is "
    "heading (the current TCP yaw kept); its keys are mapped on reading."
)


def rename_legacy_methods(methods: dict) -> dict:
    """A method-keyed mapping with the legacy names mapped; unchanged if it has no ``current_yaw`` key."""
    if "current_yaw" not in methods:
        return methods
    return {LEGACY_METHOD_NAMES.get(name, name): value for name, value in methods.items()}


def upgrade_report(report: dict) -> dict:
    """``report`` in today's method names, with ``legacy_names_note`` set if it was written with the old ones."""
    if not any("current_yaw" in methods for methods in report["results"].values()):
        return report
    return {
        **report,
        "results": {split: rename_legacy_methods(methods) for split, methods in report["results"].items()},
        "latency": rename_legacy_methods(report["latency"]),
        "legacy_names_note": LEGACY_NOTE,
    }


def summarize(rows: dict[str, dict[str, list[dict]]], metrics=METRICS) -> dict:
    """``rows[split][method]`` = one metrics dict per seed -> for each of ``metrics``, the mean, the std (0 for
    one seed) and the per-seed values."""
    out: dict = {}
    for split, methods in rows.items():
        out[split] = {}
        for method, per_seed in methods.items():
            out[split][method] = {}
            for metric in metrics:
                values = [r[metric] for r in per_seed]
                out[split][method][metric] = {
                    "mean": statistics.fmean(values),
                    "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                    "per_seed": values,
                }
    return out


def cell(stat: dict, scale: float = 1.0, digits: int = 2) -> str:
    """A table cell: the mean over seeds, ``± std`` when there are several."""
    text = f"{stat['mean'] * scale:.{digits}f}"
    if len(stat["per_seed"]) > 1:
        text += f" ± {stat['std'] * scale:.{digits}f}"
    return text


def split_table(report: dict, split: str) -> str:
    lines = [
        f"**{split}** ({report['split_sizes'][split]} goals)",
        "",
        "| method | success % | joint displacement rad² | position error mm | rotation error mrad | cost |",
        "|---|---|---|---|---|---|",
    ]
    for method, stats in report["results"][split].items():
        lines.append(
            f"| {LABELS.get(method, method)} | {cell(stats['success'], 100, 1)} | {cell(stats['displacement'])} | "
            f"{cell(stats['position_error'], 1e3)} | {cell(stats['rotation_error'], 1e3)} | {cell(stats['cost'])} |"
        )
    return "\n".join(lines)


def summary_table(report: dict) -> str:
    """Every method on the test splits (success %, joint displacement rad²; mean ± std over seeds for trained
    methods), with its throughput at the latency batch and its batch-1 latency."""
    splits = [s for s in TEST_SPLITS if s in report["results"]]
    short = {"test_iid": "IID", "test_spatial": "spatial", "test_shift": "shift"}
    batch = next(iter(report["latency"].values()))["batch"] if report["latency"] else 0
    headers = ["method"]
    for split in splits:
        headers += [f"{short.get(split, split)} success", f"{short.get(split, split)} displ."]
    headers += [f"goals/s (batch {batch})", "batch-1 ms"]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for method in report["results"][splits[0]]:
        cells = [LABELS.get(method, method)]
        for split in splits:
            stats = report["results"][split][method]
            cells += [cell(stats["success"], 100, 1), cell(stats["displacement"])]
        lat = report["latency"].get(method)
        cells += [f"{lat['goals_per_second']:.0f}", f"{lat['batch1_ms']:.1f}"] if lat else ["", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def latency_table(report: dict) -> str:
    lines = [
        "| method | batch-1 latency ms | ms per goal at batch | goals/s at batch |",
        "|---|---|---|---|",
    ]
    for method, lat in report["latency"].items():
        lines.append(
            f"| {LABELS.get(method, method)} | {lat['batch1_ms']:.2f} | {lat['batch_ms_per_goal']:.3f} "
            f"(batch {lat['batch']}) | {lat['goals_per_second']:.0f} |"
        )
    return "\n".join(lines)


EQUAL_IK_EVALUATIONS = ("ik_trained", "ik_trained_one_yaw", "zero_order")
EQUAL_WALL_TIME = ("ik_trained_one_yaw", "zero_order_wall_time")


def budget_table(report: dict, methods: tuple[str, ...] = EQUAL_IK_EVALUATIONS) -> str:
    """Training budgets and what they bought on validation: gradient (through IK) against zero-order (ES)
    training; ``methods`` that the report lacks are left out."""
    lines = [
        "| trainer | training IK evaluations | best validation success % | best validation cost | training seconds |",
        "|---|---|---|---|---|",
    ]
    for method in methods:
        histories = list(report["training"].get(method, {}).values())
        if not histories:
            continue
        best = [min(range(len(h["val_cost"])), key=h["val_cost"].__getitem__) for h in histories]
        success = [100 * h["val_success"][k] for h, k in zip(histories, best, strict=True)]
        cost = [h["val_cost"][k] for h, k in zip(histories, best, strict=True)]
        spread = statistics.stdev if len(histories) > 1 else (lambda _: 0.0)
        lines.append(
            f"| {LABELS[method]} | {statistics.fmean(h['ik_evaluations'] for h in histories):.0f} | "
            f"{statistics.fmean(success):.1f} ± {spread(success):.1f} | {statistics.fmean(cost):.2f} ± {spread(cost):.2f} | "
            f"{statistics.fmean(h['seconds'] for h in histories):.0f} |"
        )
    return "\n".join(lines)


# The seed's methods by its names, and the method of this project that runs each under the reference preset.
SEED_METHODS = {
    "heading": "heading",
    "constant": "shared_constant",
    "learned": "ik_trained_one_yaw",
    "supervised": "teacher_supervised",
    "online": "online_optimization",
    "grid": "angular_grid",
}
SEED_SPLITS = {"iid": "test_iid", "spatial": "test_spatial", "state_shift": "test_shift"}


def seed_table(report: dict) -> str:
    """The seed's own table (``report["seed_run"]``: its success %, mean joint displacement over solved goals and
    mean relative displacement above its 129-angle grid, per split) beside this run's, method by method; then this
    project's other methods under the same protocol."""
    seed = {(row["split"], row["method"]): row for row in report["seed_run"]["rows"]}
    headers = ["seed's method (ours)"]
    for split in SEED_SPLITS:
        headers += [f"{split} success seed / ours", f"{split} displ. seed / ours", f"{split} above grid % seed / ours"]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for seed_name, ours in SEED_METHODS.items():
        cells = [LABELS[ours] if LABELS[ours].startswith(seed_name) else f"{seed_name} ({LABELS[ours]})"]
        for split, our_split in SEED_SPLITS.items():
            theirs, stats = seed[(split, seed_name)], report["results"][our_split][ours]
            gap = "" if theirs["grid_gap_pct"] is None else f"{theirs['grid_gap_pct']:.2f}"
            cells += [
                f"{100 * theirs['success_rate']:.1f} / {cell(stats['success'], 100, 1)}",
                f"{theirs['mean_cost_valid']:.3f} / {cell(stats['displacement_solved'], 1, 3)}",
                f"{gap} / {cell(stats['grid_gap'], 100, 2)}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    for ours in (m for m in report["results"]["test_iid"] if m not in SEED_METHODS.values()):
        cells = [f"{LABELS[ours]} (ours only)"]
        for our_split in SEED_SPLITS.values():
            stats = report["results"][our_split][ours]
            cells += [
                f"— / {cell(stats['success'], 100, 1)}",
                f"— / {cell(stats['displacement_solved'], 1, 3)}",
                f"— / {cell(stats['grid_gap'], 100, 2)}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_markdown(report: dict) -> str:
    report = upgrade_report(report)
    t = report["teacher_labels"]
    parts = [
        f"# Grasp-yaw experiment: preset `{report['preset']}`",
        "",
        f"Seeds {report['seeds']}; mean ± standard deviation over seeds for trained methods (search methods are "
        f"deterministic). Every method's yaw is checked with the same IK solve from `q0`; failed rows count in every "
        f"column. Training took {report['train_seconds']:.0f} s on {report['torch_threads']} torch threads.",
        "",
        f"Teacher labels for {t['goals']} training goals: {t['ik_solves']} IK solves of {t['ik_iterations']} steps, "
        f"{t['seconds']:.1f} s.",
        "",
    ]
    if "provenance" in report:
        parts += [provenance_line(report["provenance"]), ""]
    if "legacy_names_note" in report:
        parts += [report["legacy_names_note"], ""]
    if "seed_run" in report:
        parts += [
            "**Beside the seed's own run** (its `learn_grasp_yaw`, same protocol, its own tasks and implementation: "
            f"{report['seed_run']['source']}). Displacement is the mean over solved goals (rad²); *above grid* is "
            "the mean relative displacement above the 129-angle grid's on goals both solve.",
            "",
            seed_table(report),
            "",
        ]
    parts += ["**Test splits at a glance**", "", summary_table(report), ""]
    for split in report["results"]:
        parts += [split_table(report, split), ""]
    rounds = next(iter(report["latency"].values())).get("rounds") if report["latency"] else None
    timed = f"; at the batch, the median of {rounds} rounds that time every method in turn" if rounds else ""
    parts += [
        f"**Complete inference latency** (inputs to final joints, IK included{timed})",
        "",
        latency_table(report),
        "",
    ]
    parts += ["**Gradient against zero-order training at an equal IK-evaluation budget**", "", budget_table(report), ""]
    if "zero_order_wall_time" in report["training"]:
        parts += [
            "**Gradient against zero-order training at an equal wall time** (the ES trainer gets the training "
            "seconds the one-yaw gradient trainer of the same seed took)",
            "",
            budget_table(report, EQUAL_WALL_TIME),
            "",
        ]
    return "\n".join(parts)
