"""The race: a zero-order trainer live beside the G1 scene's gradient trainer, on the same goals, and the two charts
that compare them.

The user picks one of the study's zero-order methods (``learning.counterweight.study``: ES, separable and linear
CMA-ES, PGPE), at the settings the study tuned for it (its 10x choice on the base cell, read from the study's
committed store; the configuration's defaults where the store has none, and the panel says which), and the goals
both trainers train and validate on: the experiment's region (the scene's default) or one of the study's levels of
goal-dependence (the full circle, then 8, 4, 2 or 1 narrow sectors: with fewer sectors one body pose serves more of
the goals, where a zero-order search has its best chance). New goals are drawn on a thread (seconds) and restart
both trainers from new weights; a new method restarts the zero-order trainer. One chart shows both trainers'
validation success against the layer evaluations their training steps spent, one against their training seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import torch
import viser
import viser.uplot as uplot
from torch import nn

from app.counterweight.trainer import (
    GOALS_JOIN_S,
    LIVE_TRAIN_GOALS,
    LIVE_VALIDATION_GOALS,
    LiveCounterweightTrainer,
    live_goals,
    live_zero_order_trainer,
    split_generator,
)
from app.shell.status import StatusLine
from app.shell.supervision import Supervisor
from app.shell.trainer_worker import FAILED, TrainerStatus, TrainerWorker
from app.shell.training_panel import CURVE_PERIOD_S, TrainingPanel, binned
from learning.counterweight.config import ExperimentCfg
from learning.counterweight.experiment import build_problem
from learning.counterweight.problem import CounterweightProblem
from learning.counterweight.study.design import StudyCfg
from learning.counterweight.study.regions import sample_goals
from learning.counterweight.study.tuned import tuned_settings

RACE_DEFAULT = "es"  # the zero-order method until the user picks another
RACE_METHODS = {"es": "ES", "sep_cma": "sep-CMA-ES", "linear_cma": "linear CMA-ES", "pgpe": "PGPE"}
TUNED_BUDGET = "10x"  # the study's settings for its largest budget: the race runs on and on
EXPERIMENT_REGION = "the experiment's region"
LEVELS: dict[str, str | None] = {  # the goals' name on the page -> the study's cell (None: the scene's own goals)
    EXPERIMENT_REGION: None,
    "full circle (the study's base)": "base",
    "8 sectors": "sectors-8",
    "4 sectors": "sectors-4",
    "2 sectors": "sectors-2",
    "1 sector": "sectors-1",
}
RACE_GOALS = {"train": LIVE_TRAIN_GOALS, "validation": LIVE_VALIDATION_GOALS}  # as the scene's live goals
GRADIENT_RGB, ZERO_ORDER_RGB = "#1eaa5a", "#c0306a"


def race_settings(method: str, cfg: ExperimentCfg) -> tuple[dict, str]:
    """``method``'s settings for the race and where they come from (a sentence for the page)."""
    settings = tuned_settings(method, TUNED_BUDGET)
    if settings is None:
        return {}, "the configuration's defaults (no study store with its tuning here)"
    shown = ", ".join(f"{k} {v:g}" for k, v in settings.items())
    return settings, f"the study's tuning at {TUNED_BUDGET} on its base cell ({shown})"


def level_goals(problem: CounterweightProblem, cfg: ExperimentCfg, cell: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Train and validation goals ``(n, 3)`` of the study's ``cell`` (a level of goal-dependence), drawn as the study
    draws a cell's goals (only goals that need a counterweight), from the scene's split seed."""
    study = StudyCfg(goals=cfg.goals)
    out = []
    for name, n in RACE_GOALS.items():
        out.append(sample_goals(problem, study, study.cell(cell), n, split_generator(cfg, name))["goals"])
    return out[0], out[1]


def race_curves(
    gradient: TrainerStatus | None, zero_order: TrainerStatus | None, axis: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The chart's columns: x (each trainer's validation points on ``axis``, ``"evaluations"`` or ``"seconds"``,
    merged and sorted) and each trainer's validation success (%) at its own points, NaN at the other's."""
    columns = []
    for status in (gradient, zero_order):
        if status is None or not status.val_success:
            columns.append((np.zeros(0), np.zeros(0)))
            continue
        x = np.asarray(status.val_evaluations if axis == "evaluations" else status.val_seconds, float)
        columns.append(binned(x, 100.0 * np.asarray(status.val_success[-len(x) :], float)))
    x = np.concatenate([c[0] for c in columns])
    order = np.argsort(x, kind="stable")
    ys = []
    for k, (cx, cy) in enumerate(columns):
        y = np.full(len(x), np.nan)
        start = sum(len(c[0]) for c in columns[:k])
        y[start : start + len(cx)] = cy
        ys.append(y[order])
    if len(x) == 0:
        return np.zeros(1), np.full(1, np.nan), np.full(1, np.nan)
    return x[order], ys[0], ys[1]


class RacePanel:
    """The race's controls (the zero-order method, the goals) and its two charts.

    Args:
        on_method: called with the method key the user picked.
        on_goals: called with the goals' name (a key of ``LEVELS``) the user picked.
    """

    def __init__(self, server: viser.ViserServer, method: str, on_method, on_goals) -> None:
        labels = {label: key for key, label in RACE_METHODS.items()}
        with server.gui.add_folder("Race: gradient vs zero-order (live)"):
            self.method = server.gui.add_dropdown(
                "zero-order method",
                tuple(labels),
                initial_value=RACE_METHODS[method],
                hint="The zero-order trainer's method (the study's); changing it restarts that trainer.",
            )
            self.goals = server.gui.add_dropdown(
                "goals",
                tuple(LEVELS),
                initial_value=EXPERIMENT_REGION,
                hint="What both trainers train and validate on: the experiment's region, or one of the study's "
                "levels of goal-dependence (fewer sectors: one body pose serves more goals). Changing it draws new "
                "goals and restarts both trainers.",
            )
            self.about = server.gui.add_markdown("")
            self.by_evaluations = self._chart(server, "layer evaluations", "validation success % vs layer evaluations")
            self.by_seconds = self._chart(server, "training seconds", "validation success % vs training seconds")
        self.method.on_update(lambda _: on_method(labels[self.method.value]))
        self.goals.on_update(lambda _: on_goals(self.goals.value))
        self._statuses: dict[str, TrainerStatus | None] = {"gradient": None, "zero_order": None}
        self._sent_at = -np.inf
        self._sent: tuple | None = None

    @staticmethod
    def _chart(server: viser.ViserServer, x_label: str, title: str) -> viser.GuiUplotHandle:
        return server.gui.add_uplot(
            data=(np.zeros(1), np.full(1, np.nan), np.full(1, np.nan)),
            series=(
                uplot.Series(label=x_label),
                uplot.Series(label="gradient", stroke=GRADIENT_RGB, width=1.5, spanGaps=True),
                uplot.Series(label="zero-order", stroke=ZERO_ORDER_RGB, width=1.5, spanGaps=True),
            ),
            scales={"x": uplot.Scale(time=False), "y": uplot.Scale(range=(0.0, 100.0))},
            title=title,
            aspect=2.2,
        )

    def say(self, text: str) -> None:
        self.about.content = text

    def show(self, trainer: str, status: TrainerStatus) -> None:
        """A trainer's new status (``trainer``: ``"gradient"`` or ``"zero_order"``): the charts follow, at most every
        ``CURVE_PERIOD_S`` (and at once after a restart) and only when a curve changed."""
        self._statuses[trainer] = status
        said = tuple((len(s.val_success), s.seed) if s else None for s in self._statuses.values())
        restarted = self._sent is not None and [s and s[1] for s in said] != [s and s[1] for s in self._sent]
        now = time.monotonic()
        if said == self._sent or (not restarted and now - self._sent_at < CURVE_PERIOD_S):
            return
        self._sent, self._sent_at = said, now
        gradient, zero_order = self._statuses["gradient"], self._statuses["zero_order"]
        self.by_evaluations.data = race_curves(gradient, zero_order, "evaluations")
        self.by_seconds.data = race_curves(gradient, zero_order, "seconds")


class Race:
    """The race's parts: the zero-order trainer (``trainer``, its panel ``training``), the pickers and charts
    (``panel``), and the goals both trainers train on (``goals``: train, validation; ``goals_name``: a key of
    ``LEVELS``), which it owns: the scene's gradient trainer reads them, and is reset with the zero-order one when
    new goals are drawn.

    Args:
        experiment_goals: the experiment's region's goals (a run's splits), or None until ``set_experiment_goals``.
        gradient: the scene's gradient trainer's worker.
        gradient_batch: its goals per step (the about line, and how often the zero-order trainer validates).
        offer: ``(version, policy)``: a zero-order snapshot for the page to answer with.
        running, wait_turn, exclusive: as ``TrainerWorker``'s (``exclusive`` shared with the gradient trainer).
    """

    PART = "race goals"

    def __init__(
        self,
        server: viser.ViserServer,
        supervisor: Supervisor,
        status: StatusLine,
        cfg: ExperimentCfg,
        experiment_goals: tuple[torch.Tensor, torch.Tensor] | None,
        gradient: TrainerWorker,
        gradient_batch: int,
        offer: Callable[[int, nn.Module], None],
        running: bool,
        wait_turn: Callable[[], object],
        exclusive: threading.Lock,
    ) -> None:
        self.cfg, self._supervisor, self._status, self._gradient = cfg, supervisor, status, gradient
        self._gradient_batch = gradient_batch
        self.method, self.goals, self.goals_name = RACE_DEFAULT, experiment_goals, EXPERIMENT_REGION
        self._experiment_goals = experiment_goals
        self._goals_lock = threading.Lock()  # one drawing of goals at a time
        self._goals_thread: threading.Thread | None = None
        self.trainer = TrainerWorker(self._build, offer, self._show_status, supervisor, snapshot_every=1,
                                     running=running, wait_turn=wait_turn, exclusive=exclusive)  # fmt: skip
        self.training = TrainingPanel(server, self.trainer, "Zero-order policy (live race)", log_loss=True)
        self.panel = RacePanel(server, self.method, self._pick_method, self._pick_goals)

    def set_experiment_goals(self, goals: tuple[torch.Tensor, torch.Tensor]) -> None:
        """The experiment's region's goals, drawn at start-up: the trainers' until another level is picked."""
        with self._goals_lock:
            self._experiment_goals = goals
            if self.goals_name == EXPERIMENT_REGION:
                self.goals = goals

    def show_gradient(self, status: TrainerStatus) -> None:
        self.panel.show("gradient", status)

    def close(self) -> None:
        """After the gradient trainer's close (a drawing of goals that has not begun sees it and returns)."""
        self.trainer.close()
        if self._goals_thread is not None and self._goals_thread.is_alive():
            self._goals_thread.join(GOALS_JOIN_S)

    def _build(self, seed: int) -> LiveCounterweightTrainer:
        """The picked method's trainer on the current goals, validated about as often (in layer evaluations) as the
        gradient trainer."""
        method, goals = self.method, self.goals
        settings, source = race_settings(method, self.cfg)
        trainer = live_zero_order_trainer(build_problem(self.cfg), self.cfg, method, settings, goals, seed)
        every = self.cfg.train.validate_every * self._gradient_batch
        self.trainer.validate_every = max(1, round(every / trainer.evaluations_per_step))
        self.panel.say(
            f"**{RACE_METHODS[method]}** ({trainer.evaluations_per_step} layer evaluations a generation) at "
            f"{source}; the gradient policy: Adam through the layer, {self._gradient_batch} goals a step. Both on "
            f"{len(goals[0])} goals of **{self.goals_name}**, validated on {len(goals[1])} others."
        )
        return trainer

    def _show_status(self, status: TrainerStatus) -> None:
        self.training.show(status)
        self.panel.show("zero_order", status)
        self._status.set("race", f"⚠ zero-order trainer failed: {status.error}" if status.state == FAILED else None)

    def _pick_method(self, method: str) -> None:
        with self._supervisor.guard(self.PART, f"picking the race's method {method}"):
            self.method = method
            self.trainer.reset()

    def _pick_goals(self, name: str) -> None:
        """Draw the goals ``name`` names on a thread (seconds), then restart both trainers on them."""
        thread = threading.Thread(target=self._draw_goals, args=(name,), name="race goals", daemon=True)
        self._goals_thread = thread
        thread.start()

    def _draw_goals(self, name: str) -> None:
        with self._supervisor.guard(self.PART, f"drawing the race's goals ({name})"), self._goals_lock:
            if self.panel.goals.value != name or self._gradient.closing:
                return  # picked again meanwhile (the later pick draws its own), or closing
            self.panel.say(f"**drawing** the goals of {name} (those that need a counterweight) …")
            cell = LEVELS[name]
            if cell is None:
                goals = self._experiment_goals or live_goals(build_problem(self.cfg), self.cfg)
            else:
                goals = level_goals(build_problem(self.cfg), self.cfg, cell)
            self.goals, self.goals_name = goals, name
            self._gradient.reset()
            self.trainer.reset()
