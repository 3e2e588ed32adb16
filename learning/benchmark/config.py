"""Settings of one benchmark run, shared by the suites."""

from __future__ import annotations

from dataclasses import dataclass, field

from learning.benchmark.timing import TimingPolicy

DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class BenchConfig:
    """What to run and how long to measure it."""

    fk_batches: tuple[int, ...] = (1, 64, 1024, 8192)
    ik_batches: tuple[int, ...] = (1, 64, 1024, 8192)
    fk_dtypes: tuple[str, ...] = DTYPES
    ik_dtypes: tuple[str, ...] = ("float32",)
    device: str = "cpu"
    iterations: int = 16
    seed: int = 0
    memory: str = "auto"
    pin_ik_max_batch: int = 1024
    pin_single_calls: int = 2000
    fk_timing: TimingPolicy = field(default_factory=lambda: TimingPolicy(budget_s=1.0))
    ik_timing: TimingPolicy = field(default_factory=lambda: TimingPolicy(budget_s=5.0))
    quick: bool = False
