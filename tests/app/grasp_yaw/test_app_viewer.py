"""The viewer in-process, no browser: rapid target moves draw no stale answer, latency, faults stay visible."""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from viewer_support import wait_until

from app.grasp_yaw.scene import Viewer
from learning.grasp_yaw.training import Trainer

MOVES = 50


def _settled(viewer: Viewer) -> bool:
    """The radial rule's and the learned answers on screen are for the current target and q0."""
    current, drawn = viewer.board.current, viewer.drawn_question
    return (
        drawn is not None
        and drawn.place == current.place
        and not isinstance(viewer.drawn.get("learned"), str | type(None))
    )


def _answers(viewer: Viewer) -> bool:
    with urllib.request.urlopen(viewer.url, timeout=5) as response:
        return response.status == 200


@pytest.mark.slow
def test_rapid_moves_draw_no_stale_answer_and_end_on_the_final_target(start_viewer) -> None:
    viewer = start_viewer()
    wait_until(lambda: viewer.trainer.status.step >= 2 and _settled(viewer), 60, "the trainer and the first answers")
    first_step = viewer.trainer.status.step
    rng = np.random.default_rng(0)
    ws = viewer.cfg.workspace
    targets = np.stack([rng.uniform(*ws.x, MOVES), rng.uniform(*ws.y, MOVES), rng.uniform(*ws.z, MOVES)], -1)
    for p in targets[:-10]:
        viewer.set_target(p)  # as fast as the page can send them
    for p in targets[-10:]:  # then at a hand's pace, so that latency is measured on answers that land
        viewer.set_target(p)
        wait_until(lambda: _settled(viewer), 30, "the answer for a target")
    wait_until(lambda: _settled(viewer), 30, "the final answers")

    assert viewer.stale_draws == 0
    assert viewer.board.fast.discarded > 0, "the burst should have overtaken some answers"
    final = tuple(float(v) for v in targets[-1])
    assert viewer.drawn_question.p == pytest.approx(final, abs=1e-9)
    radial = viewer.drawn["radial"].yaw
    expected = math.atan2(final[1], final[0])
    assert abs(math.remainder(radial - expected, 2 * math.pi)) < 1e-6
    learned = viewer.drawn["learned"]
    assert np.isfinite(learned.yaw) and learned.T_root_tcp.shape == (4, 4)
    table = viewer.grasp.table.content
    assert "radial rule" in table and f"{math.degrees(radial):.1f}" in table, table

    wait_until(lambda: viewer.trainer.status.step > first_step, 30, "the trainer to advance")
    latency = viewer.median_latency_ms()
    print(
        f"\ntarget change -> radial+learned ghosts drawn: median {latency:.0f} ms over "
        f"{len(viewer.latencies_ms)} changes (trainer running); drawn {viewer.board.fast.drawn}, "
        f"discarded {viewer.board.fast.discarded}, stale drawn {viewer.stale_draws}"
    )
    assert latency < 1000.0
    assert _answers(viewer)


@pytest.mark.slow
def test_latency_at_a_hands_pace_while_training(start_viewer) -> None:
    viewer = start_viewer()
    wait_until(lambda: viewer.trainer.status.step >= 2 and _settled(viewer), 60, "the trainer and the first answers")
    viewer.latencies_ms.clear()
    for i in range(20):
        viewer.set_target(np.array([0.40 + 0.01 * i, -0.2 + 0.02 * i, 0.1]))
        wait_until(lambda: _settled(viewer), 30, "the answer")
        time.sleep(0.3)  # a hand moving the target; the trainer steps in between
    latencies = list(viewer.latencies_ms)
    print(
        f"\nhand-paced target changes: median {statistics.median(latencies):.0f} ms, "
        f"max {max(latencies):.0f} ms over {len(latencies)} (trainer step {viewer.trainer.status.step})"
    )
    assert viewer.stale_draws == 0
    assert statistics.median(latencies) < 1000.0


@pytest.mark.slow
def test_bad_checkpoint_path_is_shown_and_training_starts_from_scratch(start_viewer, tmp_path: Path) -> None:
    viewer = start_viewer(checkpoint=tmp_path / "missing.pt")
    message = viewer.status.messages["checkpoint"]
    assert "could not be loaded" in message and "missing.pt" in message and "from scratch" in message
    assert "could not be loaded" in viewer.status.handle.content
    wait_until(lambda: viewer.trainer.status.step >= 1, 60, "the trainer to start from scratch")


@pytest.mark.slow
def test_garbage_checkpoint_file_is_shown(start_viewer, tmp_path: Path) -> None:
    bad = tmp_path / "best.pt"
    bad.write_bytes(b"not a checkpoint")
    viewer = start_viewer(checkpoint=bad)
    assert "could not be loaded" in viewer.status.messages["checkpoint"]
    wait_until(lambda: _settled(viewer), 60, "answers despite the bad checkpoint")


@pytest.mark.slow
def test_trainer_exception_is_shown_and_the_viewer_keeps_answering(start_viewer, monkeypatch) -> None:
    def broken_step(self) -> float:
        raise RuntimeError("simulated trainer crash")

    monkeypatch.setattr(Trainer, "step", broken_step)
    viewer = start_viewer()
    wait_until(lambda: "trainer" in viewer.status.messages, 60, "the trainer error in the status line")
    assert "simulated trainer crash" in viewer.status.messages["trainer"]
    assert "simulated trainer crash" in viewer.training.state.content
    assert viewer.trainer.status.state == "failed"
    viewer.set_target(np.array([0.45, -0.25, 0.15]))
    wait_until(
        lambda: _settled(viewer) and viewer.drawn_question.p == (0.45, -0.25, 0.15), 30, "answers after the crash"
    )
    assert _answers(viewer)
    viewer.trainer.start()  # retry: fails again, visibly, without taking anything down
    wait_until(lambda: viewer.trainer.status.state == "failed", 30, "the retry to fail")
    assert _answers(viewer)


def test_evaluate_now_names_what_it_scored_and_a_reset_clears_it(start_viewer) -> None:
    viewer = start_viewer()
    wait_until(lambda: viewer.board.newest_offer is not None, 60, "a snapshot")
    assert viewer.metrics.start_evaluation()
    wait_until(lambda: "vs the radial rule" in viewer.metrics.live.content, 120, "the evaluation")
    seed = viewer.trainer.status.seed
    assert f"Learned predictor (live trainer: seed {seed}, step " in viewer.metrics.live.content
    viewer.trainer.reset()
    wait_until(lambda: "trainer was reset" in viewer.metrics.live.content, 30, "the reset to clear the numbers")
    assert f"seed {seed} -> {seed + 1}" in viewer.metrics.live.content
    assert "| learned" not in viewer.metrics.live.content, "the reset snapshot's numbers stayed"


def test_a_paused_trainer_shows_no_rate() -> None:
    from app.shell.trainer_worker import PAUSED, RUNNING, TrainerStatus
    from app.shell.training_panel import status_line

    running = TrainerStatus(state=RUNNING, step=10, version=1, seed=0, steps_per_second=12.5)
    assert "12.5 steps/s" in status_line(running)
    assert "steps/s" not in status_line(dataclasses.replace(running, state=PAUSED))
