"""Does the yaw matter? The radial rule, heading (keep the current yaw) and a dense grid on the first goals of the validation split.

The experiment shows something only if ``q0`` varies enough that the simple rules are far from the best yaw; this check
(``python -m learning check-distribution``) measures that with 64-step IK, as the experiment's evaluation does.
"""

from __future__ import annotations

import torch

from learning.common.panda import franka_kinematics
from learning.grasp_yaw.baselines import angular_grid, heading_yaw, ik_layer, radial_yaw
from learning.grasp_yaw.config import ExperimentCfg
from learning.grasp_yaw.report import rename_legacy_methods
from learning.grasp_yaw.scoring import score_yaws
from learning.grasp_yaw.splits import make_splits
from learning.grasp_yaw.task import failure_penalty


def distribution_check(cfg: ExperimentCfg, goals: int = 256, grid_yaws: int = 72) -> dict[str, dict[str, float]]:
    """Success and mean joint displacement of the radial rule, heading and a ``grid_yaws`` grid on ``goals`` goals,
    and the fraction of goals that some grid yaw solves."""
    kinematics = franka_kinematics(cfg.device)
    split = make_splits(cfg, kinematics)["validation"].subset(slice(0, goals))
    split = split.to(kinematics.device, kinematics.dtype)
    ik, penalty = ik_layer(kinematics, cfg.eval_ik_iterations), failure_penalty(kinematics)
    grid = angular_grid(ik, split.p, split.q0, grid_yaws, cfg.weights, penalty)
    out = {}
    for name, yaw in (
        ("radial", radial_yaw(split.p)),
        ("heading", heading_yaw(kinematics, split.q0)),
        (f"grid_{grid_yaws}", grid.yaw),
    ):
        metrics = score_yaws(ik, split, yaw, cfg.weights, penalty)
        out[name] = {"success": float(metrics.success.mean()), "displacement": float(metrics.displacement.mean())}
    out["any_yaw_solves"] = {"fraction": float((grid.cost < penalty).to(torch.float64).mean())}
    return out


def distribution_markdown(check: dict[str, dict[str, float]]) -> str:
    """The check as a markdown table (success %, mean joint displacement rad²) and the solvable fraction."""
    lines = ["| method | success % | joint displacement rad² |", "|---|---|---|"]
    for name, values in rename_legacy_methods(check).items():
        if "success" in values:
            lines.append(f"| {name} | {100 * values['success']:.1f} | {values['displacement']:.2f} |")
    solvable = check.get("any_yaw_solves", {}).get("fraction")
    if solvable is not None:
        lines += ["", f"Goals that some grid yaw solves: {100 * solvable:.1f} %."]
    return "\n".join(lines) + "\n"
