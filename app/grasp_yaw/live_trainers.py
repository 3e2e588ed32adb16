"""The Franka scene's live trainers and their panels: the IK-trained predictor's (from a run's checkpoint, or from
scratch) and, where the run brings no teacher-supervised predictor, one trained live on the teacher's labels (the
training goals labelled first, a progress bar in its panel). Both take turns on one core (``exclusive``, which the
fast answers share) and start no step while the page's answers are pending (``wait_turn``)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

import torch
import viser

from app.shell.supervision import Supervisor
from app.shell.trainer_worker import FAILED, TrainerStatus, TrainerWorker
from app.shell.training_panel import TrainingPanel
from learning.grasp_yaw.config import ExperimentCfg
from learning.grasp_yaw.experiment import label_teacher
from learning.grasp_yaw.predictors import YawPolicy
from learning.grasp_yaw.training import Trainer

LIVE_TRAINING_STEPS = 100_000  # the viewer trains on and on; the LR schedule spans this many steps
LABEL_CHUNK = 16  # goals the teacher labels between two looks at the page (the page's answers go first)
SUPERVISED = "teacher_supervised"  # the supervised predictor's method key


class LiveTrainers:
    """The trainers' workers (``trainer``; ``supervised``, None where the run brings that predictor) and panels
    (``training``, ``supervised_panel``).

    Args:
        initial_policy: the checkpoint's predictor, which the first IK-trained trainer continues (Reset starts from
            scratch); None trains from scratch.
        running: start stepping at once.
        on_snapshot, on_status: the IK-trained trainer's (the scene's: they name its snapshots as the learned one).
        offer: ``(method key, version, policy)``: a supervised snapshot for the page to answer with.
        say: ``(status key, message or None)``: a line in the page's status (a trainer's failure).
    """

    def __init__(
        self,
        server: viser.ViserServer,
        supervisor: Supervisor,
        cfg: ExperimentCfg,
        kinematics,
        splits: dict,
        initial_policy: YawPolicy | None,
        supervised: bool,
        running: bool,
        wait_turn: Callable[[], object],
        exclusive: threading.Lock,
        on_snapshot: Callable[[int, YawPolicy], None],
        on_status: Callable[[TrainerStatus], None],
        offer: Callable[[str, int, YawPolicy], None],
        say: Callable[[str, str | None], None],
    ) -> None:
        self.cfg, self.kinematics, self.splits = cfg, kinematics, splits
        self._wait_turn, self._offer, self._say = wait_turn, offer, say
        self.live_cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=LIVE_TRAINING_STEPS))
        initial_state = [initial_policy.predictor.state_dict()] if initial_policy is not None else []

        def build(seed: int) -> Trainer:
            trainer = Trainer("ik_trained", self.live_cfg, kinematics, splits["train"], splits["validation"], seed=seed)
            if initial_state:  # the first trainer continues from the checkpoint; Reset starts from scratch
                trainer.policy.predictor.load_state_dict(initial_state.pop())
            return trainer

        common = dict(
            validate_every=cfg.train.validate_every, running=running, wait_turn=wait_turn, exclusive=exclusive
        )
        self.trainer = TrainerWorker(build, on_snapshot, on_status, supervisor, **common)
        self.training = TrainingPanel(server, self.trainer)
        self.supervised: TrainerWorker | None = None
        self.supervised_panel: TrainingPanel | None = None
        if supervised:
            self._labels: list[torch.Tensor] = []  # made once, kept across resets
            self.supervised = TrainerWorker(self._build_supervised, self._supervised_snapshot,
                                            self._supervised_status, supervisor, **common)  # fmt: skip
            self.supervised_panel = TrainingPanel(
                server,
                self.supervised,
                "Teacher-supervised (live)",
                progress=True,
                step_label="supervised trainer step",
            )

    def start(self) -> None:
        self.trainer.start_thread()
        if self.supervised is not None:
            self.supervised.start_thread()

    def close(self) -> None:
        self.trainer.close()
        if self.supervised is not None:
            self.supervised.close()

    def _build_supervised(self, seed: int) -> Trainer:
        splits = self.splits
        if not self._labels:
            self.supervised_panel.show_progress(0.0, "**labelling** the training goals with the teacher")
            labels = label_teacher(self.cfg, self.kinematics, splits["train"], self._label_progress, chunk=LABEL_CHUNK)
            self._labels.append(labels[0])
            self.supervised_panel.show_progress(None)
        return Trainer(SUPERVISED, self.live_cfg, self.kinematics, splits["train"], splits["validation"], seed=seed,
                       labels=self._labels[0])  # fmt: skip

    def _label_progress(self, fraction: float) -> None:
        self.supervised_panel.show_progress(fraction)
        self._wait_turn()  # the page's answers first

    def _supervised_snapshot(self, version: int, policy: YawPolicy) -> None:
        self._offer(SUPERVISED, version, policy)

    def _supervised_status(self, state: TrainerStatus) -> None:
        self.supervised_panel.show(state)
        failed = f"⚠ teacher-supervised trainer failed: {state.error}" if state.state == FAILED else None
        self._say("supervised trainer", failed)
