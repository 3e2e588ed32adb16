"""Matplotlib figures of a report: per-split bars with spread, training and validation curves, yaw choices."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from learning.common.io import atomic_save_figure  # noqa: E402
from learning.grasp_yaw.report import LABELS  # noqa: E402

COLORS = {
    "ik_trained": "C0",
    "shared_constant": "C1",
    "teacher_supervised": "C2",
    "zero_order": "C3",
    "ik_trained_one_yaw": "C4",
    "zero_order_wall_time": "C5",
}
BUDGET_METHODS = ("ik_trained_one_yaw", "zero_order", "zero_order_wall_time")


def split_bars(report: dict):
    splits = list(report["results"])
    methods = list(report["results"][splits[0]])
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
    width = 0.8 / len(methods)
    for ax, metric, scale, title in (
        (axes[0], "success", 100.0, "success %"),
        (axes[1], "displacement", 1.0, "joint displacement (rad²)"),
    ):
        for k, method in enumerate(methods):
            stats = [report["results"][s][method][metric] for s in splits]
            ax.bar(
                np.arange(len(splits)) + k * width,
                [x["mean"] * scale for x in stats],
                width,
                yerr=[x["std"] * scale for x in stats],
                label=LABELS.get(method, method),
                capsize=2,
            )
        ax.set_xticks(np.arange(len(splits)) + 0.4 - width / 2, splits)
        ax.set_title(title)
    axes[0].set_ylim(50, 101)
    axes[1].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def training_curves(report: dict):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for method, seeds in report["training"].items():
        for k, (_seed, h) in enumerate(seeds.items()):
            label = LABELS.get(method, method) if k == 0 else None
            color = COLORS.get(method, "C7")
            if method != "teacher_supervised":
                axes[0].plot(h["steps"], h["loss"], color=color, alpha=0.5, label=label)
            axes[1].plot(
                h["val_steps"], [100 * x for x in h["val_success"]], color=color, alpha=0.7, label=label, marker="."
            )
    axes[0].set(title="training loss (cost through 24-step IK)", xlabel="step", yscale="log")
    axes[1].set(title="validation success %", xlabel="step")
    axes[0].legend(fontsize=8)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def budget_curves(report: dict):
    """Validation cost and success against training IK evaluations and against training seconds: the one-yaw
    network trained with gradients through IK against zero-order ES at an equal IK-evaluation budget and at an
    equal wall time."""
    fig, axes = plt.subplots(2, 2, figsize=(12, 7.5))
    for row, (budget, xlabel) in enumerate(
        (("val_ik_evaluations", "training IK evaluations"), ("val_seconds", "training seconds"))
    ):
        for method in BUDGET_METHODS:
            for k, h in enumerate(report["training"].get(method, {}).values()):
                label = LABELS[method] if k == 0 else None
                style = dict(color=COLORS[method], marker=".", alpha=0.7, label=label)
                axes[row, 0].plot(h[budget], h["val_cost"], **style)
                axes[row, 1].plot(h[budget], [100 * x for x in h["val_success"]], **style)
        axes[row, 0].set(title="validation cost", xlabel=xlabel, yscale="log")
        axes[row, 1].set(title="validation success %", xlabel=xlabel)
        axes[row, 0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def yaw_choices(yaws: dict[str, torch.Tensor]):
    reference = torch.atan2(yaws["teacher"][:, 1], yaws["teacher"][:, 0]).numpy()
    shown = [m for m in ("radial", "heading", "ik_trained", "teacher_supervised", "angular_grid") if m in yaws]
    fig, axes = plt.subplots(1, len(shown), figsize=(3.2 * len(shown), 3.3), sharey=True)
    for ax, method in zip(np.atleast_1d(axes), shown, strict=False):
        psi = torch.atan2(yaws[method][:, 1], yaws[method][:, 0]).numpy()
        ax.scatter(reference, psi, s=4, alpha=0.6)
        ax.plot([-math.pi, math.pi], [-math.pi, math.pi], "k--", lw=0.8)
        ax.set(
            title=LABELS.get(method, method),
            xlabel="reference yaw (rad)",
            xlim=(-math.pi, math.pi),
            ylim=(-math.pi, math.pi),
        )
    np.atleast_1d(axes)[0].set_ylabel("chosen yaw (rad)")
    fig.tight_layout()
    return fig


def write_figures(report: dict, yaws: dict[str, torch.Tensor], folder: Path) -> list[Path]:
    """Write the report's figures as PNG files into ``folder``; returns their paths."""
    written = []
    for name, fig in (
        ("split_metrics.png", split_bars(report)),
        ("training_curves.png", training_curves(report)),
        ("zero_order_vs_gradient.png", budget_curves(report)),
        ("yaw_choices.png", yaw_choices(yaws)),
    ):
        path = Path(folder) / name
        atomic_save_figure(fig, path)
        plt.close(fig)
        written.append(path)
    return written
