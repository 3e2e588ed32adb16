"""The training panel: the background trainer's state and step, start/pause/reset, live loss and validation curves.

The curves span the whole run (the worker averages its oldest points in pairs past its ``keep``), and the loss
chart draws a running mean (``RUNNING_MEAN_STEPS``) over the noisy per-step loss. A loss that spans decades is drawn
as its base-10 logarithm on a linear axis: uPlot's log axis labelled its small decades "0" and cut its top tick."""

from __future__ import annotations

import time

import numpy as np
import viser
import viser.uplot as uplot

from app.shell.trainer_worker import FAILED, RUNNING, TrainerStatus, TrainerWorker

# What the curves cost the page. Each curve update is a whole new uPlot dataset that the browser decodes and draws;
# sent at the status rate (4 Hz per trainer) with the full history (2,000 points), two trainers' curves flooded a page
# drawn in software: its answers lagged the server by a minute after a few minutes. A curve is now sent at most every
# CURVE_PERIOD_S (or at once when the trainer's state or seed changes), as at most CURVE_POINTS points, and only
# when it changed.
CURVE_PERIOD_S = 2.0
CURVE_POINTS = 400
RUNNING_MEAN_STEPS = 50  # the loss chart's running mean: over this many of the sent points' training steps


def binned(x: np.ndarray, y: np.ndarray, points: int = CURVE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` as at most ``points`` points, each the mean of a run of consecutive samples (runs of equal length,
    within one). Fewer samples than ``points`` come back unchanged."""
    if len(x) <= points:
        return x, y
    edges = np.linspace(0, len(x), points + 1).round().astype(int)
    counts = np.diff(edges)
    return np.add.reduceat(x, edges[:-1]) / counts, np.add.reduceat(y, edges[:-1]) / counts


def running_mean(y: np.ndarray, window: int) -> np.ndarray:
    """The mean of each point's last ``window`` points (fewer at the start), NaNs left out."""
    finite = np.isfinite(y)
    sums = np.concatenate(([0.0], np.cumsum(np.where(finite, y, 0.0))))
    counts = np.concatenate(([0], np.cumsum(finite)))
    ends = np.arange(1, len(y) + 1)
    starts = np.maximum(ends - window, 0)
    n = counts[ends] - counts[starts]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, (sums[ends] - sums[starts]) / np.maximum(n, 1), np.nan)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def status_line(status: TrainerStatus, loss_format: str = ".3f") -> str:
    """``loss_format``: how the last loss is written (``".2e"`` for a loss that spans decades below 1e-3)."""
    if status.resetting:
        return f"**{status.state}** · resetting: building a trainer from new random weights (seed {status.seed})"
    loss = f"{status.loss[-1]:{loss_format}}" if status.loss else "–"
    success = f"{100 * status.val_success[-1]:.0f} %" if status.val_success else "–"
    snapshot = (
        f"snapshot v{status.version} (the {_ordinal(status.seed_snapshots)} of this seed)"
        if status.seed_snapshots
        else "no snapshot of this seed yet"
    )
    text = f"**{status.state}** · seed {status.seed} · loss {loss} · validation success {success} · {snapshot}"
    if status.state == RUNNING and status.steps_per_second:  # a paused trainer has no rate
        text += f" · {status.steps_per_second:.1f} steps/s"
    if status.state == FAILED and status.error:
        text += f"\n\n⚠ trainer failed: `{status.error}`. Start retries, Reset rebuilds."
    return text


class TrainingPanel:
    """Shows ``TrainerStatus`` updates and drives the worker from the page's buttons.

    Args:
        title: the folder's title (one panel per trainer); ``step_label`` labels its step counter.
        progress: add a progress bar for the work before training (the teacher's labels), hidden until shown.
        log_loss: the loss spans decades (the G1's falls from about 1e-4 to 1e-7): written in scientific notation
            and plotted on a log axis.
    """

    def __init__(
        self,
        server: viser.ViserServer,
        worker: TrainerWorker,
        title: str = "Training",
        progress: bool = False,
        step_label: str = "trainer step",
        log_loss: bool = False,
    ) -> None:
        self._loss_format, self._log_loss = (".2e" if log_loss else ".3f"), log_loss
        loss_label = "log10 training loss" if log_loss else "training loss"
        with server.gui.add_folder(title):
            self.state = server.gui.add_markdown("**starting**")
            self.progress = server.gui.add_progress_bar(0.0, visible=False) if progress else None
            self.step = server.gui.add_text(step_label, initial_value="0", disabled=True)
            buttons = server.gui.add_button_group(
                "trainer",
                ("Start", "Pause", "Reset"),
                # one hint for the group (viser shows it over each button): it says what each of the three does
                hint="Start: train (or go on). Pause: stop, keeping the weights and the curves. Reset: start over "
                "from new random weights (the next seed) at step 0.",
            )
            self.loss_plot = server.gui.add_uplot(
                data=(np.zeros(1), np.full(1, np.nan), np.full(1, np.nan)),
                series=(
                    uplot.Series(label="step"),
                    uplot.Series(label=loss_label, stroke="#9dbfe9", width=1.0),
                    uplot.Series(label=f"running mean ({RUNNING_MEAN_STEPS} steps)", stroke="#1e4f99", width=2.0),
                ),
                scales={"x": uplot.Scale(time=False)},
                title=f"{loss_label} (the whole run)",
                aspect=2.2,
            )
            self.val_plot = server.gui.add_uplot(
                data=(np.zeros(1), np.full(1, np.nan)),
                series=(
                    uplot.Series(label="step"),
                    uplot.Series(label="validation success %", stroke="#1eaa5a", width=1.5),
                ),
                scales={"x": uplot.Scale(time=False), "y": uplot.Scale(range=(0.0, 100.0))},
                title="validation success % (the whole run)",
                aspect=2.2,
            )
        self._curves_at = -np.inf  # time.monotonic() of the last curve update
        self._curves_state: tuple[str, int] | None = None  # (state, seed) at the last curve update
        self._sent: dict[str, tuple] = {}  # per curve: what its last update showed (length, first and last point)
        actions = {"Start": worker.start, "Pause": worker.pause, "Reset": worker.reset}
        buttons.on_click(lambda event: actions[event.target.value]())

    def show_progress(self, fraction: float | None, text: str | None = None) -> None:
        """The work before training: ``fraction`` done (None: hide the bar), ``text`` in the state line."""
        if self.progress is not None:
            self.progress.visible = fraction is not None
            if fraction is not None:
                self.progress.value = 100.0 * fraction
        if text is not None:
            self.state.content = text

    def show(self, status: TrainerStatus) -> None:
        self.state.content = status_line(status, self._loss_format)
        self.step.value = str(status.step)
        now = time.monotonic()
        if (status.state, status.seed) == self._curves_state and now - self._curves_at < CURVE_PERIOD_S:
            return
        self._curves_at, self._curves_state = now, (status.state, status.seed)
        if status.resetting or not status.steps:  # a Reset drops the old curves at once
            self._send("loss", self.loss_plot, [0.0], [np.nan], lambda x, y: (x, y, y))
            self._send("validation", self.val_plot, [0.0], [np.nan], lambda x, y: (x, y))
            return
        self._send("loss", self.loss_plot, status.steps, status.loss, self._loss_columns)
        if status.val_steps:
            self._send("validation", self.val_plot, status.val_steps, status.val_success,
                       lambda x, y: binned(x, 100.0 * y))  # fmt: skip

    def _loss_columns(self, steps: np.ndarray, loss: np.ndarray) -> tuple[np.ndarray, ...]:
        """The steps, the loss (its log10 for a loss that spans decades) and its running mean, binned."""
        if self._log_loss:
            with np.errstate(divide="ignore", invalid="ignore"):
                loss = np.where(loss > 0, np.log10(np.where(loss > 0, loss, 1.0)), np.nan)
        x, y = binned(steps, loss)
        per_point = max(1.0, (steps[-1] - steps[0] + 1) / len(steps)) * len(steps) / len(x)  # steps a sent point spans
        return x, y, running_mean(y, max(1, round(RUNNING_MEAN_STEPS / per_point)))

    def _send(self, key: str, plot: viser.GuiUplotHandle, x: list, y: list, columns) -> None:
        said = (len(x), x[0], x[-1], y[-1])
        if self._sent.get(key) == said:
            return
        self._sent[key] = said
        plot.data = columns(np.asarray(x, float), np.asarray(y, float))
