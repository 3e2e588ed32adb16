"""The Franka scene's metrics panel: a run's report (split table per split, its figures) and evaluate-now on the live snapshot."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import torch
import viser

from app.shell.report_files import read_figure, read_report
from app.shell.supervision import Supervisor
from kinematics.errors import ProjectError
from learning.grasp_yaw.baselines import radial_yaw
from learning.grasp_yaw.config import ExperimentCfg
from learning.grasp_yaw.predictors import YawPolicy
from learning.grasp_yaw.report import split_table, upgrade_report
from learning.grasp_yaw.scoring import score_yaws
from learning.grasp_yaw.splits import TEST_SPLITS, GoalSet
from learning.grasp_yaw.task import failure_penalty

IDLE = (
    "Evaluate now scores the learned predictor's newest snapshot and the radial rule on the validation and test splits."
)
FIGURES = ("split_metrics.png", "training_curves.png", "yaw_choices.png")
EVAL_SPLITS = ("validation", *TEST_SPLITS)


def load_report(run: Path) -> dict:
    """The run's report in today's method names."""
    return upgrade_report(read_report(run))


def evaluation_table(rows: dict[str, dict[str, dict[str, float]]]) -> str:
    """``rows[split][method]`` = metric means -> markdown."""
    lines = [
        "| split | method | success % | Δq rad² | pos mm | cost |",
        "|:--|:--|--:|--:|--:|--:|",
    ]
    for split, methods in rows.items():
        for method, m in methods.items():
            lines.append(
                f"| {split} | {method} | {100 * m['success']:.1f} | {m['displacement']:.3f} | "
                f"{1e3 * m['position_error']:.1f} | {m['cost']:.2f} |"
            )
    return "\n".join(lines)


class MetricsPanel:
    """The report of the run a checkpoint came from (if any) and an evaluate-now button.

    Args:
        server: the viser server.
        run: the run folder, or None without a checkpoint.
        cfg: the experiment settings (evaluation IK iterations, weights).
        splits: goal sets evaluate-now scores (validation and test splits).
        solver_ik: the checking IK layer.
        policy: returns the learned predictor's latest snapshot and what it is (``"live trainer: seed 1, step 800"``,
            a run's model), or None.
        supervisor: catches, counts and shows a failed evaluation or figure (key ``"metrics"``).
    """

    PART = "metrics"

    def __init__(
        self,
        server: viser.ViserServer,
        run: Path | None,
        cfg: ExperimentCfg,
        splits: dict[str, GoalSet],
        solver_ik,
        policy: Callable[[], tuple[YawPolicy, str] | None],
        supervisor: Supervisor,
    ) -> None:
        self._cfg, self._splits, self._ik, self._policy = cfg, splits, solver_ik, policy
        self._supervisor = supervisor
        self._busy = threading.Lock()
        self._shown = threading.Lock()  # the live table and its generation
        self._generation = 0  # bumped by ``forget``: an evaluation of an earlier generation writes nothing more
        with server.gui.add_folder("Metrics", expand_by_default=False):
            self.evaluate = server.gui.add_button("Evaluate now", icon=viser.Icon.PLAYER_PLAY)
            self.progress = server.gui.add_progress_bar(0.0, visible=False)
            self.live = server.gui.add_markdown(IDLE)
            self.report = server.gui.add_markdown("")
            self.figures = []
            self._show_run(server, run)
        self.evaluate.on_click(lambda _: self.start_evaluation())

    def _show_run(self, server: viser.ViserServer, run: Path | None) -> None:
        if run is None:
            self.report.content = (
                "No run loaded: start with `--checkpoint RUN/checkpoints/seed0/best.pt` to see its report."
            )
            return
        try:
            report = load_report(run)
            tables = [split_table(report, split) for split in report["results"]]
        except (ProjectError, KeyError) as exc:
            self.report.content = f"⚠ report of `{run}` unavailable: {exc}"
            return
        self.report.content = f"**Report of `{run}`** (preset `{report.get('preset')}`)\n\n" + "\n\n".join(tables)
        for name in FIGURES:
            path = run / "figures" / name
            if path.is_file():
                try:
                    self.figures.append(server.gui.add_image(read_figure(path), label=name, format="png"))
                except (OSError, ValueError) as exc:
                    self._supervisor.failed(self.PART, f"reading figure {path}", exc)

    def start_evaluation(self) -> bool:
        """Evaluate on a thread of its own (the page stays responsive); False if one is already running."""
        if not self._busy.acquire(blocking=False):
            return False
        self.evaluate.disabled = True
        threading.Thread(target=self._evaluate, name="evaluate-now", daemon=True).start()
        return True

    def forget(self, why: str) -> None:
        """The scored snapshot is gone (the trainer was reset): clear the live table, saying ``why``; an evaluation
        still running writes nothing more."""
        with self._shown:
            self._generation += 1
            self.live.content = f"{why}\n\n{IDLE}"

    def _show_live(self, generation: int, content: str) -> None:
        with self._shown:
            if generation == self._generation:
                self.live.content = content

    def _evaluate(self) -> None:
        try:
            with self._shown:
                generation = self._generation
            offer = self._policy()
            policy, name = offer if offer is not None else (None, "no snapshot yet")
            kin = self._ik.kinematics
            penalty = failure_penalty(kin)
            jobs = [
                (split, method) for split in EVAL_SPLITS if split in self._splits for method in ("radial", "learned")
            ]
            jobs = [(s, m) for s, m in jobs if m == "radial" or policy is not None]
            self.progress.value, self.progress.visible = 0.0, True
            rows: dict[str, dict[str, dict[str, float]]] = {}
            for done, (split, method) in enumerate(jobs, 1):
                goals = self._splits[split].to(kin.device, kin.dtype)
                with torch.no_grad():
                    yaw = radial_yaw(goals.p) if method == "radial" else policy(goals.p, goals.q0)
                metrics = score_yaws(self._ik, goals, yaw, self._cfg.weights, penalty).means()
                rows.setdefault(split, {})[method] = metrics
                self.progress.value = 100.0 * done / len(jobs)
                self._show_live(generation, f"Scoring {name}…\n\n" + evaluation_table(rows))
            self._show_live(
                generation,
                f"**Learned predictor ({name}) vs the radial rule** (64-step IK check)\n\n" + evaluation_table(rows),
            )
        except Exception as exc:  # noqa: BLE001 - reported in the page
            self._supervisor.failed(self.PART, "evaluate-now", exc)
        finally:
            self.progress.visible = False
            self.evaluate.disabled = False
            self._busy.release()
