"""The counterweight report's figures: validation success of gradient against zero-order training by layer
evaluations and by seconds (bands over seeds), the discovered strategy against the per-goal optimum, and a
side-view strip of the G1 at goals in front and behind (reach only against the learned policy)."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from learning.common.io import atomic_save_figure  # noqa: E402
from learning.counterweight.problem import CounterweightProblem  # noqa: E402
from learning.counterweight.report import LABELS  # noqa: E402
from learning.counterweight.statistics import curve_band  # noqa: E402

COLORS = {
    "gradient": "C0",
    "gradient_axes": "C9",
    "es_evaluations": "C3",
    "es_seconds": "C1",
    "sep_cma_evaluations": "C4",
    "sep_cma_seconds": "C6",
    "linear_cma_evaluations": "C2",
    "linear_cma_seconds": "C8",
}


def learning_curves(report: dict):
    """Validation success by layer evaluations and by training seconds: the mean over seeds and its 95 %
    bootstrap band, per trainer."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    for ax, key in ((axes[0], "evaluations"), (axes[1], "seconds")):
        end = max(max(run["curve"][key]) for runs in report["training"].values() for run in runs)
        grid = np.linspace(0.0, end, 200)
        for method, runs in report["training"].items():
            xs = [run["curve"][key] for run in runs]
            ys = [100 * np.asarray(run["curve"]["validation_success"]) for run in runs]
            band = curve_band(xs, ys, grid)
            last = max(x[-1] for x in xs)
            keep = grid <= last
            color = COLORS.get(method)
            ax.plot(grid[keep], np.asarray(band["mean"])[keep], color=color, label=LABELS.get(method, method))
            ax.fill_between(
                grid[keep], np.asarray(band["low"])[keep], np.asarray(band["high"])[keep], color=color, alpha=0.15
            )
        ax.set_ylabel("validation success % (mean, 95 % band)")
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    axes[0].set_xlabel("layer evaluations (one goal's whole-body solve)")
    axes[1].set_xlabel("training seconds")
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle("Learning the counterweight: gradients through the layer against zero-order training")
    fig.tight_layout()
    return fig


def strategy_figure(report: dict):
    """What the learned policy does against how far the goal lies in front of (positive) or behind (negative) the
    reaching shoulder (colour: distance), beside the per-goal optimum: the pelvis's and the free hand's forward
    displacement and the centre of mass's forward shift (m)."""
    strategy = report["strategy"]
    goal = np.asarray(strategy["goal"])
    distance, azimuth, elevation = goal.T
    forward = distance * np.cos(elevation) * np.cos(azimuth)
    panels = (
        ("pelvis", "pelvis, forward (m)"),
        ("free_hand", "free hand, forward (m)"),
        ("com", "CoM shift, forward (m)"),
    )
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for ax, (key, title) in zip(axes, panels, strict=True):
        policy = np.asarray(strategy["policy"][key])[:, 0]
        optimum = np.asarray(strategy["per_goal"][key])[:, 0]
        points = ax.scatter(forward, policy, c=distance, cmap="viridis", marker="o", s=22, label="learned policy")
        ax.scatter(forward, optimum, c=distance, cmap="viridis", marker="x", s=26, label="per-goal optimum")
        ax.axhline(0.0, color="k", lw=0.5)
        ax.axvline(0.0, color="k", lw=0.5)
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.supxlabel("goal's forward offset from the reaching shoulder (m; negative: behind)")
    fig.colorbar(points, ax=axes, label="goal distance (m)", shrink=0.8)
    fig.suptitle("The discovered counterweight (seed 0) against the per-goal optimum: displacement from rest")
    return fig


def skeleton_bones(problem: CounterweightProblem) -> list[tuple[int, int]]:
    """The robot as a stick figure: ``(parent, child)`` indices into ``tree.frame_names`` for every URDF joint."""
    root = ElementTree.fromstring(problem.robot.urdf_text())
    index = {name: i for i, name in enumerate(problem.tree.frame_names)}
    bones = []
    for joint in root.iter("joint"):
        parent, child = joint.find("parent").get("link"), joint.find("child").get("link")
        if parent in index and child in index:
            bones.append((index[parent], index[child]))
    return bones


def strip_figure(problem: CounterweightProblem, goals: torch.Tensor, poses: dict[str, torch.Tensor]):
    """Side views (x forward, z up): one column per goal, one row per method (``poses[method]`` = ``q (k, nq)``)."""
    bones, tree = skeleton_bones(problem), problem.tree
    hand = tree.frame_index(problem.robot.frames["right_hand"])
    fig, axes = plt.subplots(len(poses), len(goals), figsize=(3.0 * len(goals), 3.4 * len(poses)), squeeze=False)
    toe, heel = problem.polygon.corners_xy(tree, tree.forward_kinematics(problem.q_stand))[:, 0].aminmax()[::-1]
    for row, (method, q) in enumerate(poses.items()):
        with torch.no_grad():
            frames = tree.frame_poses(q)[..., :3, 3].numpy()
            com = tree.center_of_mass(q).numpy()
        for col in range(len(goals)):
            ax = axes[row, col]
            for a, b in bones:
                ax.plot(frames[col, [a, b], 0], frames[col, [a, b], 2], color="0.3", lw=1.5)
            ax.plot([float(heel), float(toe)], [0.0, 0.0], color="C2", lw=4, label="support (x)")
            ax.plot(com[col, 0], 0.0, "v", color="C3", markersize=9, label="CoM projection")
            ax.plot(goals[col, 0], goals[col, 2], "*", color="C1", markersize=12, label="goal")
            ax.plot(frames[col, hand, 0], frames[col, hand, 2], "s", color="C0", markersize=6, label="payload")
            ax.set_xlim(-0.75, 0.65)
            ax.set_ylim(-0.05, 1.55)
            ax.set_aspect("equal")
            ax.set_xticks([])
            ax.set_yticks([])
            if col == 0:
                ax.set_ylabel(LABELS.get(method, method), fontsize=8)
            if row == 0:
                distance = float((goals[col] - problem.shoulder).norm())
                ax.set_title(f"goal {distance:.2f} m from the shoulder", fontsize=8)
    axes[0, 0].legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    return fig


def write_figures(report: dict, problem: CounterweightProblem, goals: torch.Tensor, poses: dict, folder: Path):
    folder = Path(folder)
    figures = {
        "learning_curves.png": learning_curves(report),
        "strategy.png": strategy_figure(report),
        "strip.png": strip_figure(problem, goals, poses),
    }
    for name, fig in figures.items():
        atomic_save_figure(fig, folder / name)
        plt.close(fig)
    return [f"figures/{name}" for name in figures]
