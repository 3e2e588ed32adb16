"""Assembles the G1 scene (``python -m app --robot g1``): the counterweight experiment live. The G1 stands with both
feet held and an 8 kg payload in its right hand; a reach goal, dragged (gizmo) or typed, bounded to the task's goal
region (``app.counterweight.region``); reach only, the gradient policy (trained live, or a run's), a loaded run's
other policies (the 7-D ablation, the best constant, every zero-order policy at both budgets) and the per-goal
optimisation as ghosts (a picker chooses which are drawn), their centre of mass over the support polygon and the
body targets each chose as frames; one table of every method's answer. The race (``app.counterweight.race``): a
zero-order trainer of the user's pick runs beside the gradient trainer on the same goals (the experiment's region or
one of the study's levels of goal-dependence), its policy drawn as a ghost of its own, both validation curves on one
chart against layer evaluations and one against seconds.

The shell's machinery (``app.shell``) carries it: one ``QuestionBoard`` owns the question (goal ``p``, no start joints:
the G1 always starts standing, and the gradient policy's snapshot), its gates feed the workers and draw their
answers under its lock, so an answer is drawn only while its question is current; every background part runs under
the ``Supervisor``; the trainer is a ``TrainerWorker`` with its ``TrainingPanel``. Locks, outermost first:
``QuestionBoard.lock`` -> ``G1Viewer._results_lock``. The two trainers take turns on one core (``_training_core``).

The trainer steps beside the answers, not in turns with them. An answer is the whole-body layer's compiled solve
(one native call per chunk of steps, the GIL released while it runs; about 10 ms for the fast methods' rows), and
beside a trainer step it takes about 25 ms: taking turns under one lock made a goal that landed during a step wait
for the step (about 0.9 s at ``LIVE_BATCH`` goals: the training solve records a graph, so it is the torch
composition). The trainer still starts no step while an answer is pending, the goal has moved within
``TRAINER_QUIET_S`` or the per-goal optimisation (beside it; abandoned between its steps when the goal moves) runs:
it trains while the page is idle. It trains on a loaded run's train and validation splits; without a run, on a
smaller sample drawn the same way (``live_goals``: about 6 s on one core), drawn at startup on a thread of its own
(the first answers come beside it), and the trainer starts once they are drawn.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

import assets
from app.config import ViewerConfig
from app.counterweight.answers import ONLINE, POLICY, RACE, REACH_ONLY, BodyAnswer, BodySolver
from app.counterweight.methods import BODY_KEYS, BODY_METHODS, GROUP_TITLES, LIVE_KEYS, RUN_KEYS
from app.counterweight.metrics_panel import CounterweightMetricsPanel
from app.counterweight.online import OnlineWorker
from app.counterweight.panel import ReachPanel, verdict_legend
from app.counterweight.race import Race
from app.counterweight.region import GoalRegion
from app.counterweight.trainer import GOALS_JOIN_S, LiveCounterweightTrainer, live_goals, live_gradient_trainer
from app.counterweight.view import (
    PAYLOAD_RGB,
    SOLID_RGB,
    BodyGhost,
    BodyView,
    StickFigure,
    add_payload,
    draw_support_polygon,
)
from app.counterweight.worker import BodyAnswers, BodyWorker
from app.shell.answers_table import PENDING
from app.shell.ghost_labels import screen_right, stack_labels
from app.shell.method_picker import MethodPicker
from app.shell.question import Place, Question, QuestionBoard, Source
from app.shell.robot_view import load_urdf
from app.shell.server import serve_page
from app.shell.stage import Camera, TargetGizmo
from app.shell.trainer_worker import FAILED, TrainerStatus, TrainerWorker
from app.shell.training_panel import TrainingPanel
from kinematics.errors import ProjectError
from learning.counterweight.checkpoints import load_policy
from learning.counterweight.config import ExperimentCfg, preset
from learning.counterweight.experiment import build_problem, checkpoint_path, load_config
from learning.counterweight.figures import skeleton_bones
from learning.counterweight.goals import load_splits
from learning.counterweight.methods import make_policy
from learning.counterweight.problem import CounterweightProblem

CAMERA = Camera(
    position=(1.7, -1.7, 1.35), look_at=(0.15, -0.1, 0.7), fov_deg=60.0
)  # m: the G1, its reach, the polygon
INITIAL_GOAL = (0.40, -0.15, -0.2)  # distance (m), azimuth, elevation (rad) from the shoulder: in front, needs a
# counterweight
# The gizmo's own limits are left open (viser's default): drei applies them to the offset from where the gizmo was
# first placed, not to world coordinates, and they go stale once the page moves it; the region's clamp bounds the
# goal, and a drag that ends outside the region puts the gizmo back on the clamped goal.
GIZMO_FREE = ((-1000.0, 1000.0),) * 3
SNAPSHOT_EVERY = 2  # trainer steps
LIVE_BATCH = 8  # goals per live trainer step (the experiment's 32 take about 1.1 s a step, 8 about 0.5 s)
TRAINER_QUIET_S = 0.5  # the trainer starts a step only once the goal has rested this long
TRAINER_WAIT_S = 30.0  # ... or once it has waited this long (a drag that never pauses still trains, slowly)
NEEDS_A_RUN = "needs a run"  # in the table's narrow cells (the picker's box says how: ``--run RUN``)
NOT_IN_RUN = "not in the run"
PAGE = "page"


class G1Viewer:
    """The running G1 scene. ``launch_g1`` builds it; ``close`` stops its threads and the server.

    Attributes useful to tests: ``board``, ``drawn`` (answers on screen by method key, or why there is none),
    ``pending``, ``drawn_question``, ``trained`` (a loaded run's other policies by method key), ``latencies_ms``
    (goal change -> the fast ghosts drawn, first answer, moving or rested), ``rested_latencies_ms`` (goal change ->
    the rested answer drawn), ``stale_draws`` (0 by construction), ``supervisor``, ``payload`` (the solid robot's),
    ``clients`` (the browsers connected).
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
        self.cfg, run = self._config(config)
        self.solver = BodySolver(self.cfg)
        problem = self.solver.problem
        self.region = GoalRegion(problem.shoulder.double().numpy(), self.cfg.goals)
        initial_policy, self.trained = self._load_policies(run, problem)
        goals = self._load_goals(run)  # the experiment's region's (train, validation) goals; None: drawn later
        self._random = torch.Generator().manual_seed(0)

        self._results_lock = threading.Lock()
        self.drawn: dict[str, BodyAnswer | str | None] = {key: None for key in BODY_KEYS}
        self.drawn[POLICY] = None if initial_policy else "no snapshot yet"
        self.drawn[RACE] = "no snapshot yet"
        for key in RUN_KEYS:
            if key not in self.trained:
                self.drawn[key] = NEEDS_A_RUN if initial_policy is None else NOT_IN_RUN
        self.pending: set[str] = set()
        self._answered_goal: dict[str, tuple[float, ...]] = {}  # method key -> the goal its drawn answer is for
        self.drawn_question: Question | None = None
        self.latencies_ms: list[float] = []
        self.rested_latencies_ms: list[float] = []
        self.stale_draws = 0
        self._changed_at: dict[str, tuple[tuple[float, ...], float]] = {}
        self._goal_moved_at = -math.inf  # time.monotonic() of the last goal change

        draw_support_polygon(self.server, self.solver.support_polygon_xy())
        bones = skeleton_bones(problem)
        if config.light:
            self.robot = StickFigure(self.server, "/robot", bones, SOLID_RGB)
            with torch.no_grad():
                self.robot.show(problem.tree.frame_poses(problem.q_stand)[..., :3, 3].double().numpy())
        else:
            self.robot = BodyView(self.server, load_urdf(assets.G1), assets.G1, "/robot")
            self.robot.show(problem.q_stand.double().numpy())
        payload_kg = problem.cfg.payload_kg
        self.payload = add_payload(self.server, "/robot_payload", payload_kg, PAYLOAD_RGB)
        self.payload.position = tuple(float(v) for v in self.solver.standing_payload())
        self._right = screen_right(CAMERA)  # where the ghosts' labels stand: left of the goal, on screen
        self.ghosts = {m.key: BodyGhost(self.server, bones, m, payload_kg, self._right) for m in BODY_METHODS}
        goal = self.region.point(*INITIAL_GOAL)
        self.gizmo = TargetGizmo(self.server, goal, GIZMO_FREE, self._gizmo_moved)
        self.reach = ReachPanel(
            self.server,
            goal,
            on_goal=lambda p: np.array(self._ask_goal(p, Source.INPUTS).p),
            on_random_goal=lambda: self.supervisor.call(PAGE, "Random goal", self.set_target, self._random_goal()),
            guard=lambda doing: self.supervisor.guard(PAGE, doing),
            verdict=verdict_legend(problem.cfg.tolerance, problem.cfg.margin, problem.cfg.feet_tolerance),
        )
        # viser's panel is one for every tab: a note about one tab's input would greet the next tab opened
        self.clients.on_new_tab(lambda: self.supervisor.call(PAGE, "opening a tab", self.reach.clear_notes))
        missing = {key: self.drawn[key] for key in RUN_KEYS if key not in self.trained}  # no ghost to draw
        for key in missing:
            self.ghosts[key].enable(False)
        unavailable = {key: "needs --run RUN" if why == NEEDS_A_RUN else why for key, why in missing.items()}
        self.picker = MethodPicker(self.server, self._pick, BODY_METHODS, GROUP_TITLES, unavailable)

        first = Question(tuple(float(v) for v in goal), ())
        if initial_policy is not None:
            first = first.with_snapshot(POLICY, 0, initial_policy)
        self.board = QuestionBoard(first, self._question_changed)
        self.answers = BodyWorker(
            self.board.fast,
            BodySolver(self.cfg),
            self._draw,
            self.supervisor,
            trained=self.trained,
            after=self.board.catch_up,
        )
        self.online = OnlineWorker(self.board.search, BodySolver(self.cfg), self._draw_online, self.supervisor)
        initial_state = [initial_policy.state_dict()] if initial_policy is not None else []
        live = dataclasses.replace(self.cfg.train, batch_size=LIVE_BATCH)

        def build(seed: int) -> LiveCounterweightTrainer:
            problem = build_problem(self.cfg)
            with torch.random.fork_rng():  # the seed's weights, without touching the process's generator
                torch.manual_seed(seed)
                policy = make_policy("gradient", problem, self.cfg)
            if initial_state:  # the first trainer continues from the run's policy; Reset starts from scratch
                policy.load_state_dict(initial_state.pop())
            return live_gradient_trainer(problem, policy, self.race.goals, live, seed)

        # One core for the trainers, which take turns (the answers and the page have the other).
        self._training_core = threading.Lock()
        running = config.train and initial_policy is None
        self.trainer = TrainerWorker(
            build,
            self._snapshot,
            self._trainer_status,
            self.supervisor,
            snapshot_every=SNAPSHOT_EVERY,
            validate_every=self.cfg.train.validate_every,
            running=running,
            wait_turn=self._answers_first,
            exclusive=self._training_core,
        )
        self.training = TrainingPanel(self.server, self.trainer, "Counterweight policy (live)", log_loss=True)
        self.race = Race(
            self.server, self.supervisor, self.status, self.cfg, goals, self.trainer, LIVE_BATCH,
            offer=lambda version, policy: self.board.offer_policy(
                version, policy, busy=lambda: self.answers.signal.is_busy, key=RACE
            ),
            running=running, wait_turn=self._answers_first, exclusive=self._training_core,
        )  # fmt: skip
        self.metrics = CounterweightMetricsPanel(self.server, run, self.supervisor)

        self.answers.start()
        self.online.start()
        self._goals_thread = threading.Thread(target=self._draw_goals, name="live goals", daemon=True)
        if goals is None:
            self._goals_thread.start()
        else:
            self._start_trainers()
        self.board.begin()

    # Loading.
    def _config(self, config: ViewerConfig) -> tuple[ExperimentCfg, Path | None]:
        if config.checkpoint is None:
            self.status.set(
                "checkpoint",
                f"No run: training the counterweight policy from scratch (preset `{config.preset}`); "
                "`--run RUN` loads a counterweight run's policies and report.",
            )
            return preset(config.preset), None
        run = Path(config.checkpoint).resolve().parents[2]
        try:
            return load_config(run), run
        except ProjectError as exc:
            self.status.set("checkpoint", f"⚠ run `{run}` could not be loaded: {exc} — training from scratch.")
            return preset(config.preset), None

    def _load_policies(
        self, run: Path | None, problem: CounterweightProblem
    ) -> tuple[nn.Module | None, dict[str, nn.Module]]:
        """The gradient policy of the checkpoint and the run's other policies of its seed, by method key (a missing
        or unreadable one is reported and left out, its row saying so)."""
        if run is None:
            return None, {}
        try:
            policy, meta = load_policy(self.config.checkpoint, problem)
        except ProjectError as exc:
            self.status.set(
                "checkpoint",
                f"⚠ checkpoint `{self.config.checkpoint}` could not be loaded: {exc} — training from scratch.",
            )
            return None, {}
        trained: dict[str, nn.Module] = {}
        problems = []
        for method in BODY_METHODS:
            if method.key not in RUN_KEYS:
                continue
            if method.key == "constant":  # one for the run, not per seed
                path = run / "checkpoints" / "constant.pt"
            else:
                path = checkpoint_path(run, int(meta["seed"]), method.experiment_name)
            try:
                trained[method.key] = load_policy(path, problem)[0]
            except ProjectError as exc:
                problems.append(f"{method.label}: {exc}")
        if problems:
            self.status.set("run", "⚠ not loaded from the run: " + "; ".join(problems))
        self.status.set(
            "checkpoint",
            f"Loaded `{self.config.checkpoint}` ({meta['method']}, seed {meta['seed']}) and {len(trained)} other "
            "policies of the run; trainer paused: Start fine-tunes the gradient policy.",
        )
        return policy, trained

    def _load_goals(self, run: Path | None) -> tuple[torch.Tensor, torch.Tensor] | None:
        """A run's train and validation goals (None without a run, or if its splits cannot be read)."""
        if run is None:
            return None
        try:
            splits = load_splits(run / "splits.pt")
            return splits["train"].goals, splits["validation"].goals
        except (OSError, RuntimeError, KeyError) as exc:
            self.status.set("splits", f"⚠ `{run}/splits.pt` could not be read ({exc}): the live trainer draws goals.")
            return None

    def _draw_goals(self) -> None:
        """Without a run: draw the live trainer's goals, then start it (a failure is shown; the trainer then never
        starts, the answers go on)."""
        self.training.show_progress(None, "**drawing** the live trainer's goals (those that need a counterweight)")
        with self.supervisor.guard("live goals", "drawing the live trainer's goals"):
            self.race.set_experiment_goals(live_goals(build_problem(self.cfg), self.cfg))
            self._start_trainers()

    def _start_trainers(self) -> None:
        self.trainer.start_thread()
        self.race.trainer.start_thread()

    # Inputs -> questions.
    def set_target(self, p: np.ndarray) -> Question:
        """Move the reach goal (m, world frame; clamped into the region), as the Random goal button does; returns
        the question."""
        return self._ask_goal(p, Source.PROGRAM)

    def _bounds(self, message: str | None) -> None:
        """Show (or clear) what the last clamp of the goal did, under the answers beside the goal line (not in the
        page's status at the top, where it would stack above the table)."""
        self.reach.show_bounds(message)

    def _gizmo_moved(self, p: np.ndarray) -> None:
        with self.supervisor.guard(PAGE, "moving the reach goal"):
            clamped, message = self._clamp(p)
            self._bounds(message)
            self.board.offer_target(clamped, busy=lambda: self.answers.signal.is_busy)
            if not self.gizmo.dragging and message is not None:
                self.gizmo.place(clamped)  # the drag ended outside the region: show where the goal went

    def _clamp(self, p: np.ndarray) -> tuple[np.ndarray, str | None]:
        """``p`` moved into the region: outside it, to the nearest goal the trainers train on (the picked level's)."""
        goals = self.race.goals
        return self.region.clamp(p, None if goals is None else goals[0].numpy())

    def _ask_goal(self, p: np.ndarray, source: Source) -> Question:
        clamped, message = self._clamp(p)
        self._bounds(message)
        with self.board.lock:
            return self.board.ask(p=clamped, source=source)  # typed: the boxes show where it went once committed

    def _random_goal(self) -> np.ndarray:
        """A random validation goal (either sector; they need a counterweight), or, before the live trainer has
        drawn its goals, a goal drawn uniformly from a random sector."""
        goals = self.race.goals
        if goals is None:
            return self.region.sample(self._random)
        validation = goals[1]
        return validation[int(torch.randint(len(validation), (1,), generator=self._random))].numpy()

    def _question_changed(self, old: Question | None, new: Question, source: Source) -> None:
        """Under the board's lock: move the controls that did not make the change, mark answers pending."""
        moved = old is None or new.p != old.p
        if moved:
            self._goal_moved_at = time.monotonic()
            if source is not Source.GIZMO and not self.gizmo.dragging:
                if not np.array_equal(np.array(new.p), np.asarray(self.gizmo.handle.position, dtype=float)):
                    self.gizmo.place(np.array(new.p))
            if source not in (Source.INPUTS, Source.TRAINER):  # never under a typing cursor
                self.reach.show_goal(np.array(new.p))
            self.reach.show_where(self.region.describe(np.array(new.p)))
        with self._results_lock:
            if moved:
                now = time.perf_counter()
                self._changed_at = {"first": (new.p, now), "rested": (new.p, now)}
                self.ghosts[ONLINE].hide()  # slow: hidden until its answer for the new goal lands
                self.drawn[ONLINE] = PENDING
                self.pending.add(ONLINE)
            fast = [REACH_ONLY, *self.trained, *(key for key in LIVE_KEYS if key in new.policies)]
            for key in fast:  # pending: no answer drawn for this goal (an earlier snapshot's answer is not)
                pending = self._answered_goal.get(key) != new.p
                self.ghosts[key].set_pending(pending)
                if pending:
                    self.pending.add(key)
                else:
                    self.pending.discard(key)
            self._restack(new)
            self.reach.show(self.drawn, self.pending)

    def _snapshot(self, version: int, policy: nn.Module) -> None:
        self.board.offer_policy(version, policy, busy=lambda: self.answers.signal.is_busy, key=POLICY)

    def _answers_first(self) -> None:
        """Block (up to ``TRAINER_WAIT_S``) while a question waits for its answer, the goal has moved within
        ``TRAINER_QUIET_S`` or the per-goal optimisation runs: no trainer step starts then."""
        deadline = time.monotonic() + TRAINER_WAIT_S

        def waiting() -> bool:
            if self.trainer.closing:
                return False
            moving = time.monotonic() - self._goal_moved_at < TRAINER_QUIET_S
            busy = self.answers.signal.is_busy or self.online.signal.is_busy
            return self.board.fast.untaken or busy or moving

        while waiting() and time.monotonic() < deadline:
            self.answers.signal.wait_idle(timeout=0.01)
            time.sleep(0.005)

    # Drawing (under the board's lock, only for the current question).
    def _draw(self, result: BodyAnswers) -> None:
        with self.server.atomic(), self._results_lock:
            if result.question != self.board.current:
                self.stale_draws += 1  # cannot happen through publish; counted to prove it
            for key, answer in result.methods.items():
                self.ghosts[key].show(answer)
                self.drawn[key] = answer
                self._answered_goal[key] = result.question.p
                self.pending.discard(key)
            for key in LIVE_KEYS:
                if key not in result.question.policies:
                    self.ghosts[key].hide()
                    self.drawn[key] = "no snapshot yet"
                    self.pending.discard(key)
            phase = next(iter(result.methods.values())).phase
            for series, wanted in (("first", None), ("rested", "rested")):
                changed = self._changed_at.get(series)
                if changed is not None and changed[0] == result.question.p and wanted in (None, phase):
                    latency = 1e3 * (time.perf_counter() - changed[1])
                    (self.latencies_ms if series == "first" else self.rested_latencies_ms).append(latency)
                    del self._changed_at[series]  # counted once per change
            self._restack(result.question)
            self.reach.show(self.drawn, self.pending)
            self.drawn_question = result.question  # last: a reader that sees it sees the whole draw

    def _draw_online(self, place: Place, answer: BodyAnswer) -> None:
        with self.server.atomic(), self._results_lock:
            if place != self.board.current.place:
                self.stale_draws += 1
            self.ghosts[ONLINE].show(answer)
            self.drawn[ONLINE] = answer
            self.pending.discard(ONLINE)
            self._restack(self.board.current)
            self.reach.show(self.drawn, self.pending)

    def _pick(self, key: str, shown: bool) -> None:
        with self.supervisor.guard(PAGE, f"showing {key}"), self.board.lock, self._results_lock:
            self.ghosts[key].enable(shown)
            self._restack(self.board.current)

    def _restack(self, question: Question) -> None:
        stack_labels([self.ghosts[key] for key in BODY_KEYS], np.array(question.p), self._right)

    def _trainer_status(self, status: TrainerStatus) -> None:
        self.training.show(status)
        self.race.show_gradient(status)
        self.status.set("trainer", f"⚠ trainer failed: {status.error}" if status.state == FAILED else None)

    # Shutdown.
    def close(self) -> None:
        self.board.close()
        if self._goals_thread.is_alive():  # it cannot be interrupted: let it finish its draw (seconds), so that no
            self._goals_thread.join(GOALS_JOIN_S)  # thread is left inside torch when the process exits (an abort)
        self.trainer.close()  # first: a drawing of the race's goals that has not begun sees it and returns
        self.race.close()
        self.answers.join(5.0)
        self.online.join(30.0)
        self.server.stop()


def launch_g1(config: ViewerConfig) -> G1Viewer:
    """Serve the G1 scene and start its workers; returns at once."""
    if config.robot != "g1":
        raise ProjectError(f"launch_g1 serves the G1 scene, not {config.robot!r}")
    return G1Viewer(config)
