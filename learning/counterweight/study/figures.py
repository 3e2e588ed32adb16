"""The study's figures: per axis, test success per method against the level (IQM with its 95 % interval, at 10x and
at equal wall time; the gradient methods at 1x), with the best constant and per-goal optimisation drawn; and the
base cell's test success against layer evaluations and against seconds (mean over seeds, 95 % band)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from learning.common.io import atomic_save_figure  # noqa: E402
from learning.counterweight.statistics import curve_band  # noqa: E402
from learning.counterweight.study.design import GRADIENT_STUDY_METHODS, STUDY_METHODS  # noqa: E402
from learning.counterweight.study.report import axis_label  # noqa: E402

COLORS = dict(zip(STUDY_METHODS, ("C0", "C9", "C3", "C4", "C2", "C1"), strict=True))
AXIS_TITLES = {"goal_dependence": "goal-dependence", "width": "search dimension", "tolerance": "precision"}


def axis_figure(report: dict, axis: str):
    cells, diagnostics = report["analysis"]["cells"], report["diagnostics"]
    levels = list(report["config_axes"][axis])  # every pre-registered level; the ones not kept are marked
    labels = [axis_label(report, axis, level) + ("" if level in cells else "\n(not kept)") for level in levels]
    x = np.arange(len(levels))
    fig, panels = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for ax, budget in zip(panels, ("10x", "equal_time"), strict=True):
        for offset, method in enumerate(STUDY_METHODS):
            use = "1x" if method in GRADIENT_STUDY_METHODS else budget
            stats = [cells[level]["rows"].get(method, {}).get(use) if level in cells else None for level in levels]
            shown = [i for i, s in enumerate(stats) if s is not None]
            if not shown:
                continue
            xs = x[shown] + (offset - 2.5) * 0.05
            iqm = np.array([100 * stats[i]["selected"]["iqm"] for i in shown])
            low = np.array([100 * stats[i]["selected"]["low"] for i in shown])
            high = np.array([100 * stats[i]["selected"]["high"] for i in shown])
            label = method + (" (1x)" if method in GRADIENT_STUDY_METHODS else "")
            ax.errorbar(xs, iqm, yerr=[iqm - low, high - iqm], marker="o", capsize=3, color=COLORS[method], label=label)
        constant = [100 * diagnostics[level]["best_constant"] for level in levels]
        ax.plot(x, constant, "k--", lw=1, label="best constant")
        ax.plot(
            x, [100 * diagnostics[level]["per_goal"] for level in levels], "k:", lw=1, label="per-goal optimisation"
        )
        ax.set_xticks(x, labels)
        ax.set_title(f"zero-order at {'10x' if budget == '10x' else 'equal wall time'}")
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    panels[0].set_ylabel("test success % (IQM, 95 % CI)")
    panels[0].legend(fontsize=7, loc="lower left")
    fig.suptitle(f"The claim along {AXIS_TITLES[axis]}")
    fig.tight_layout()
    return fig


def base_curves(report: dict):
    curves = report["analysis"]["cells"]["base"]["curves"]
    fig, panels = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for ax, key in zip(panels, ("evaluations", "seconds"), strict=True):
        end = max(max(x) for curve in curves.values() for x in curve[key])
        grid = np.linspace(0.0, end, 300)
        for method, curve in curves.items():
            band = curve_band(curve[key], [100 * np.asarray(y) for y in curve["success"]], grid)
            keep = grid <= max(x[-1] for x in curve[key])
            ax.plot(grid[keep], np.asarray(band["mean"])[keep], color=COLORS[method], label=method)
            ax.fill_between(
                grid[keep],
                np.asarray(band["low"])[keep],
                np.asarray(band["high"])[keep],
                color=COLORS[method],
                alpha=0.15,
            )
        ax.grid(alpha=0.3)
        ax.set_ylim(-2, 102)
    panels[0].set_xlabel("layer evaluations (selection included)")
    panels[1].set_xlabel("seconds (training and selection)")
    panels[0].set_ylabel("test success % of the selected checkpoint")
    panels[0].legend(fontsize=7, loc="lower right")
    fig.suptitle("Base cell: test success against the budget (mean over seeds, 95 % band)")
    fig.tight_layout()
    return fig


def write_figures(report: dict, folder: Path) -> list[str]:
    folder = Path(folder)
    figures = {f"axis_{axis}.png": axis_figure(report, axis) for axis in report["analysis"]["axes"]}
    figures["base_curves.png"] = base_curves(report)
    for name, fig in figures.items():
        atomic_save_figure(fig, folder / name)
        plt.close(fig)
    return [f"figures/{name}" for name in figures]
