"""Statistics over training seeds, as a reviewer asks for them: mean and std, the interquartile mean (IQM) with a
95 % percentile bootstrap interval (``scipy.stats.bootstrap``), pointwise bands for learning curves, and the
claim's verdict."""

from __future__ import annotations

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
RESAMPLES = 10_000
CLAIM_GAP = 0.20  # every zero-order method at least this far (success fraction) below the gradient policy


def iqm(values) -> float:
    """The mean of the middle half (``scipy.stats.trim_mean`` cutting a quarter at each end)."""
    return float(stats.trim_mean(np.asarray(values, dtype=float), 0.25))


def iqm_interval(values, seed: int = 0) -> tuple[float, float]:
    """95 % percentile bootstrap interval of the IQM over the values (one per seed); a single value is its own
    interval."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2 or np.all(values == values[0]):
        return float(values[0]), float(values[0])
    result = stats.bootstrap(
        (values,),
        lambda x, axis: stats.trim_mean(x, 0.25, axis=axis),
        confidence_level=CONFIDENCE,
        n_resamples=RESAMPLES,
        method="percentile",
        random_state=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def seed_summary(values) -> dict:
    """``mean``, ``std`` (0 for one value), ``iqm``, ``iqm_low``, ``iqm_high``, ``per_seed``."""
    values = [float(v) for v in values]
    low, high = iqm_interval(values)
    return {
        "mean": float(np.mean(values)),
        "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
        "iqm": iqm(values),
        "iqm_low": low,
        "iqm_high": high,
        "per_seed": values,
    }


def curve_band(xs: list[list[float]], ys: list[list[float]], grid: np.ndarray, seed: int = 0) -> dict:
    """Per-seed curves (``xs[k]`` increasing) held piecewise constant onto ``grid`` (the last value reached at or
    before each point, the first value before the first); their mean and a pointwise 95 % bootstrap interval of the mean
    over seeds."""
    held = np.stack(
        [
            np.asarray(y, float)[np.clip(np.searchsorted(x, grid, side="right") - 1, 0, None)]
            for x, y in zip(xs, ys, strict=True)
        ]
    )
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(held), size=(1000, len(held)))
    means = held[picks].mean(1)
    alpha = (1 - CONFIDENCE) / 2
    return {
        "grid": grid.tolist(),
        "mean": held.mean(0).tolist(),
        "low": np.quantile(means, alpha, axis=0).tolist(),
        "high": np.quantile(means, 1 - alpha, axis=0).tolist(),
    }


def claim_verdict(results: dict, zero_order: list[str]) -> dict:
    """The claim on the IID split: every zero-order method (each budget) at least ``CLAIM_GAP`` below the gradient
    policy's success IQM with intervals that do not overlap."""
    gradient = results["gradient"]["success"]
    rows = {}
    for method in zero_order:
        s = results[method]["success"]
        rows[method] = {
            "gap": gradient["iqm"] - s["iqm"],
            "separated": s["iqm_high"] < gradient["iqm_low"],
        }
        rows[method]["holds"] = rows[method]["gap"] >= CLAIM_GAP and rows[method]["separated"]
    return {"holds": all(r["holds"] for r in rows.values()), "methods": rows, "gap_required": CLAIM_GAP}
