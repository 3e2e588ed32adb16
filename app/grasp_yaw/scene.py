"""Assembles the Franka grasp-yaw scene (``python -m app``) from its parts: what it loads (``run_files``), the arm,
the ghosts, the panels, the question board and the workers (the live trainers, ``live_trainers``; inference for the
fast methods; search for the grid, online optimisation and the teacher; the yaw landscape). It wires them together
and draws their answers; each part lives in the module that owns it.

The current question (target, ``q0``, predictor snapshot) has one owner, ``QuestionBoard``; every control only
asks it to change and is written back from it. Locks, outermost first: ``QuestionBoard.lock`` (a question change,
its pending marks and the gates' generations; ``GenerationGate.publish`` draws under it) -> ``Viewer._results_lock``
(the answers on screen). Nothing under them waits for another thread, so there is no cycle. Every background
part runs under the ``Supervisor``: a failure is counted and shown in the page, and the part keeps running.

The viewer leaves torch's thread count alone; ``python -m app`` sets it for its process (``--threads``).
"""

from __future__ import annotations

import statistics
import threading
import time

import numpy as np
import torch

import assets
from app.config import ViewerConfig
from app.grasp_yaw.case_browser import CaseBrowser
from app.grasp_yaw.ghosts import Ghost
from app.grasp_yaw.inference import GraspResult, GraspSolver, InferenceWorker, MethodResult
from app.grasp_yaw.landscape import Landscape, LandscapeGrid, LandscapePanel
from app.grasp_yaw.live_trainers import LiveTrainers
from app.grasp_yaw.methods import GROUP_TITLES, KEYS, METHODS, SEARCH_KEYS, TRAINED_KEYS
from app.grasp_yaw.metrics_panel import MetricsPanel
from app.grasp_yaw.model_picker import ModelPicker, model_name
from app.grasp_yaw.panel import GraspPanel
from app.grasp_yaw.reach import clamp_joints, clamp_target
from app.grasp_yaw.run_files import case_splits, load_run
from app.grasp_yaw.search import SearchWorker
from app.grasp_yaw.workspace import CAMERA, draw_workspace
from app.shell.answers_table import PENDING
from app.shell.ghost_labels import screen_right, stack_labels
from app.shell.method_picker import MethodPicker
from app.shell.question import Place, Question, QuestionBoard, Source
from app.shell.robot_view import ArmView, load_urdf
from app.shell.server import serve_page
from app.shell.stage import TargetGizmo
from app.shell.trainer_worker import FAILED, TrainerStatus
from learning.common.panda import franka_kinematics
from learning.grasp_yaw.checkpoints import load_checkpoint
from learning.grasp_yaw.experiment import checkpoint_path
from learning.grasp_yaw.predictors import YawPolicy
from learning.grasp_yaw.splits import make_splits, sample_points, sample_start_states

INITIAL_TARGET = (0.5, 0.15, 0.12)  # metres: inside the training region, off the radial rule's symmetry axis
NEEDS_A_RUN = "needs a run"
PAGE = "page"  # supervisor part of the page's callbacks (inputs, buttons)
BOUNDS = "bounds"  # the note under a group of boxes saying what a clamp into the arm's reach or limits moved


class Viewer:
    """The running viewer. ``launch`` builds it; ``close`` stops its threads and the server.

    Attributes useful to tests: ``board`` (the question and its gates), ``drawn`` (the answers on screen),
    ``pending`` (methods whose drawn answer is for earlier inputs), ``drawn_question``,
    ``latencies_ms`` (target change -> the fast ghosts drawn), ``search_latencies_ms`` (per search: the last
    change of target or ``q0`` -> its ghost drawn), ``stale_draws`` (answers drawn while
    their question was not current: 0 by construction, counted to prove it), ``supervisor`` (failure counts).
    """

    def __init__(self, config: ViewerConfig) -> None:
        self.config = config
        page = serve_page(config.host, config.port, CAMERA, config.light)
        self.server, self.status, self.supervisor, self.clients = (
            page.server,
            page.status,
            page.supervisor,
            page.clients,
        )
        self.url = page.url
        self.kinematics = franka_kinematics(config.device)
        loaded = load_run(config, self.kinematics)
        for key, message in loaded.messages.items():
            self.status.set(key, message)
        self.cfg, self._run, self.trained, initial_policy = loaded.cfg, loaded.run, loaded.trained, loaded.policy
        splits = make_splits(self.cfg, self.kinematics)
        self.splits = {name: s.to(self.kinematics.device, self.kinematics.dtype) for name, s in splits.items()}
        self._random = torch.Generator().manual_seed(0)
        q0 = tuple(float(v) for v in sample_start_states(self._random, 1, self.kinematics, self.cfg.start, False)[0])

        # What is on screen (under ``_results_lock``) and what the tests read of it.
        self._results_lock = threading.Lock()
        self.drawn: dict[str, MethodResult | str | None] = {
            key: NEEDS_A_RUN for key in TRAINED_KEYS if key != "learned" and key not in self.trained
        }
        self.drawn["learned"] = None if initial_policy else "no snapshot yet"
        self.pending: set[str] = set()
        self.drawn_question: Question | None = None
        self.latencies_ms: list[float] = []
        self.stale_draws = 0
        self._changed_at: tuple[tuple[float, ...], float] | None = None
        self._place_changed_at = time.perf_counter()
        self.search_latencies_ms: dict[str, list[float]] = {key: [] for key in SEARCH_KEYS}
        self._loaded_model = loaded.model  # the run's checkpoint answering as learned, if any
        self._offer_name: tuple[int, str] | None = None  # the learned predictor's newest offer: (version, what it is)
        self._trainer_seed: int | None = None  # the live trainer's seed last shown (a change is a Reset)
        self._picked_model: tuple[str, int] | None = None  # a model picked from the run: trainer snapshots wait
        self._model_version = 0  # models picked from the run count down from -1: never a trainer's version

        # The scene and the page's controls.
        robot = assets.PANDA
        draw_workspace(self.server, self.cfg.workspace)
        self.robot = ArmView(self.server, load_urdf(robot), robot, "/robot")
        ghost_urdf = load_urdf(robot, robot.ghost_meshes)
        self._right = screen_right(CAMERA)  # where the ghosts' labels stand: left of the target, on screen
        self.ghosts = {key: Ghost(self.server, ghost_urdf, robot, key, self._right) for key in KEYS}
        target = np.array(INITIAL_TARGET)
        self.gizmo = TargetGizmo(self.server, target, assets.PANDA_TOP_DOWN_REACH.target_box, self._gizmo_moved)
        self.grasp = GraspPanel(
            self.server,
            target,
            np.array(q0),
            self.robot.limits,
            on_target=lambda p: np.array(self._ask_target(p, Source.INPUTS).p),
            on_q0=lambda q: np.array(self._ask_q0(q, Source.INPUTS).q0),
            guard=lambda doing: self.supervisor.guard(PAGE, doing),
            on_random_target=lambda: self.supervisor.call(
                PAGE, "Random target", self.set_target, self._random_target()
            ),
            on_random_q0=lambda: self.supervisor.call(PAGE, "Random q0", self.set_q0, self._random_q0()),
            on_ready=lambda: self.supervisor.call(PAGE, "Ready pose", self.set_q0, np.array(robot.reference_posture)),
        )
        # viser's panel is one for every tab: a note about one tab's input would greet the next tab opened
        self.clients.on_new_tab(lambda: self.supervisor.call(PAGE, "opening a tab", self.grasp.clear_notes))
        self.picker = MethodPicker(self.server, self._pick, METHODS, GROUP_TITLES)

        # The question and the workers that answer it.
        first = Question(INITIAL_TARGET, q0)
        if initial_policy is not None:
            first = first.with_snapshot("learned", 0, initial_policy)
        self.board = QuestionBoard(first, self._question_changed)
        self.solver = GraspSolver(self.cfg, self.kinematics)
        # One core for training, shared by the trainers (they take turns) and by the fast answers, which go first.
        self._training_core = threading.Lock()
        self.inference = InferenceWorker(self.board.fast, self.solver, self._draw, self.supervisor, self.trained,
                                         after=self.board.catch_up, exclusive=self._training_core)  # fmt: skip
        search_solver = GraspSolver(self.cfg, self.kinematics)
        self.landscape_grid = LandscapeGrid(self.cfg, self.kinematics)  # the grid keeps its evaluations: the landscape
        search_solver.choosers["angular_grid"] = self.landscape_grid
        self.search = SearchWorker(self.board.search, search_solver, self._draw_search, self.supervisor,
                                   wait_turn=self._fast_methods_answered)  # fmt: skip
        supervised = "teacher_supervised" not in self.trained
        if supervised:
            self.drawn["teacher_supervised"] = "waiting for the teacher's labels"
        self.trainers = LiveTrainers(
            self.server, self.supervisor, self.cfg, self.kinematics, self.splits, initial_policy, supervised,
            running=config.train and initial_policy is None, wait_turn=self._fast_methods_answered,
            exclusive=self._training_core, on_snapshot=self._snapshot, on_status=self._trainer_status,
            offer=lambda key, version, policy: self.board.offer_policy(
                version, policy, busy=lambda: self.inference.signal.is_busy, key=key
            ),
            say=self.status.set,
        )  # fmt: skip
        self.trainer, self.training = self.trainers.trainer, self.trainers.training
        self.supervised, self.supervised_panel = self.trainers.supervised, self.trainers.supervised_panel

        # The run's panels and the landscape.
        self.metrics = MetricsPanel(self.server, self._run, self.cfg, self.splits, self.solver.ik, self._learned_offer,
                                    self.supervisor)  # fmt: skip
        self.models = ModelPicker(self.server, loaded.models, self._pick_model, self._loaded_model)
        self.cases = CaseBrowser(self.server, *case_splits(self._run, self.cfg, self.splits, self.kinematics),
                                 on_case=self._show_case)  # fmt: skip
        self.current_posture = self.server.gui.add_checkbox("show current posture", initial_value=True)
        self.current_posture.on_update(lambda _: self.robot.set_visible(bool(self.current_posture.value)))
        self.landscape = Landscape()
        self.landscape_panel = LandscapePanel(self.server, self.supervisor)

        self.inference.start()
        self.search.start()
        self.trainers.start()
        self.board.begin()

    def _show_case(self, p: np.ndarray, q0: np.ndarray) -> None:
        with self.supervisor.guard(PAGE, "showing a test case"):
            clamped_p, message = clamp_target(p)
            self.grasp.target_notes.set(BOUNDS, None if message is None else f"⚠ {message}")
            clamped_q0, message = clamp_joints(q0, self.robot.limits)
            self.grasp.q0_notes.set(BOUNDS, None if message is None else f"⚠ {message}")
            self.board.ask(p=clamped_p, q0=clamped_q0, source=Source.PROGRAM)

    def _pick_model(self, method: str | None, seed: int | None) -> None:
        """The learned predictor becomes the run's ``method`` at ``seed`` (the trainer pauses), or, with ``None``,
        the live trainer's again (it resumes)."""
        with self.supervisor.guard(PAGE, "picking a model"):
            if method is None:
                self._picked_model = None
                self.status.set("model", None)
                self.trainer.start()
                return
            policy, _ = load_checkpoint(checkpoint_path(self._run, seed, method), self.kinematics)
            self._picked_model = (method, seed)
            self.trainer.pause()
            self._model_version -= 1
            self._offer_name = (self._model_version, f"{model_name(method, seed)} of the run")
            self.board.offer_policy(
                self._model_version, policy, busy=lambda: self.inference.signal.is_busy, key="learned"
            )
            self.status.set("model", f"learned predictor = {model_name(method, seed)} (trainer paused)")

    # Inputs -> questions.
    def set_target(self, p: np.ndarray) -> Question:
        """Move the grasp target (as a button does: the gizmo and the inputs follow); returns the question."""
        return self._ask_target(p, Source.PROGRAM)

    def set_q0(self, q0: np.ndarray) -> Question:
        return self._ask_q0(q0, Source.PROGRAM)

    def _gizmo_moved(self, p: np.ndarray) -> None:
        with self.supervisor.guard(PAGE, "moving the target gizmo"):
            clamped, message = clamp_target(p)
            self.grasp.target_notes.set(BOUNDS, None if message is None else f"⚠ {message}")
            self.board.offer_target(clamped, busy=lambda: self.inference.signal.is_busy)
            if not self.gizmo.dragging and not np.array_equal(clamped, p):
                self.gizmo.place(clamped)  # the drag ended outside the reach: show where the target went

    def _ask_target(self, p: np.ndarray, source: Source) -> Question:
        clamped, message = clamp_target(p)
        self.grasp.target_notes.set(BOUNDS, None if message is None else f"⚠ {message}")
        return self.board.ask(p=clamped, source=source)  # typed boxes write back what the clamp moved

    def _ask_q0(self, q0: np.ndarray, source: Source) -> Question:
        clamped, message = clamp_joints(q0, self.robot.limits)
        self.grasp.q0_notes.set(BOUNDS, None if message is None else f"⚠ {message}")
        return self.board.ask(q0=clamped, source=source)

    def _question_changed(self, old: Question | None, new: Question, source: Source) -> None:
        """Under the board's lock: move the controls that did not make the change, mark answers pending."""
        if old is None or new.q0 != old.q0:
            self.robot.show(np.array(new.q0))
        if source is not Source.GIZMO and not self.gizmo.dragging:
            if not np.array_equal(np.array(new.p), np.asarray(self.gizmo.handle.position, dtype=float)):
                self.gizmo.place(np.array(new.p))
        if (old is None or new.place != old.place) and source not in (Source.INPUTS, Source.TRAINER):
            # Never from the typed boxes themselves (they write back what a clamp moved once committed) or a
            # snapshot; a box being typed in is left alone either way.
            self.grasp.show_question(np.array(new.p), np.array(new.q0))
        old_versions = {} if old is None else dict(old.versions)
        pending = {key for key, version in new.versions if old_versions.get(key) != version}
        if old is None or new.place != old.place:
            pending |= set(new.policies)
        if old is None or new.p != old.p:
            pending.add("radial")
        if old is None or new.place != old.place:
            pending |= {"heading", *self.trained, *SEARCH_KEYS}
        with self._results_lock:
            if old is None or new.p != old.p:
                self._changed_at = (new.p, time.perf_counter())
            if old is None or new.place != old.place:
                self._place_changed_at = time.perf_counter()
                self.landscape.pending = True
            for key in pending:
                if key in SEARCH_KEYS:  # slow: hidden until its answer for the new place lands
                    self.ghosts[key].hide()
                    self.drawn[key] = PENDING
                else:
                    self.ghosts[key].set_pending(True)
                self.pending.add(key)
            self._restack(new)
            self.grasp.show(self.drawn, self.pending)
            self._request_landscape()

    def _fast_methods_answered(self, timeout_s: float = 1.0) -> None:
        """Block (up to ``timeout_s``) while the fast methods have a question to answer: the searches go after."""
        deadline = time.monotonic() + timeout_s
        while (self.board.fast.untaken or self.inference.signal.is_busy) and time.monotonic() < deadline:
            self.inference.signal.wait_idle(timeout=0.01)
            time.sleep(0.001)

    def _learned_offer(self) -> tuple[YawPolicy, str] | None:
        """The learned predictor's newest snapshot and what it is (for Evaluate now)."""
        offer = self.board.newest_offer
        if offer is None:
            return None
        version, policy = offer
        named, name = self._offer_name or (None, "")
        return policy, name if named == version else f"snapshot v{version}"

    def _snapshot(self, version: int, policy: YawPolicy) -> None:
        # A new snapshot refreshes the learned ghost but never cancels an answer being computed: while the
        # inference worker is busy the board keeps it, and adopts it when the worker is idle (``catch_up``).
        if self._picked_model is not None:
            return  # a model of the run answers as learned until the user picks the live trainer again
        status = self.trainer.status
        self._offer_name = (version, f"live trainer: seed {status.seed}, step {status.step}")
        self.board.offer_policy(version, policy, busy=lambda: self.inference.signal.is_busy)

    def _random_target(self) -> np.ndarray:
        heldout = bool(torch.rand(1, generator=self._random) < 0.25)
        return sample_points(self._random, 1, self.cfg.workspace, heldout=heldout)[0].numpy()

    def _random_q0(self) -> np.ndarray:
        return sample_start_states(self._random, 1, self.kinematics, self.cfg.start, False)[0].numpy()

    # Drawing (under the board's lock, only for the current question).
    def _draw(self, result: GraspResult) -> None:
        current = self.board.current
        with self.server.atomic(), self._results_lock:
            if result.question != current:
                self.stale_draws += 1  # cannot happen through publish; counted to prove it
            for name, answer in result.methods.items():
                self.ghosts[name].show(answer.q, answer.T_root_tcp)
                self.drawn[name] = answer
                self.pending.discard(name)
                self.landscape.set_marker(name, answer.yaw, answer.displacement)
            if "learned" not in result.methods:
                self.ghosts["learned"].hide()
                self.drawn["learned"] = "no snapshot yet"
                self.pending.discard("learned")
            self._restack(result.question)
            if self._changed_at is not None and self._changed_at[0] == result.question.p:
                self.latencies_ms.append(1e3 * (time.perf_counter() - self._changed_at[1]))
                self._changed_at = None  # counted once per change
            self.grasp.show(self.drawn, self.pending)
            self._request_landscape()
            self.drawn_question = result.question  # last: a reader that sees it sees the whole draw

    def _draw_search(self, place: Place, key: str, answer: MethodResult) -> None:
        with self.server.atomic(), self._results_lock:
            if place != self.board.current.place:
                self.stale_draws += 1
            self.ghosts[key].show(answer.q, answer.T_root_tcp)
            self.drawn[key] = answer
            self.pending.discard(key)
            self.search_latencies_ms[key].append(1e3 * (time.perf_counter() - self._place_changed_at))
            self._restack(self.board.current)
            self.grasp.show(self.drawn, self.pending)
            if key == "angular_grid" and self.landscape_grid.last is not None:
                self.landscape.set_grid(self.landscape_grid.last, self.landscape_grid.ik_iterations)
            self.landscape.set_marker(key, answer.yaw, answer.displacement)
            self._request_landscape()

    def _pick(self, key: str, shown: bool) -> None:
        with self.supervisor.guard(PAGE, f"showing {key}"), self.board.lock, self._results_lock:
            self.ghosts[key].enable(shown)
            self._restack(self.board.current)
            self._request_landscape()

    def _request_landscape(self) -> None:
        """Under the results lock: redraw the landscape with the markers of the methods whose ghosts are shown."""
        self.landscape_panel.request(self.landscape, {key for key, ghost in self.ghosts.items() if ghost.enabled})

    def _restack(self, question: Question) -> None:
        """Under the results lock: the drawn ghosts' labels in one column above the target."""
        stack_labels([self.ghosts[key] for key in KEYS], np.array(question.p), self._right)

    def _trainer_status(self, status: TrainerStatus) -> None:
        self.training.show(status)
        if status.seed != self._trainer_seed:  # a Reset: the snapshot Evaluate now scored is gone
            scored, self._trainer_seed = self._trainer_seed, status.seed
            if scored is not None:
                self.metrics.forget(f"The trainer was reset (seed {scored} -> {status.seed}): its snapshots are gone.")
        self.status.set("trainer", f"⚠ trainer failed: {status.error}" if status.state == FAILED else None)

    # Measurements and shutdown.
    def median_latency_ms(self) -> float:
        with self._results_lock:
            return statistics.median(self.latencies_ms) if self.latencies_ms else float("nan")

    def close(self) -> None:
        self.board.close()
        self.trainers.close()
        self.inference.join(5.0)
        self.search.join(5.0)
        self.landscape_panel.close()
        self.server.stop()


def launch(config: ViewerConfig) -> Viewer:
    """Serve the page and start the workers; returns at once (viser serves from its threads)."""
    return Viewer(config)
