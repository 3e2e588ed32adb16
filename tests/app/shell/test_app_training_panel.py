"""The training panel's curves: sent at a rate and a size a page drawn in software can take in."""

from __future__ import annotations

import numpy as np
import pytest
import viser
from viewer_support import free_port

from app.shell import training_panel
from app.shell.trainer_worker import PAUSED, RUNNING, TrainerStatus
from app.shell.training_panel import CURVE_POINTS, TrainingPanel, binned, running_mean, status_line


class _Buttons:
    def start(self) -> None: ...
    def pause(self) -> None: ...
    def reset(self) -> None: ...


def _status(n: int, state: str = RUNNING, seed: int = 0) -> TrainerStatus:
    steps = list(range(1, n + 1))
    return TrainerStatus(
        state=state,
        step=n,
        version=n // 10,
        seed=seed,
        steps=steps,
        loss=[1.0 / s for s in steps],
        val_steps=steps[49::50],
        val_success=[0.5] * len(steps[49::50]),
    )


@pytest.fixture
def panel():
    server = viser.ViserServer(port=free_port(), verbose=False)
    try:
        yield TrainingPanel(server, _Buttons())
    finally:
        server.stop()


def test_binned_keeps_short_curves_and_averages_long_ones() -> None:
    x, y = np.arange(10.0), np.arange(10.0) ** 2
    assert binned(x, y, 10)[0] is x
    bx, by = binned(np.arange(1000.0), np.arange(1000.0), 7)
    assert len(bx) == len(by) == 7
    edges = np.linspace(0, 1000, 8).round().astype(int)
    assert by == pytest.approx([np.arange(lo, hi).mean() for lo, hi in zip(edges[:-1], edges[1:], strict=True)])
    assert np.all(np.diff(bx) > 0)


def test_curves_are_thinned_and_throttled_but_state_changes_go_at_once(panel, monkeypatch) -> None:
    now = [100.0]
    monkeypatch.setattr(training_panel.time, "monotonic", lambda: now[0])
    panel.show(_status(3000))
    steps, loss, mean = panel.loss_plot.data
    assert len(steps) == CURVE_POINTS and steps[-1] == pytest.approx(np.arange(3001 - 8, 3001).mean())
    assert len(panel.val_plot.data[0]) == 60  # few enough to go as they are
    assert panel.step.value == "3000"

    now[0] += 0.5  # within the curve period: the step moves, the curves wait
    panel.show(_status(3100))
    assert panel.step.value == "3100"
    assert panel.loss_plot.data[0][-1] == steps[-1]

    panel.show(_status(3100, state=PAUSED))  # a state change is shown at once
    assert panel.loss_plot.data[0][-1] > steps[-1]

    now[0] += training_panel.CURVE_PERIOD_S
    panel.show(_status(3200, state=PAUSED, seed=1))
    assert panel.loss_plot.data[0][-1] > 3100 - 8


def test_the_loss_chart_draws_a_running_mean_and_a_log_loss_as_its_log10() -> None:
    assert running_mean(np.array([1.0, 3.0, np.nan, 5.0]), 2) == pytest.approx([1.0, 2.0, 3.0, 5.0])
    server = viser.ViserServer(port=free_port(), verbose=False)
    try:
        panel = TrainingPanel(server, _Buttons(), log_loss=True)
        panel.show(_status(100))
        steps, log_loss, mean = panel.loss_plot.data
        assert log_loss == pytest.approx(np.log10(1.0 / np.arange(1, 101)))  # -2 at step 100: no "0" decades
        assert mean[-1] == pytest.approx(log_loss[-50:].mean())  # the last 50 steps
        assert panel.loss_plot.title == "log10 training loss (the whole run)"
    finally:
        server.stop()


def test_a_reset_drops_the_curves_and_says_so_at_once(panel) -> None:
    panel.show(_status(300))
    resetting = TrainerStatus(state=RUNNING, step=0, version=30, seed=1, resetting=True)
    panel.show(resetting)
    assert "resetting" in panel.state.content and "validation success" not in panel.state.content
    assert "resetting" in status_line(resetting) and "seed 1" in status_line(resetting)
    assert len(panel.loss_plot.data[0]) == 1 and np.isnan(panel.loss_plot.data[1]).all()
    assert np.isnan(panel.val_plot.data[1]).all()


def test_the_snapshot_count_starts_again_with_each_seed() -> None:
    """Versions never repeat (answers are told apart by them), so the line says which of this seed's it is."""
    first = TrainerStatus(state=RUNNING, step=40, version=4, seed=0, seed_snapshots=4)
    assert "snapshot v4 (the 4th of this seed)" in status_line(first)
    after_reset = TrainerStatus(state=RUNNING, step=10, version=5, seed=1, seed_snapshots=1)
    assert "snapshot v5 (the 1st of this seed)" in status_line(after_reset) and "seed 1" in status_line(after_reset)
    assert "no snapshot of this seed yet" in status_line(TrainerStatus(state=RUNNING, step=0, version=5, seed=2))
