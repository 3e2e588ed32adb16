"""A 1 kHz control loop on one robot: the whole-body layer's step at batch 1, called once per tick from where the
last tick left the robot, towards a hand target that moves along a circle (a controller tracking a moving goal).

Each tick is timed on its own, so the row reports the distribution a controller's deadline meets (p50, p99, the
worst), not a mean. A tick is what a controller calls: ``WholeBodyStepper.set_target`` with the hand's new target,
then ``WholeBodyStepper.step`` (the support polygon prepared once, where the feet are held; the targets checked and
bound once); everything else happens every tick.

After each tick's step, a fixed piece of Python work (a counting loop, ``fixed_count``: calibrated to the warm-up
ticks' median step) is timed too: the machine's own spread at that tick length (a virtual machine's pauses,
interrupts, frequency changes), taken at the same moments as the step's, against which the step's p99 / p50 is read.
It is a lower bound of that spread: it touches almost no memory and allocates nothing.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from kinematics.wholebody import WholeBodyStepper

TICK_S = 1e-3  # the loop's nominal period: 1 kHz
CIRCLE_RADIUS_M = 0.05
CIRCLE_PERIOD_S = 2.0  # of the hand target's circle, in ticks of TICK_S


def hand_circle(T_world_start: torch.Tensor, tick: int) -> torch.Tensor:
    """The hand target ``(1, 4, 4)`` at ``tick``: ``T_world_start`` moved along a circle in its world y-z plane."""
    phase = 2 * math.pi * tick * TICK_S / CIRCLE_PERIOD_S
    T = T_world_start.clone()
    T[..., 1, 3] += CIRCLE_RADIUS_M * math.sin(phase)
    T[..., 2, 3] += CIRCLE_RADIUS_M * (math.cos(phase) - 1.0)
    return T


def _count_to(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def fixed_count(median_s: float, probes: int = 21) -> int:
    """The count whose ``_count_to`` takes ``median_s`` (median of ``probes`` runs), from a first guess corrected
    once at its own length."""
    count = 20_000
    for _ in range(2):
        taken = float(np.median([_timed(_count_to, count) for _ in range(probes)]))
        count = max(1, round(count * median_s / taken))
    return count


def _timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def run(problem, hand: str, steps: int = 10_000, warmup: int = 200) -> dict:
    """Time ``steps`` ticks of a ``WholeBodyStepper`` of ``problem.layer`` at batch 1 (after ``warmup`` untimed ones): the seconds of
    each tick's step, summarised as p50, p99, max and mean; and of the fixed work after it (``fixed_work``: its p50
    and p99)."""
    if warmup < 2:
        raise ValueError(f"warmup must be >= 2 (the fixed work is calibrated on its later half), got {warmup}")
    layer, tree = problem.layer, problem.layer.tree
    q = problem.q_stand[None].clone()
    T_world_start = tree.frame_pose(q, layer.tasks[hand].frame)
    targets = {name: t[None] for name, t in problem.fixed_targets.items()}
    stepper = WholeBodyStepper(layer, {**targets, hand: T_world_start})  # the polygon prepared once
    seconds, fixed, warm = np.empty(steps), np.empty(steps), []
    count = 1
    with torch.no_grad():
        for tick in range(-warmup, steps):
            targets[hand] = hand_circle(T_world_start, tick)
            start = time.perf_counter()
            stepper.set_target(hand, targets[hand])
            q, _ = stepper.step(q)
            if tick < 0:
                warm.append(time.perf_counter() - start)
                if tick == -1:  # the warm-up's later half: past the first calls' caches and allocations
                    count = fixed_count(float(np.median(warm[len(warm) // 2 :])))
                continue
            seconds[tick] = time.perf_counter() - start
            fixed[tick] = _timed(_count_to, count)
    final_error = float((targets[hand][..., :3, 3] - tree.frame_pose(q, layer.tasks[hand].frame)[..., :3, 3]).norm())
    return {
        "steps": steps,
        "p50_s": float(np.percentile(seconds, 50)),
        "p99_s": float(np.percentile(seconds, 99)),
        "max_s": float(seconds.max()),
        "mean_s": float(seconds.mean()),
        "final_hand_error_m": final_error,
        "fixed_work": {"p50_s": float(np.percentile(fixed, 50)), "p99_s": float(np.percentile(fixed, 99))},
    }
