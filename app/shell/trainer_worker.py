"""The background trainer: steps a scene's live-trained policy on its own thread and publishes frozen snapshots.

Start, pause and reset come from the page; every exception the trainer raises is caught and reported as the
``failed`` state with its message (Start retries, Reset rebuilds), so a failing trainer never takes the viewer down.
A failure in what the worker calls back (publishing a snapshot, showing the status) is the viewer's, not the
trainer's: the ``Supervisor`` counts and shows it under ``"trainer callbacks"`` and the trainer keeps stepping.

The worker thread alone touches the ``Trainer``; after every step it copies the new history points into its own
lists under its lock, so ``status`` (any thread) reads steps and losses that belong together. Those lists span the
whole run: past ``keep`` points a series' points are averaged in pairs (``halved``) and new steps are kept as means
of as many, so a long run's curve keeps its start, at an even coarser step, instead of losing it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from torch import nn

from app.shell.supervision import Supervisor
from learning.common.history import TrainingHistory


class Trainer(Protocol):
    """What the worker drives: one optimiser step, a validation pass, the steps taken, the curves, and a frozen copy
    of the policy being trained (the grasp-yaw ``Trainer`` and the G1 scene's live counterweight trainer)."""

    step_count: int
    history: TrainingHistory

    def step(self) -> object: ...

    def validate(self) -> object: ...

    def snapshot(self) -> nn.Module: ...


RUNNING, PAUSED, FAILED = "running", "paused", "failed"


def halved(values: list[float]) -> list[float]:
    """``values`` with each pair of consecutive points averaged into one (an odd last point kept as it is)."""
    pairs = [(a + b) / 2 for a, b in zip(values[0::2], values[1::2], strict=False)]
    return pairs + values[len(pairs) * 2 :]


@dataclass(frozen=True)
class TrainerStatus:
    """A consistent copy of the trainer's state for the page: its whole history, each series at most about ``keep``
    points (each loss point but the newest few the mean of ``points_per_loss`` consecutive steps, a power of 2)."""

    state: str
    step: int
    version: int  # of the latest published snapshot
    seed: int  # of the current trainer's weights and batches
    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    val_steps: list[int] = field(default_factory=list)
    val_success: list[float] = field(default_factory=list)
    val_evaluations: list[int] = field(default_factory=list)  # training evaluations spent at each validation
    val_seconds: list[float] = field(default_factory=list)  # training seconds spent at each validation
    error: str | None = None
    steps_per_second: float = 0.0
    points_per_loss: int = 1  # training steps each loss point averages (1: none), but the newest ones
    resetting: bool = False  # a Reset is pending: the next trainer (``seed``) is being built
    seed_snapshots: int = 0  # snapshots of this trainer (``version`` counts every trainer's: versions never repeat)


class TrainerWorker:
    """Owns one ``Trainer`` and the thread that steps it.

    Args:
        build: makes a fresh trainer from a seed (at start and on reset); may raise, which is reported.
        on_snapshot: called with ``(version, frozen policy)`` every ``snapshot_every`` steps and after a reset.
        on_status: called with a ``TrainerStatus`` after state changes and at most every ``status_period_s``.
        supervisor: shows failures of ``on_snapshot`` and ``on_status``.
        seed: of the first trainer; each Reset takes the next one, so it starts from new random weights.
        snapshot_every, validate_every: in trainer steps.
        running: start stepping at once.
        wait_turn: called before every step; blocks while interactive work has priority, and returns once the worker
            is ``closing``.
        exclusive: held while building and stepping; trainers that share one take turns (one core between them).
    """

    CALLBACKS = "trainer callbacks"

    def __init__(
        self,
        build: Callable[[int], Trainer],
        on_snapshot: Callable[[int, nn.Module], None],
        on_status: Callable[[TrainerStatus], None],
        supervisor: Supervisor,
        *,
        seed: int = 0,
        snapshot_every: int = 10,
        validate_every: int = 50,
        running: bool = True,
        wait_turn: Callable[[], object] | None = None,
        exclusive: threading.Lock | None = None,
        status_period_s: float = 0.25,
        keep: int = 2000,
    ) -> None:
        self._build, self._on_snapshot, self._on_status = build, on_snapshot, on_status
        self._supervisor = supervisor
        self._wait_turn = wait_turn
        self._exclusive = exclusive if exclusive is not None else threading.Lock()
        self._next_seed = seed
        self._seed = seed
        self.snapshot_every, self.validate_every = snapshot_every, validate_every
        self._status_period_s, self._keep = status_period_s, keep
        self._cond = threading.Condition()
        self._state = RUNNING if running else PAUSED
        self._error: str | None = None
        self._reset_pending = True  # the first trainer is built on the worker thread
        self._closed = False
        self._version = 0
        self._seed_snapshots = 0  # published from the current trainer (a Reset starts again at 0)
        self._trainer: Trainer | None = None
        self._step_count = 0
        self._history = TrainingHistory()  # the worker's copy of the curves, at most ``keep`` points per series
        self._copied = 0  # points of the trainer's history copied so far
        self._merged = 1  # steps each loss point averages (a power of 2)
        self._tail = TrainingHistory()  # the newest steps, fewer than ``_merged``, until they make a point
        self._last_status = 0.0
        self._rate = 0.0
        self._thread = threading.Thread(target=self._run, name="trainer", daemon=True)

    def start_thread(self) -> None:
        self._thread.start()

    # Controls (any thread).
    def start(self) -> None:
        """Run (also retries after a failure)."""
        self._set(RUNNING)

    def pause(self) -> None:
        self._set(PAUSED)

    def reset(self) -> None:
        """Throw the trainer away and build a fresh one (the next seed: new random weights, step 0); keeps the
        run/pause state."""
        with self._cond:
            self._reset_pending = True
            self._cond.notify_all()
        self._publish_status(force=True)  # at once: the page drops the old curves and says it is resetting

    @property
    def closing(self) -> bool:
        """Whether ``close`` was called: a ``wait_turn`` that blocks returns when it turns true (no step starts
        after it)."""
        return self._closed

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread: a step in progress ends, none starts after it (``wait_turn`` sees ``closing``)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _set(self, state: str) -> None:
        with self._cond:
            if state == RUNNING and self._state == FAILED:
                self._error = None
            self._state = state
            self._cond.notify_all()
        self._publish_status(force=True)

    @property
    def status(self) -> TrainerStatus:
        """The trainer's state; while a Reset is pending (the next trainer being built), no step and no curve."""
        with self._cond:
            if self._reset_pending and self._trainer is not None:
                return TrainerStatus(self._state, 0, self._version, self._next_seed, error=self._error, resetting=True)
            h = self._history
            return TrainerStatus(
                state=self._state,
                step=self._step_count,
                version=self._version,
                seed=self._seed,
                seed_snapshots=self._seed_snapshots,
                steps=[*h.steps, *self._tail.steps],
                loss=[*h.loss, *self._tail.loss],
                val_steps=list(h.val_steps),
                val_success=list(h.val_success),
                val_evaluations=list(h.val_ik_evaluations),
                val_seconds=list(h.val_seconds),
                error=self._error,
                steps_per_second=self._rate,
                points_per_loss=self._merged,
            )

    # The thread.
    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or self._reset_pending or self._state == RUNNING)
                if self._closed:
                    return
                rebuild, self._reset_pending = self._reset_pending, False
            try:
                if rebuild:
                    with self._exclusive:
                        self._rebuild()
                else:
                    self._step()
            except Exception as exc:  # noqa: BLE001 - shown in the page; Start retries, Reset rebuilds
                with self._cond:
                    self._state = FAILED
                    self._error = f"{type(exc).__name__}: {exc}"
                self._publish_status(force=True)

    def _rebuild(self) -> None:
        with self._cond:
            seed = self._next_seed
            self._next_seed += 1
        trainer = self._build(seed)
        with self._cond:
            self._trainer, self._seed, self._step_count = trainer, seed, 0
            self._history, self._copied, self._merged, self._tail = TrainingHistory(), 0, 1, TrainingHistory()
            self._seed_snapshots = 0
            if self._state == FAILED:
                self._state, self._error = PAUSED, None
        trainer.validate()
        self._copy_history(trainer)
        self._snapshot(trainer)
        self._publish_status(force=True)

    def _step(self) -> None:
        trainer = self._trainer
        if trainer is None:
            raise RuntimeError("no trainer (its construction failed); press Reset")
        if self._wait_turn is not None:
            self._wait_turn()
        if self._closed:  # closed while waiting for its turn: the step would run after close() returned
            return
        with self._exclusive:
            start = time.perf_counter()
            trainer.step()
            elapsed = time.perf_counter() - start
            if trainer.step_count % self.validate_every == 0:
                trainer.validate()
        self._rate = 0.9 * self._rate + 0.1 / max(elapsed, 1e-6) if self._rate else 1.0 / max(elapsed, 1e-6)
        self._copy_history(trainer)
        if trainer.step_count % self.snapshot_every == 0:
            self._snapshot(trainer)
        self._publish_status()

    def _copy_history(self, trainer: Trainer) -> None:
        """Append the trainer's new history points to the worker's copy (only the worker thread calls this)."""
        source, keep = trainer.history, self._keep
        with self._cond:
            copy, start, tail = self._history, self._copied, self._tail
            tail.steps.extend(source.steps[start:])
            tail.loss.extend(source.loss[start:])
            self._copied = len(source.steps)
            while len(tail.steps) >= self._merged:  # a group of ``_merged`` steps makes one point
                group = self._merged
                copy.steps.append(sum(tail.steps[:group]) / group if group > 1 else tail.steps[0])
                copy.loss.append(sum(tail.loss[:group]) / group if group > 1 else tail.loss[0])
                del tail.steps[:group], tail.loss[:group]
                if len(copy.steps) > keep and len(copy.steps) % 2 == 0:  # pairs of equal points: halve
                    copy.steps[:], copy.loss[:] = halved(copy.steps), halved(copy.loss)
                    self._merged *= 2
            for name in ("val_steps", "val_success", "val_ik_evaluations", "val_seconds"):
                values = list(getattr(source, name))
                while len(values) > keep:
                    values = halved(values)
                setattr(copy, name, values)
            self._step_count = trainer.step_count

    def _snapshot(self, trainer: Trainer) -> None:
        policy = trainer.snapshot()
        with self._cond:
            self._version += 1
            self._seed_snapshots += 1
            version = self._version
        with self._supervisor.guard(self.CALLBACKS, f"publishing snapshot v{version}"):
            self._on_snapshot(version, policy)

    def _publish_status(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_status < self._status_period_s:
            return
        self._last_status = now
        with self._supervisor.guard(self.CALLBACKS, "showing the trainer's status"):
            self._on_status(self.status)
