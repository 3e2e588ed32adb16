"""The study's analysis, as pre-registered: per cell, method and budget, the test success of the selected
checkpoint and of the last iterate (IQM over seeds, 95 % stratified bootstrap intervals over seeds and goals from
rliable), evaluations to 90 % test success, milliseconds per layer evaluation; the verdict per cell and budget; where
along each axis zero-order breaks down; H2 and H3."""

from __future__ import annotations

import math
import statistics
import warnings

import numpy as np
from scipy import stats

from learning.counterweight.study.budgets import at_budget, evaluations_to_reach
from learning.counterweight.study.design import BUDGETS, GRADIENT_STUDY_METHODS, ZERO_ORDER_STUDY_METHODS, StudyCfg

CONFIDENCE = 0.95
RESAMPLES = 2000
FAIL_BELOW = 0.50  # a zero-order method fails under this test success (or at or below the best constant)
GAP = 0.20  # the 20-point gap rule
REACH = 0.90  # evaluations to reach this test success


def iqm_of_seeds(matrix: np.ndarray) -> float:
    """The interquartile mean over seeds (rows) of each seed's success over goals (columns)."""
    return float(stats.trim_mean(matrix.mean(axis=1), 0.25))


def summary(matrix: np.ndarray, seed: int = 0) -> dict:
    """``iqm``, ``low``, ``high``, ``mean``, ``per_seed`` of a ``(seeds, goals)`` success matrix. The interval is
    rliable's stratified bootstrap given the matrix transposed: its "tasks" are the seeds (resampled, with
    ``task_bootstrap``) and its "runs" the goals, resampled within each seed, so each resample keeps a seed's goals
    together and the interval carries the seed-to-seed spread."""
    from rliable import library as rly

    matrix = np.asarray(matrix, dtype=float)
    if matrix.shape[0] < 2 or np.all(matrix == matrix.flat[0]):
        low = high = iqm_of_seeds(matrix)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # arch's notice about RandomState
            _, interval = rly.get_interval_estimates(
                {"m": matrix.T},
                lambda x: np.array([iqm_of_seeds(x.T)]),
                task_bootstrap=True,
                reps=RESAMPLES,
                confidence_interval_size=CONFIDENCE,
                random_state=np.random.RandomState(seed),
            )
        low, high = float(interval["m"][0, 0]), float(interval["m"][1, 0])
    per_seed = matrix.mean(axis=1)
    return {
        "iqm": iqm_of_seeds(matrix),
        "low": low,
        "high": high,
        "mean": float(per_seed.mean()),
        "per_seed": per_seed.tolist(),
    }


def budget_limits(cfg: StudyCfg, gradient_seconds: float) -> dict[str, dict]:
    one_x = cfg.one_x()
    return {
        "1x": {"max_evaluations": one_x},
        "10x": {"max_evaluations": cfg.multiple * one_x},
        "equal_time": {"max_seconds": gradient_seconds},
    }


def method_row(
    cfg: StudyCfg, results: dict, per_seed: dict, budget: str, gradient_seconds: dict, matrices: dict
) -> dict:
    """One method at one budget in one cell, over its seeds; its ``(seeds, goals)`` success matrix of the selected
    checkpoints goes to ``matrices[budget]``."""
    reads, reached, ms = [], [], []
    for seed, name in sorted(per_seed.items()):
        result = results[name]
        limit = budget_limits(cfg, gradient_seconds.get(seed, math.inf))[budget]
        reads.append(at_budget(result, **limit))
        curve = result["curve"]
        ms.append(1e3 * curve["seconds"][-1] / curve["evaluations"][-1])
        reached.append(evaluations_to_reach(result, REACH, limit.get("max_evaluations")))
    selected = np.stack([r.per_goal.numpy() for r in reads]).astype(float)
    matrices.setdefault(budget, selected)
    last = np.stack([r.last_per_goal.numpy() for r in reads]).astype(float)
    censored = [math.inf if r is None else r for r in reached]
    return {
        "selected": summary(selected),
        "last": summary(last),
        "evaluations": statistics.mean(r.evaluations for r in reads),
        "seconds": statistics.mean(r.seconds for r in reads),
        # a seconds budget (equal wall time) the run ended before: read at its end (amendments 1 and 2)
        "ended_before_budget": sum(r.exhausted for r in reads) if budget == "equal_time" else 0,
        "ms_per_evaluation": statistics.median(ms),  # training and selection seconds per layer evaluation
        # within this budget (equal wall time: the run); inf: more than half the seeds never reach it
        "evaluations_to_90": statistics.median(censored),
        "reached_90": sum(r is not None for r in reached) / len(reached),
        "seeds": len(reads),
    }


def verdict(rows: dict, budget: str, constant: float, gradient: str = "gradient") -> dict:
    """The claim in one cell at one budget against ``gradient``'s 1x (see the pre-registration)."""
    reference = rows[gradient]["1x"]["selected"]
    methods = {}
    for method in ZERO_ORDER_STUDY_METHODS:
        if method not in rows or budget not in rows[method]:
            continue
        s = rows[method][budget]["selected"]
        methods[method] = {
            "iqm": s["iqm"],
            "fails": s["iqm"] < FAIL_BELOW or s["iqm"] <= constant,
            "gap": reference["iqm"] - s["iqm"],
            "separated": s["high"] < reference["low"],
        }
    closest = max(methods, key=lambda m: methods[m]["iqm"])
    if all(m["fails"] for m in methods.values()):
        outcome = "holds"
    elif all(m["gap"] >= GAP and m["separated"] for m in methods.values()):
        outcome = "holds as a gap"
    else:
        outcome = "does not hold"
    return {
        "outcome": outcome,
        "gradient": gradient,
        "gradient_iqm": reference["iqm"],
        "closest": closest,
        "closest_gap": methods[closest]["gap"],
        "methods": methods,
    }


def curves(cfg: StudyCfg, results: dict, per_seed: dict) -> dict:
    """Test success of the selected checkpoint against layer evaluations and seconds, per seed (for the figures)."""
    out = {"evaluations": [], "seconds": [], "success": [], "last_success": [], "loss": []}
    for _, name in sorted(per_seed.items()):
        result = results[name]
        curve = result["curve"]
        ys = []
        for within in range(1, len(curve["evaluations"]) + 1):
            ys.append(at_budget(result, max_evaluations=curve["evaluations"][within - 1]).success)
        out["evaluations"].append(curve["evaluations"])
        out["seconds"].append(curve["seconds"])
        out["success"].append(ys)
        probed = [i for i, p in enumerate(curve["probed"]) if p]
        out["last_success"].append([curve["probe_success"][i] for i in probed])
        out["loss"].append([curve["train_loss"][i] for i in probed])
    return out


def surrogate_decline(curve: dict, drop: float = 0.05) -> float:
    """The fraction of runs whose test success (last iterate) ends at least ``drop`` below its peak while the
    training loss ends below its value at that peak: the loss still improving as success falls."""
    count = 0
    for success, loss in zip(curve["last_success"], curve["loss"], strict=True):
        peak = int(np.argmax(success))
        end_loss, peak_loss = loss[-1], loss[peak]
        if success[-1] <= success[peak] - drop and not math.isnan(peak_loss) and end_loss < peak_loss:
            count += 1
    return count / len(curve["loss"])


def analyse(cfg: StudyCfg, study: dict, results: dict) -> dict:
    """Everything the report shows, from ``study.json`` and the stored runs."""
    cells, matrices = {}, {}
    for cell, methods in study["runs"].items():
        gradient_seconds = {
            seed: results[name]["curve"]["seconds"][-1] for seed, name in methods["gradient"]["1x"].items()
        }
        matrices[cell] = {method: {} for method in methods}
        rows = {
            method: {
                budget: method_row(cfg, results, per_seed, budget, gradient_seconds, matrices[cell][method])
                for budget, per_seed in budgets.items()
            }
            for method, budgets in methods.items()
        }
        diagnostics = study["diagnostics"][cell]
        constant = diagnostics["best_constant"]
        longest = {m: budgets.get("10x", budgets["1x"]) for m, budgets in methods.items()}
        cells[cell] = {
            "rows": rows,
            "equal_time_seconds": statistics.median(gradient_seconds.values()),
            "verdicts": {
                gradient: {budget: verdict(rows, budget, constant, gradient) for budget in BUDGETS}
                for gradient in GRADIENT_STUDY_METHODS
                if gradient in rows
            },
            "constant": constant,
            "per_goal": diagnostics["per_goal"],
            "curves": {m: curves(cfg, results, per_seed) for m, per_seed in longest.items()},
        }
    return {
        "cells": cells,
        "axes": axes(cfg, cells),
        "h2": h2(cfg, cells, matrices),
        "h3": h3(study, cells),
    }


def _best_zero_order(cell: dict, budget: str = "10x") -> tuple[str, dict]:
    rows = cell["rows"]
    method = max(
        (m for m in ZERO_ORDER_STUDY_METHODS if m in rows and budget in rows[m]),
        key=lambda m: rows[m][budget]["selected"]["iqm"],
    )
    return method, rows[method][budget]["selected"]


def axes(cfg: StudyCfg, cells: dict) -> dict:
    """Per axis: each kept level's 10x verdict and the first level where the claim holds (or holds as a gap)."""
    out = {}
    for axis, levels in cfg.axes().items():
        kept = [level for level in levels if level in cells]
        outcomes = {level: cells[level]["verdicts"]["gradient"]["10x"]["outcome"] for level in kept}
        breaks = next((level for level in kept if outcomes[level] != "does not hold"), None)
        out[axis] = {"levels": kept, "outcomes": outcomes, "breaks_down_at": breaks}
    return out


def gap_interval(gradient: np.ndarray, zero_order: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """The gap (IQM of ``gradient``'s per-seed success minus IQM of ``zero_order``'s) and its 95 % interval from
    a bootstrap of each ``(seeds, goals)`` matrix's seeds, and of the goals within each resampled seed."""
    rng = np.random.RandomState(seed)

    def resample(matrix: np.ndarray) -> np.ndarray:
        seeds = matrix[rng.randint(len(matrix), size=len(matrix))]
        goals = rng.randint(seeds.shape[1], size=seeds.shape)
        return np.take_along_axis(seeds, goals, 1)

    draws = [iqm_of_seeds(resample(gradient)) - iqm_of_seeds(resample(zero_order)) for _ in range(RESAMPLES)]
    low, high = np.quantile(draws, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    return iqm_of_seeds(gradient) - iqm_of_seeds(zero_order), float(low), float(high)


def h2(cfg: StudyCfg, cells: dict, matrices: dict) -> dict:
    """Per axis: the gap (gradient minus the best zero-order method at 10x) at its easiest and hardest kept level,
    each with its bootstrap interval; supported if it grows by at least ``GAP`` and the two gaps' intervals do not
    overlap."""
    out = {}
    for axis, levels in cfg.axes().items():
        kept = [level for level in levels if level in cells]
        if len(kept) < 2:
            out[axis] = {"supported": None, "why": "fewer than two kept levels"}
            continue
        gaps = {}
        for level in (kept[0], kept[-1]):
            method, _ = _best_zero_order(cells[level])
            gap, low, high = gap_interval(matrices[level]["gradient"]["1x"], matrices[level][method]["10x"])
            gaps[level] = {"gap": gap, "low": low, "high": high, "best_zero_order": method}
        easy, hard = kept[0], kept[-1]
        apart = gaps[hard]["low"] > gaps[easy]["high"]
        out[axis] = {
            "easiest": easy,
            "hardest": hard,
            "gap_easiest": gaps[easy]["gap"],
            "gap_hardest": gaps[hard]["gap"],
            "gaps": gaps,
            "supported": gaps[hard]["gap"] - gaps[easy]["gap"] >= GAP and apart,
        }
    return out


def h3(study: dict, cells: dict) -> dict:
    """The decline, in the base cell: (a) the last iterate minus the selected checkpoint at 10x, at the chosen
    settings (seeds) and at stage A's largest scale setting (tuning); (b) the chosen runs' training loss and test
    success at the end against at the selected checkpoint; (c) stage B's tuning scores by goals per candidate."""
    base = cells["base"]["rows"]
    out = {}
    for method in ZERO_ORDER_STUDY_METHODS:
        row = base[method]["10x"]
        entry = {
            "chosen_last_minus_selected": row["last"]["mean"] - row["selected"]["mean"],
            "loss_falls_as_success_falls": surrogate_decline(cells["base"]["curves"][method]),
        }
        for search in study["tuning"]:
            if search["cell"] == "base" and search["method"] == method and search["stage"] == "A":
                setting = search["grid"][0][0]
                largest = max(search["grid"][0][1])
                at_largest = [s for s in search["scores"] if s["settings"][setting] == largest]
                entry["largest_step"] = {setting: largest}
                entry["largest_step_last_minus_selected"] = statistics.mean(
                    s["10x_last"] - s["10x"] for s in at_largest
                )
            if search["cell"] == "base" and search["method"] == method and search["stage"] == "B":
                goals_setting = search["grid"][-1][0]
                by_goals = {}
                for s in search["scores"]:
                    by_goals.setdefault(s["settings"][goals_setting], []).append(s["10x_last"] - s["10x"])
                entry["last_minus_selected_by_goals"] = {
                    str(k): statistics.mean(v) for k, v in sorted(by_goals.items())
                }
        out[method] = entry
    return out
