"""What bounds the grasp predictor's throughput against the angular grid's: the full preset's methods on 256 of its
IID test goals, complete inference (the chooser, then the checking 64-step IK solve from ``q0``, continued from the
chooser's own solve of its answer where it hands one on, as ``learning.grasp_yaw.evaluation.solve_choice`` times it),
round-robin medians, and the IK-trained predictor taken apart: its features, its network, its hypotheses' checking
solves (``cfg.train.hypotheses`` of them, each ``cfg.train.ik_iterations`` steps), the final solve from ``q0`` and
continued from the chosen hypothesis's check; and the floor of any chooser that runs the one-yaw network (its layers
alone on ready features, then the final solve).

The networks are freshly initialised (their cost does not depend on their weights). Each method's IK work per goal
(solve iterations) is counted from its configuration: the bound on its throughput where IK dominates.

``python -m learning throughput-profile --out docs/results/experiment/throughput-profile`` writes it.
"""

from __future__ import annotations

import torch

from learning.common.panda import franka_kinematics
from learning.grasp_yaw.config import preset
from learning.grasp_yaw.evaluation import (
    eval_layer,
    final_joints,
    policy_chooser,
    round_robin_medians,
    search_choosers,
    solve_choice,
)
from learning.grasp_yaw.predictors import YawPolicy, build_predictor
from learning.grasp_yaw.splits import make_splits
from learning.grasp_yaw.task import grasp_pose

ROWS = {
    "radial": "the radial rule, then the final solve: the IK alone, the floor of any chooser",
    "ik_trained": "the IK-trained predictor (its hypotheses checked, the cheapest kept), then the final solve "
    "continued from its check",
    "ik_trained_one_yaw": "the IK-trained predictor with one yaw (no checks), then the final solve",
    "network_floor": "the one-yaw network's layers alone on ready features, then the final solve: the floor of any "
    "chooser that runs this network",
    "angular_grid": "the angular grid (every yaw solved, the cheapest kept), then the final solve continued from "
    "the cheapest's solve",
    "ik_trained.from_q0": "the IK-trained predictor with the final solve from q0 (its check not continued): the same "
    "joints",
    "angular_grid.from_q0": "the angular grid with the final solve from q0 (its cheapest's solve not continued): the "
    "same joints",
    "ik_trained.features": "the IK-trained predictor's features (its goal and start joints)",
    "ik_trained.network": "its network: the hypotheses",
    "ik_trained.checks": "its hypotheses' checking solves and their costs (the cheapest kept)",
    "final_solve": "the final (checking) solve alone, from q0",
    "final_solve.continued": "the final solve continued from the chosen hypothesis's check: the steps left",
}


def run(preset_name: str = "full", batch: int = 256, rounds: int = 15) -> dict:
    cfg = preset(preset_name)
    kinematics = franka_kinematics()
    splits = make_splits(cfg, kinematics)
    goals = splits["test_iid"].to(kinematics.device, kinematics.dtype).subset(slice(0, batch))
    eval_ik = eval_layer(cfg, kinematics)
    choosers = search_choosers(cfg, kinematics)
    policy = YawPolicy(build_predictor("ik_trained", kinematics, cfg), kinematics, cfg)
    one_yaw = YawPolicy(build_predictor("ik_trained_one_yaw", kinematics, cfg), kinematics, cfg)
    p, q0 = goals.p, goals.q0
    with torch.no_grad():
        features = policy.features(p, q0)
        hypotheses = policy.predictor(features, p)
        chosen_yaw, checked = policy.cheapest(p, q0, hypotheses)
        chosen = grasp_pose(p, chosen_yaw)
        one_yaw_features = one_yaw.features(p, q0)
        one_yaw_chosen = grasp_pose(p, one_yaw.predictor(one_yaw_features, p))
    fns = {
        "radial": lambda: solve_choice(choosers["radial"], goals, eval_ik),
        "ik_trained": lambda: solve_choice(policy_chooser(policy), goals, eval_ik),
        "ik_trained_one_yaw": lambda: solve_choice(policy_chooser(one_yaw), goals, eval_ik),
        "network_floor": lambda: (one_yaw.predictor.body(one_yaw_features), eval_ik(one_yaw_chosen, q0)),
        "angular_grid": lambda: solve_choice(choosers["angular_grid"], goals, eval_ik),
        "ik_trained.from_q0": lambda: solve_choice(policy, goals, eval_ik),  # a plain chooser: nothing handed on
        "angular_grid.from_q0": lambda: solve_choice(lambda p, q0: choosers["angular_grid"](p, q0), goals, eval_ik),
        "ik_trained.features": lambda: policy.features(p, q0),
        "ik_trained.network": lambda: policy.predictor(features, p),
        "ik_trained.checks": lambda: policy.cheapest(p, q0, hypotheses),
        "final_solve": lambda: eval_ik(chosen, q0),
        "final_solve.continued": lambda: final_joints(eval_ik, chosen, q0, checked),
    }
    with torch.no_grad():
        seconds = round_robin_medians(fns, rounds)
    b, train, final = cfg.baselines, cfg.train, cfg.eval_ik_iterations

    def continued(check: int) -> int:  # the final solve's steps after a check: its beginning where not longer
        return final - check if check <= final else final

    iterations = {
        "radial": final,
        "ik_trained": train.hypotheses * train.ik_iterations + continued(train.ik_iterations),
        "ik_trained_one_yaw": final,
        "network_floor": final,
        "angular_grid": b.grid_yaws * b.grid_ik_iterations + continued(b.grid_ik_iterations),
        "ik_trained.from_q0": train.hypotheses * train.ik_iterations + final,
        "angular_grid.from_q0": b.grid_yaws * b.grid_ik_iterations + final,
    }
    rows = [{"row": name, "per_goal_s": s / len(goals), "median_s": s, "ik_iterations_per_goal": iterations.get(name)}
            for name, s in seconds.items()]  # fmt: skip
    return {"preset": preset_name, "batch": len(goals), "rounds": rounds, "rows": ROWS, "results": rows,
            "settings": {"hypotheses": train.hypotheses, "check_iterations": train.ik_iterations,
                         "grid_yaws": b.grid_yaws, "grid_iterations": b.grid_ik_iterations,
                         "final_iterations": cfg.eval_ik_iterations}}  # fmt: skip


def markdown(doc: dict) -> str:
    """The table (the provenance line above it is the caller's)."""
    result = {r["row"]: r for r in doc["results"]}
    grid = result["angular_grid"]["per_goal_s"]
    lines = [f"What bounds the grasp predictor's throughput ({doc['preset']} preset, batch {doc['batch']}, medians of "
             f"{doc['rounds']} rounds):", ""]  # fmt: skip
    lines += ["| row | µs per goal | goals/s | x the grid | IK iterations per goal | what it is |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for name, what in doc["rows"].items():
        r = result.get(name)
        if r is None:
            continue
        iterations = r["ik_iterations_per_goal"]
        ratio = f"{grid / r['per_goal_s']:.2f}" if iterations is not None else ""
        count = "" if iterations is None else str(iterations)
        lines.append(
            f"| `{name}` | {1e6 * r['per_goal_s']:.2f} | {1 / r['per_goal_s']:,.0f} | {ratio} | {count} | {what} |"
        )
    s = doc["settings"]
    lines += ["", f"Settings: {s['hypotheses']} hypotheses checked with {s['check_iterations']}-step solves; the grid "
              f"{s['grid_yaws']} yaws of {s['grid_iterations']} steps; the final solve {s['final_iterations']} steps.",
              ""]  # fmt: skip
    return "\n".join(lines)
