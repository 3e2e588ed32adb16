"""Wall-clock medians of callables, measured round-robin so that a noisy shared machine slows every method
alike."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class TimingPolicy:
    """How long to measure: ``min_repeats`` repeats, or fewer (at least ``floor_repeats``) once a callable has
    spent ``budget_s``; a repeat runs the callable enough times to last ``repeat_s`` (timeit's autorange)."""

    min_repeats: int = 20
    budget_s: float = 1.0
    floor_repeats: int = 3
    repeat_s: float = 0.002
    warmup: int = 1


@dataclass(frozen=True)
class Timing:
    """Seconds per call: median, quartiles and minimum over ``repeats`` repeats of ``number`` calls each."""

    median_s: float
    q1_s: float
    q3_s: float
    min_s: float
    repeats: int
    number: int

    def as_dict(self) -> dict:
        return asdict(self)


def _noop() -> None:
    pass


def measure(
    fns: dict[str, Callable[[], object]], policy: TimingPolicy, sync: Callable[[], None] = _noop
) -> dict[str, Timing]:
    """Time every callable of ``fns``; ``sync`` (e.g. ``torch.cuda.synchronize``) runs before clock reads."""
    numbers, samples, spent = {}, {name: [] for name in fns}, dict.fromkeys(fns, 0.0)
    for name, fn in fns.items():
        for _ in range(policy.warmup):
            fn()
        sync()
        start = time.perf_counter()
        fn()
        sync()
        once = time.perf_counter() - start
        numbers[name] = max(1, math.ceil(policy.repeat_s / max(once, 1e-9)))
        if numbers[name] == 1:  # The calibration call is a valid repeat.
            samples[name].append(once)
            spent[name] += once

    def done(name: str) -> bool:
        count = len(samples[name])
        return count >= policy.min_repeats or (spent[name] >= policy.budget_s and count >= policy.floor_repeats)

    while active := [name for name in fns if not done(name)]:
        for name in active:
            fn, number = fns[name], numbers[name]
            sync()
            start = time.perf_counter()
            for _ in range(number):
                fn()
            sync()
            elapsed = time.perf_counter() - start
            samples[name].append(elapsed / number)
            spent[name] += elapsed
    out = {}
    for name, values in samples.items():
        arr = np.asarray(values)
        q1, median, q3 = np.percentile(arr, [25, 50, 75])
        out[name] = Timing(float(median), float(q1), float(q3), float(arr.min()), len(values), numbers[name])
    return out
