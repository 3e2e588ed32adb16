"""Assembles the viewer: the scene, the ghosts, the panels, and the three workers (trainer, inference, reference).

Threads and their locks, outermost first: ``Viewer._submit_lock`` (new inputs or a new snapshot become one request)
-> a ``GenerationGate``'s lock (``publish`` draws under it) -> ``Viewer._results_lock`` (the answers table). Drawing
never takes an outer lock, so there is no cycle.
"""

from __future__ import annotations

import dataclasses
import statistics
import threading
import time
from pathlib import Path

import numpy as np
import torch
import viser

from app.config import ViewerConfig
from app.generations import GenerationGate
from app.ghosts import METHOD_STYLES, Ghost
from app.grasp_panel import PENDING, GraspPanel
from app.inference import GraspInputs, GraspResult, GraspSolver, InferenceWorker, MethodResult
from app.metrics_panel import MetricsPanel
from app.reference import ReferenceInputs, ReferenceWorker
from app.robot_view import ArmView, load_panda_collision_urdf, load_panda_urdf
from app.scene import TargetGizmo, draw_workspace, set_stage
from app.status import StatusLine
from app.trainer_worker import FAILED, TrainerStatus, TrainerWorker
from app.training_panel import TrainingPanel
from kinematics.errors import ProjectError
from learning.checkpoints import load_checkpoint
from learning.config import ExperimentCfg, preset
from learning.predictors import YawPolicy
from learning.robot import franka_kinematics
from learning.splits import make_splits, sample_points, sample_start_states
from learning.training import Trainer

LIVE_TRAINING_STEPS = 100_000  # the viewer trains on and on; the LR schedule spans this many steps
INITIAL_TARGET = (0.5, 0.15, 0.12)  # metres: inside the training region, off the heading's symmetry axis


class Viewer:
    """The running viewer. ``launch`` builds it; ``close`` stops its threads and the server.

    Attributes useful to tests: ``gate`` (stale-result bookkeeping), ``drawn`` (the answers on screen),
    ``latencies_ms`` (target change -> heading and learned ghosts drawn), ``stale_draws``.
    """

    def __init__(self, config: ViewerConfig) -> None:
        torch.set_num_threads(1)  # the trainer and the inference worker get one core each
        self.config = config
        self.server = viser.ViserServer(host=config.host, port=config.port)
        self.server.gui.configure_theme(control_width="large", show_share_button=False)
        set_stage(self.server)
        self.status = StatusLine(self.server)
        self.kinematics = franka_kinematics(config.device)
        cfg, initial_policy, run = self._load(config)
        self.cfg = cfg
        splits = make_splits(cfg, self.kinematics)
        self.splits = {name: s.to(self.kinematics.device, self.kinematics.dtype) for name, s in splits.items()}
        self._random = torch.Generator().manual_seed(0)

        self._submit_lock = threading.Lock()
        self._results_lock = threading.Lock()
        self._p = np.array(INITIAL_TARGET)
        self._q0 = np.array(sample_start_states(self._random, 1, self.kinematics, cfg.start, False)[0].tolist())
        self._policy: tuple[int, YawPolicy | None] = (0, initial_policy)
        self.drawn: dict[str, MethodResult | str | None] = {"learned": None if initial_policy else "no snapshot yet"}
        self.drawn_inputs: GraspInputs | None = None
        self.latencies_ms: list[float] = []
        self.stale_draws = 0
        self._changed_at: tuple[tuple[float, ...], float] | None = None

        urdf = load_panda_urdf()
        draw_workspace(self.server, cfg.workspace)
        self.robot = ArmView(self.server, urdf, "/robot")
        ghost_urdf = load_panda_collision_urdf()
        self.ghosts = {name: Ghost(self.server, ghost_urdf, name) for name in METHOD_STYLES}
        self.gizmo = TargetGizmo(self.server, self._p, self._gizmo_moved)
        self.grasp = GraspPanel(
            self.server,
            self._p,
            self._q0,
            self.robot.limits,
            self._inputs_changed,
            self._random_target,
            self._random_q0,
        )
        self.server.gui.add_markdown(_legend())

        self.solver = GraspSolver(cfg, self.kinematics)
        self.gate: GenerationGate[GraspInputs] = GenerationGate()
        self.reference_gate: GenerationGate[ReferenceInputs] = GenerationGate()
        self.inference = InferenceWorker(
            self.gate, self.solver, self._draw, self._inference_error, after=self._refresh_if_due
        )
        self._refresh_due = False
        self.reference = ReferenceWorker(
            self.reference_gate, GraspSolver(cfg, self.kinematics), self._draw_reference, self._inference_error
        )
        live_cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=LIVE_TRAINING_STEPS))
        initial_state = [initial_policy.predictor.state_dict()] if initial_policy is not None else []

        def build() -> Trainer:
            trainer = Trainer(
                "ik_trained", live_cfg, self.kinematics, self.splits["train"], self.splits["validation"], seed=0
            )
            if initial_state:  # the first trainer continues from the checkpoint; Reset starts from scratch
                trainer.policy.predictor.load_state_dict(initial_state.pop())
            return trainer

        self.trainer = TrainerWorker(
            build,
            self._snapshot,
            self._trainer_status,
            validate_every=cfg.train.validate_every,
            running=config.train and initial_policy is None,
            wait_turn=lambda: self.inference.signal.wait_idle(timeout=1.0),
        )
        self.training = TrainingPanel(self.server, self.trainer)
        self.metrics = MetricsPanel(
            self.server, run, cfg, self.splits, self.solver.ik, lambda: self._policy[1], self._metrics_error
        )
        self._clients = 0
        self.server.on_client_connect(lambda _: self._count_clients(+1))
        self.server.on_client_disconnect(lambda _: self._count_clients(-1))

        self.robot.show(self._q0)
        self.inference.start()
        self.reference.start()
        self.trainer.start_thread()
        self._submit(self._p, self._q0, reference=True)

    @property
    def url(self) -> str:
        return f"http://{self.server.get_host()}:{self.server.get_port()}"

    # Loading.
    def _load(self, config: ViewerConfig) -> tuple[ExperimentCfg, YawPolicy | None, Path | None]:
        cfg = dataclasses.replace(preset(config.preset), device=config.device)
        if config.checkpoint is None:
            self.status.set(
                "checkpoint", f"No checkpoint: training the predictor from scratch (preset `{cfg.preset}`)."
            )
            return cfg, None, None
        try:
            policy, meta = load_checkpoint(config.checkpoint, self.kinematics)
            cfg = dataclasses.replace(ExperimentCfg.from_dict(meta["config"]), device=config.device)
        except ProjectError as exc:
            self.status.set(
                "checkpoint",
                f"⚠ checkpoint `{config.checkpoint}` could not be loaded: {exc} — training from scratch.",
            )
            return cfg, None, None
        run = Path(config.checkpoint).resolve().parents[2]
        self.status.set(
            "checkpoint",
            f"Loaded `{config.checkpoint}` ({meta['method']}, seed {meta['seed']}); trainer paused: Start fine-tunes it.",
        )
        return cfg, policy, run

    # Inputs -> requests.
    def set_target(self, p: np.ndarray) -> None:
        """Move the grasp target (as the page's inputs do)."""
        self.grasp.set_inputs(target=np.asarray(p, dtype=float))

    def set_q0(self, q0: np.ndarray) -> None:
        self.grasp.set_inputs(q0=np.asarray(q0, dtype=float))

    def _gizmo_moved(self, p: np.ndarray) -> None:
        self.grasp.set_inputs(target=p)

    def _inputs_changed(self, p: np.ndarray, q0: np.ndarray) -> None:
        if not np.array_equal(q0, self._q0):
            self.robot.show(q0)
        if not np.allclose(p, self.gizmo.handle.position, atol=1e-4):
            self.gizmo.place(p)
        self._submit(p, q0, reference=True)

    def _snapshot(self, version: int, policy: YawPolicy) -> None:
        # A new snapshot refreshes the learned ghost, but never cancels an answer being computed for the current
        # target: the refresh waits for the worker to finish (``_refresh_if_due``). The check and the flag are
        # under the submit lock, which the worker takes only after it counts as idle, so no refresh is lost.
        with self._submit_lock:
            self._policy = (version, policy)
            if self.inference.signal.is_busy:
                self._refresh_due = True
                return
        self._submit(self._p, self._q0, reference=False)

    def _refresh_if_due(self) -> None:
        with self._submit_lock:
            due, self._refresh_due = self._refresh_due, False
        if due:
            self._submit(self._p, self._q0, reference=False)

    def _submit(self, p: np.ndarray, q0: np.ndarray, reference: bool) -> None:
        with self._submit_lock:
            p_key, q0_key = tuple(float(v) for v in p), tuple(float(v) for v in q0)
            if p_key != tuple(self._p):
                with self._results_lock:
                    self._changed_at = (p_key, time.perf_counter())
            self._p, self._q0 = np.array(p_key), np.array(q0_key)
            version, policy = self._policy
            self.gate.submit(GraspInputs(p_key, q0_key, version, policy))
            if reference:
                self.reference_gate.submit((p_key, q0_key), on_submit=self._reference_pending)

    def _random_target(self) -> np.ndarray:
        heldout = bool(torch.rand(1, generator=self._random) < 0.25)
        return sample_points(self._random, 1, self.cfg.workspace, heldout=heldout)[0].numpy()

    def _random_q0(self) -> np.ndarray:
        return sample_start_states(self._random, 1, self.kinematics, self.cfg.start, False)[0].numpy()

    # Drawing (under a gate's lock, only for current inputs).
    def _draw(self, result: GraspResult) -> None:
        latest = self.gate.latest
        with self.server.atomic(), self._results_lock:
            if latest is None or latest.inputs != result.inputs:
                self.stale_draws += 1  # cannot happen through publish; counted to prove it
            for name, answer in result.methods.items():
                self.ghosts[name].show(answer.qpos, answer.T_root_tcp)
                self.drawn[name] = answer
            if "learned" not in result.methods:
                self.ghosts["learned"].set_visible(False)
            self.drawn_inputs = result.inputs
            if self._changed_at is not None and self._changed_at[0] == result.inputs.p:
                self.latencies_ms.append(1e3 * (time.perf_counter() - self._changed_at[1]))
                self._changed_at = None  # counted once per change
            self.grasp.show(self.drawn)
        self.status.set("inference", None)

    def _reference_pending(self) -> None:
        with self._results_lock:
            self.ghosts["reference"].set_visible(False)
            self.drawn["reference"] = PENDING
            self.grasp.show(self.drawn)

    def _draw_reference(self, inputs: ReferenceInputs, answer: MethodResult) -> None:
        with self.server.atomic(), self._results_lock:
            self.ghosts["reference"].show(answer.qpos, answer.T_root_tcp)
            self.drawn["reference"] = answer
            self.grasp.show(self.drawn)

    def _inference_error(self, message: str) -> None:
        self.status.set("inference", f"⚠ {message}")

    def _metrics_error(self, message: str) -> None:
        self.status.set("metrics", f"⚠ {message}")

    def _trainer_status(self, status: TrainerStatus) -> None:
        self.training.show(status)
        self.status.set("trainer", f"⚠ trainer failed: {status.error}" if status.state == FAILED else None)

    def _count_clients(self, delta: int) -> None:
        with self._results_lock:
            self._clients += delta
            clients = self._clients
        self.status.set("clients", f"{clients} browsers connected" if clients > 1 else None)

    # Measurements and shutdown.
    def median_latency_ms(self) -> float:
        with self._results_lock:
            return statistics.median(self.latencies_ms) if self.latencies_ms else float("nan")

    def close(self) -> None:
        self.gate.close()
        self.reference_gate.close()
        self.trainer.close()
        self.inference.join(5.0)
        self.reference.join(5.0)
        self.server.stop()


def _legend() -> str:
    rows = " · ".join(f"<span style='color:rgb{rgb}'>■</span> {label}" for label, rgb in METHOD_STYLES.values())
    return f"Ghosts: {rows}. Drag the yellow target or type it; the yaw is each method's answer."


def launch(config: ViewerConfig) -> Viewer:
    """Serve the page and start the workers; returns at once (viser serves from its threads)."""
    return Viewer(config)
