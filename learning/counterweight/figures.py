"""The counterweight report's figures: validation success of gradient against zero-order training by layer
evaluations and by seconds, the discovered strategy (the policy's body targets against reach distance), and a
side-view strip of the G1 at a few goals (reach only against the learned policy)."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from learning.counterweight.problem import CounterweightProblem  # noqa: E402
from learning.counterweight.report import LABELS  # noqa: E402
from learning.io import atomic_save_figure  # noqa: E402

COLORS = {"gradient": "C0", "es_evaluations": "C3", "es_time": "C1"}


def learning_curves(report: dict):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for method, runs in report["training"].items():
        for k, run in enumerate(runs):
            curve = run["curve"]
            label = LABELS.get(method, method) if k == 0 else None
            for ax, key in ((axes[0], "evaluations"), (axes[1], "seconds")):
                success = 100 * np.asarray(curve["validation_success"])
                ax.plot(curve[key], success, color=COLORS.get(method), alpha=0.8, label=label, marker=".")
    axes[0].set_xlabel("layer evaluations (one goal's whole-body solve)")
    axes[1].set_xlabel("training seconds")
    for ax in axes:
        ax.set_ylabel("validation success %")
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle("Learning the counterweight: gradients through the layer against evolution strategies")
    fig.tight_layout()
    return fig


def strategy_figure(report: dict):
    strategy = report["strategy"]
    distance = np.asarray(strategy["distance_m"])
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, style in (
        ("free hand dx", "C0"), ("pelvis dx", "C1"), ("pelvis dz", "C2"), ("free hand dz", "C4"),
    ):  # fmt: skip
        ax.plot(distance, strategy[name], ".", color=style, label=f"{name} (m)")
    for name, style in (("pelvis pitch", "C3"), ("torso pitch", "C5")):
        ax.plot(distance, strategy[name], "x", color=style, label=f"{name} (rad)", markersize=4)
    ax.axhline(0.0, color="k", lw=0.5)
    ax.set_xlabel("goal distance from the reaching shoulder (m)")
    ax.set_ylabel("body target offset from rest")
    ax.set_title("The discovered strategy (policy trained through the layer, seed 0)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
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
            ax.set_xlim(-0.45, 0.65)
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
