"""What each method chooses for one grasp target, and the worker thread that computes it on the latest inputs.

``solve_grasp`` is the math: yaws from the choosers, one batched 64-step IK check from ``q0``, FK of the result.
``InferenceWorker`` runs it on one thread for the newest request of a ``GenerationGate`` only; its result is drawn
through the gate, so a result for inputs that have since changed is discarded, never drawn. A failure in the
computation, the drawing or the work after it is caught by the ``Supervisor`` and shown; the worker goes on.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch

from app.grasp_yaw.methods import FAST_KEYS, METHODS
from app.shell.busy import BusySignal
from app.shell.generations import GenerationGate, Request
from app.shell.question import Question
from app.shell.supervision import Supervisor
from kinematics import KinematicsLayer
from learning.grasp_yaw.baselines import ik_layer
from learning.grasp_yaw.config import ExperimentCfg
from learning.grasp_yaw.evaluation import policy_chooser, search_choosers
from learning.grasp_yaw.predictors import YawPolicy
from learning.grasp_yaw.scoring import score_yaws
from learning.grasp_yaw.splits import GoalSet
from learning.grasp_yaw.task import failure_penalty

Chooser = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # p (N, 3), q0 (N, 7) -> yaw vectors (N, 2)


@dataclass(frozen=True)
class MethodResult:
    """A method's answer, checked with IK from ``q0``."""

    yaw: float  # radians in (-pi, pi]
    success: bool
    displacement: float  # |q_ik - q0|^2, rad^2
    position_error: float  # m
    rotation_error: float  # rad
    q: np.ndarray  # (7,) the checked joints
    T_root_tcp: np.ndarray  # (4, 4) FK of q
    latency_ms: float  # inputs to final joints: the choice and the checking IK


@dataclass(frozen=True)
class GraspResult:
    question: Question
    methods: dict[str, MethodResult]


class GraspSolver:
    """Scores yaw choosers for one target: one batched IK check from ``q0`` at ``cfg.eval_ik_iterations`` steps,
    as ``learning``'s evaluation checks every method. ``choosers`` holds the experiment's own choosers of the
    methods that need no training (``learning.grasp_yaw.evaluation.search_choosers``), keyed as ``app.grasp_yaw.methods`` keys them."""

    def __init__(self, cfg: ExperimentCfg, kinematics: KinematicsLayer) -> None:
        self.cfg, self.kinematics = cfg, kinematics
        self.ik = ik_layer(kinematics, cfg.eval_ik_iterations)
        self.penalty = failure_penalty(kinematics)
        experiment = search_choosers(cfg, kinematics)
        self.choosers = {m.key: experiment[m.experiment_name] for m in METHODS if m.experiment_name in experiment}

    def solve(
        self, p: tuple[float, ...], q0: tuple[float, ...], choosers: Mapping[str, Chooser]
    ) -> dict[str, MethodResult]:
        kin = self.kinematics
        p_t = torch.tensor([p], dtype=kin.dtype, device=kin.device)
        q0_t = torch.tensor([q0], dtype=kin.dtype, device=kin.device)
        yaws, choose_ms = [], []
        for chooser in choosers.values():
            start = time.perf_counter()
            with torch.enable_grad():  # online optimisation steps through the IK layer
                yaws.append(chooser(p_t, q0_t).detach())
            choose_ms.append(1e3 * (time.perf_counter() - start))
        with torch.no_grad():
            return self._check(p_t, q0_t, yaws, choose_ms, list(choosers))

    def _check(
        self, p_t: torch.Tensor, q0_t: torch.Tensor, yaws: list[torch.Tensor], choose_ms: list[float], names: list[str]
    ) -> dict[str, MethodResult]:
        kin, n = self.kinematics, len(yaws)
        start = time.perf_counter()
        rows = score_yaws(
            self.ik, GoalSet(p_t.expand(n, 3), q0_t.expand(n, -1)), torch.cat(yaws), self.cfg.weights, self.penalty
        )
        check_ms = 1e3 * (time.perf_counter() - start)
        T_root_tcp = kin(rows.q).double().cpu().numpy()
        yaw = torch.cat(yaws).double().cpu().numpy()
        return {
            name: MethodResult(
                yaw=math.atan2(yaw[i, 1], yaw[i, 0]),
                success=bool(rows.success[i] > 0.5),
                displacement=float(rows.displacement[i]),
                position_error=float(rows.position_error[i]),
                rotation_error=float(rows.rotation_error[i]),
                q=rows.q[i].double().cpu().numpy(),
                T_root_tcp=T_root_tcp[i],
                latency_ms=choose_ms[i] + check_ms,
            )
            for i, name in enumerate(names)
        }


def fast_choosers(
    solver: GraspSolver, live: Mapping[str, YawPolicy], trained: Mapping[str, YawPolicy]
) -> dict[str, Chooser]:
    """The rules, the predictors trained live (their snapshots in the question) and the trained predictors loaded
    from a run, in ``app.grasp_yaw.methods`` order: everything answered at once. A live snapshot wins over a loaded one."""
    policies = {**trained, **live}
    choosers: dict[str, Chooser] = {}
    for key in FAST_KEYS:
        if key in solver.choosers:
            choosers[key] = solver.choosers[key]
        elif key in policies:
            choosers[key] = policy_chooser(policies[key])
    return choosers


class InferenceWorker:
    """One thread answering the newest ``Question`` of ``gate`` with every fast method (``app.grasp_yaw.methods``).

    Args:
        gate: where requests come from and results are drawn through.
        solver: the IK check.
        draw: draws a result; called by ``gate.publish``, i.e. only while its question is current.
        supervisor: catches, counts and shows a failure of a request, its drawing or ``after``, under the key
            ``"inference"``; the worker keeps serving.
        trained: the trained predictors loaded from a run, by method key (answered beside the live snapshots).
        after: called after each request, once the worker counts as idle again.
        exclusive: held while computing and drawing an answer; the trainers hold it while stepping. On 2 cores two threads of
            small torch ops slow each other two- to fivefold (they take turns at the interpreter lock after every
            op), so an answer waits for the step in flight to end (about 12 ms) instead of racing it; the trainers
            start no new step while the worker is busy.
    """

    PART = "inference"

    def __init__(
        self,
        gate: GenerationGate[Question],
        solver: GraspSolver,
        draw: Callable[[GraspResult], None],
        supervisor: Supervisor,
        trained: Mapping[str, YawPolicy] | None = None,
        after: Callable[[], None] = lambda: None,
        exclusive: threading.Lock | None = None,
    ) -> None:
        self.gate, self.solver, self._draw, self._supervisor = gate, solver, draw, supervisor
        self._after = after
        self._exclusive = exclusive if exclusive is not None else threading.Lock()
        self.trained = dict(trained or {})
        self.signal = BusySignal()
        self._thread = threading.Thread(target=self._run, name="inference", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while (request := self.gate.take()) is not None:
            with self.signal.busy(), self._supervisor.guard(self.PART, f"answering target {request.inputs.p}"):
                self.handle(request)
            with self._supervisor.guard(self.PART, "the work after an answer"):
                self._after()

    def handle(self, request: Request[Question]) -> bool:
        """Compute the answer for ``request`` and draw it if still current; True if drawn. Raises what the
        computation or the drawing raises (``_run`` reports it)."""
        question = request.inputs
        choosers = fast_choosers(self.solver, question.policies, self.trained)
        with self._exclusive:
            methods = self.solver.solve(question.p, question.q0, choosers)
            result = GraspResult(question, methods)
            return self.gate.publish(request.generation, lambda: self._draw(result))

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
