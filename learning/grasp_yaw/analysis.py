"""Where a trained predictor loses to the teacher: per-goal yaw gaps on every split, and learning curves per split.

For each goal the predictor's yaw is compared with the teacher's: within ``MATCH_TOLERANCE`` of it (the
teacher's basin), within it of ``teacher + pi`` (the flipped grasp, a different IK target), or elsewhere (another
basin). The excess joint displacement over the teacher's (failed rows included, as in the report) is split over
those kinds and over attributes that may explain it: the solution ends near a joint limit, the wrist starts far
from its range centre, the base joint starts outside the range the training split covers. The learning curves
score every validation-time state a checkpoint kept on every split (``Trainer`` stores them).
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import torch

from learning.common.io import atomic_write_json, atomic_write_text
from learning.common.panda import franka_kinematics
from learning.common.provenance import provenance, provenance_line
from learning.grasp_yaw.baselines import ik_layer, teacher
from learning.grasp_yaw.checkpoints import load_checkpoint
from learning.grasp_yaw.config import ExperimentCfg
from learning.grasp_yaw.evaluation import policy_chooser
from learning.grasp_yaw.experiment import EVAL_SPLITS, checkpoint_path, load_config
from learning.grasp_yaw.predictors import YawPolicy, build_predictor
from learning.grasp_yaw.report import LABELS
from learning.grasp_yaw.scoring import score_yaws
from learning.grasp_yaw.splits import GoalSet, load_splits
from learning.grasp_yaw.task import failure_penalty

MATCH_TOLERANCE = 0.25  # rad
LIMIT_MARGIN = 0.05  # rad from a joint limit counts as "near" it
WRIST_FAR = 0.75  # fraction of the wrist's half-range away from its centre
KINDS = ("teacher's basin", "flipped (psi + pi)", "another basin")
ATTRIBUTES = ("ends near a joint limit", "wrist far from its centre", "base joint outside the training range")
ANALYSED_METHODS = ("ik_trained", "ik_trained_one_yaw", "teacher_supervised")


def angle(yaw: torch.Tensor) -> torch.Tensor:
    return torch.atan2(yaw[..., 1], yaw[..., 0])


def angle_gap(yaw: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """``(N, 2), (N, 2) -> (N,)`` the signed angle from ``reference`` to ``yaw`` in ``(-pi, pi]``."""
    cross = reference[:, 0] * yaw[:, 1] - reference[:, 1] * yaw[:, 0]
    dot = (reference * yaw).sum(-1)
    return torch.atan2(cross, dot)


def gap_kind(gap: torch.Tensor) -> torch.Tensor:
    """``(N,)`` index into ``KINDS``: the teacher's basin, the flipped grasp, or another basin."""
    size = gap.abs()
    return torch.where(size <= MATCH_TOLERANCE, 0, torch.where((size - math.pi).abs() <= MATCH_TOLERANCE, 1, 2))


def goal_attributes(cfg: ExperimentCfg, kinematics, goals: GoalSet, qpos: torch.Tensor, base_range: float):
    """``(N, len(ATTRIBUTES))`` bool: what each goal's start state and solution look like."""
    lower, upper = kinematics.lower, kinematics.upper
    finite = torch.isfinite(upper - lower)
    near = ((qpos - lower < LIMIT_MARGIN) | (upper - qpos < LIMIT_MARGIN)) & finite
    centre, half = (lower[6] + upper[6]) / 2, (upper[6] - lower[6]) / 2
    wrist_far = (goals.q0[:, 6] - centre).abs() > WRIST_FAR * half
    base_outside = goals.q0[:, 0].abs() > base_range
    return torch.stack((near.any(-1), wrist_far, base_outside), -1)


def _share(rows: torch.Tensor, excess: torch.Tensor, failed: torch.Tensor) -> dict:
    total = float(excess.sum())
    count = int(rows.sum())
    return {
        "goals": count,
        "fraction": count / len(rows),
        "failures": int((failed & rows).sum()),
        "mean_excess": float(excess[rows].mean()) if count else 0.0,
        "excess_share": float(excess[rows].sum()) / total if total > 0 else 0.0,
    }


def split_gaps(cfg, kinematics, goals: GoalSet, yaw, reference, base_range: float) -> dict:
    """One predictor on one split against the teacher's yaws ``reference``: the breakdown by kind and attribute."""
    ik, penalty = ik_layer(kinematics, cfg.eval_ik_iterations), failure_penalty(kinematics)
    ours = score_yaws(ik, goals, yaw, cfg.weights, penalty)
    best = score_yaws(ik, goals, reference, cfg.weights, penalty)
    excess = ours.displacement - best.displacement
    failed = ~ours.success.bool()
    kind = gap_kind(angle_gap(yaw, reference))
    attributes = goal_attributes(cfg, kinematics, goals, ours.q, base_range)
    return {
        "excess_displacement": float(excess.mean()),
        "relative_excess": float(excess.mean() / best.displacement.mean()),
        "kinds": {name: _share(kind == k, excess, failed) for k, name in enumerate(KINDS)},
        "attributes": {name: _share(attributes[:, k], excess, failed) for k, name in enumerate(ATTRIBUTES)},
    }


def split_curves(cfg, kinematics, policy: YawPolicy, states: list[dict], splits: dict[str, GoalSet]) -> dict:
    """Mean success, displacement and cost of every validation-time state on every split."""
    ik, penalty = ik_layer(kinematics, cfg.eval_ik_iterations), failure_penalty(kinematics)
    curves = {name: {"success": [], "displacement": [], "cost": []} for name in splits}
    for state in states:
        policy.predictor.load_state_dict(state)
        for name, goals in splits.items():
            with torch.no_grad():
                metrics = score_yaws(ik, goals, policy(goals.p, goals.q0), cfg.weights, penalty).means()
            for metric, values in curves[name].items():
                values.append(metrics[metric])
    return curves


def analyse_run(run_dir: Path, methods: tuple[str, ...] = ANALYSED_METHODS) -> dict:
    """Per-goal gaps to the teacher and learning curves per split for each seed of each of ``methods``."""
    cfg = load_config(run_dir)
    kinematics = franka_kinematics(cfg.device)
    splits = {n: s.to(kinematics.device, kinematics.dtype) for n, s in load_splits(run_dir / "splits.pt").items()}
    base_range = float(splits["train"].q0[:, 0].abs().max())
    b = cfg.baselines
    teacher_ik, penalty = ik_layer(kinematics, b.teacher_ik_iterations), failure_penalty(kinematics)
    references = {
        name: teacher(
            teacher_ik, splits[name].p, splits[name].q0, b.teacher_yaws, b.teacher_refine_yaws, cfg.weights, penalty
        ).yaw
        for name in EVAL_SPLITS
    }
    evaluated = {name: splits[name] for name in EVAL_SPLITS}
    out: dict = {"base_range": base_range, "match_tolerance": MATCH_TOLERANCE, "methods": {}}
    for method in methods:
        per_seed = {}
        for seed in cfg.train.seeds:
            policy, meta = load_checkpoint(checkpoint_path(run_dir, seed, method), kinematics)
            choose = policy_chooser(policy)
            gaps = {
                name: split_gaps(cfg, kinematics, goals, choose(goals.p, goals.q0), references[name], base_range)
                for name, goals in evaluated.items()
            }
            states = meta.get("validation_states", [])
            fresh = YawPolicy(
                build_predictor(method, kinematics, cfg).to(kinematics.device, kinematics.dtype),
                kinematics,
                cfg,
            )
            per_seed[str(seed)] = {
                "best_step": meta["history"]["best_step"],
                "val_steps": meta["history"]["val_steps"],
                "gaps": gaps,
                "curves": split_curves(cfg, kinematics, fresh, states, evaluated),
            }
        out["methods"][method] = per_seed
    return out


def _mean(values) -> float:
    return statistics.fmean(values)


def gap_table(analysis: dict, method: str) -> str:
    """Mean over seeds, per split: share of goals, failures and share of the excess displacement by kind."""
    seeds = list(analysis["methods"][method].values())
    lines = [
        "| split | excess displacement rad² (% of teacher's) | kind or attribute | goals % | failures | "
        "mean excess rad² | share of excess % |",
        "|---|---|---|---|---|---|---|",
    ]
    for split in seeds[0]["gaps"]:
        gaps = [s["gaps"][split] for s in seeds]
        head = f"{_mean(g['excess_displacement'] for g in gaps):.3f} ({100 * _mean(g['relative_excess'] for g in gaps):.1f})"
        for group in ("kinds", "attributes"):
            for name in gaps[0][group]:
                rows = [g[group][name] for g in gaps]
                lines.append(
                    f"| {split} | {head} | {name} | {100 * _mean(r['fraction'] for r in rows):.1f} | "
                    f"{_mean(r['failures'] for r in rows):.1f} | {_mean(r['mean_excess'] for r in rows):.3f} | "
                    f"{100 * _mean(r['excess_share'] for r in rows):.0f} |"
                )
    return "\n".join(lines)


def summary_table(analysis: dict) -> str:
    """Every analysed predictor on every split: its excess displacement over the teacher's, the goals whose yaw
    is in another basin than the teacher's, and their share of the excess (means over seeds)."""
    lines = [
        "| predictor | split | excess displacement % of the teacher's | yaw in another basin, goals % | "
        "their share of the excess % | failures |",
        "|---|---|---|---|---|---|",
    ]
    for method, per_seed in analysis["methods"].items():
        seeds = list(per_seed.values())
        for split in seeds[0]["gaps"]:
            gaps = [s["gaps"][split] for s in seeds]
            other = [g["kinds"]["another basin"] for g in gaps]
            failures = _mean(sum(k["failures"] for k in g["kinds"].values()) for g in gaps)
            lines.append(
                f"| {LABELS.get(method, method)} | {split} | {100 * _mean(g['relative_excess'] for g in gaps):.1f} | "
                f"{100 * _mean(o['fraction'] for o in other):.1f} | {100 * _mean(o['excess_share'] for o in other):.0f} | "
                f"{failures:.1f} |"
            )
    return "\n".join(lines)


def curve_table(analysis: dict, method: str) -> str:
    """Mean over seeds of success % / displacement on every split at every validation step, with the best steps."""
    seeds = list(analysis["methods"][method].values())
    if not seeds[0]["curves"] or not seeds[0]["curves"][next(iter(seeds[0]["curves"]))]["cost"]:
        return "(no validation states in the checkpoints)"
    splits = list(seeds[0]["curves"])
    lines = [
        "| step | " + " | ".join(f"{s} success % / displ." for s in splits) + " | seeds whose best step it is |",
        "|---|" + "---|" * len(splits) + "---|",
    ]
    for k, step in enumerate(seeds[0]["val_steps"]):
        cells = []
        for split in splits:
            success = _mean(s["curves"][split]["success"][k] for s in seeds)
            displacement = _mean(s["curves"][split]["displacement"][k] for s in seeds)
            cells.append(f"{100 * success:.1f} / {displacement:.2f}")
        best = sum(s["best_step"] == step for s in seeds)
        lines.append(f"| {step} | " + " | ".join(cells) + f" | {best} |")
    return "\n".join(lines)


def analysis_markdown(analysis: dict) -> str:
    parts = [
        "# Grasp-yaw experiment: where the predictors lose to the teacher",
        "",
        f"Yaw within {analysis['match_tolerance']} rad of the teacher's: its basin; within it of the teacher's + pi: "
        f"the flipped grasp. Base joint outside the training range: |q0_1| > {analysis['base_range']:.2f} rad. "
        "Mean over seeds; excess = displacement minus the teacher's, failed rows included.",
        "",
    ]
    if "provenance" in analysis:
        parts += [provenance_line(analysis["provenance"]), ""]
    parts += ["**At a glance**", "", summary_table(analysis), ""]
    for method in analysis["methods"]:
        label = LABELS.get(method, method)
        parts += [f"**{label}: gaps to the teacher**", "", gap_table(analysis, method), ""]
        parts += [f"**{label}: learning curves per split**", "", curve_table(analysis, method), ""]
    return "\n".join(parts)


def write_analysis(run_dir: Path, out: Path | None = None, command: str = "python -m learning analyse") -> dict:
    """Analyse ``run_dir``; write ``analysis.json`` and ``analysis.md`` there (or at ``out``.json / .md)."""
    analysis = {**analyse_run(run_dir), "provenance": provenance(command)}
    base = out if out is not None else run_dir / "analysis"
    atomic_write_json(base.with_suffix(".json"), analysis)
    atomic_write_text(base.with_suffix(".md"), analysis_markdown(analysis))
    return analysis
