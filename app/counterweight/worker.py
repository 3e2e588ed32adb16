"""The thread that answers the newest reach question with every fast method (reach only and the policies), in two
phases.

While the goal moves, each question gets one chunk of cascade steps warm-started from the previous answer's
poses: a *moving* answer, drawn as soon as it is computed. Once the goal has rested ``settle_s``, the full solve
from the standing configuration (the experiment's own answer) replaces it: the *rested* answer. The full solve
checks between chunks whether its question is still current and is abandoned if not; the worker counts as idle
during it, so a drag that starts adopts its first target at once. A question whose goal has not moved since the
last answer drawn (a new snapshot of the gradient policy) gets no moving answer: only the methods whose rested
answer is not for it yet are solved, by the full solve, at once (a new snapshot re-answers the policy alone; reach
only and a run's policies, which do not depend on it, keep their answers). So an untouched goal is answered once
per method and snapshot, always the same way. Both answers go through the board's gate: one
for a question that has changed is discarded, never drawn. An answer is computed beside a live trainer's step, not
after it: its solves are the whole-body layer's compiled calls, which hold no lock and release the GIL while they
run. Failures are caught, counted and shown by the ``Supervisor`` under ``PART``; the worker goes on.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import nn

from app.counterweight.answers import MOVING, RESTED, BodyAnswer, BodySolver, Choice
from app.shell.busy import BusySignal
from app.shell.generations import GenerationGate, Request
from app.shell.question import Question
from app.shell.supervision import Supervisor


@dataclass(frozen=True)
class BodyAnswers:
    """The answers of ``methods`` (by key: every fast method, or only those a new snapshot re-answers) to
    ``question``."""

    question: Question
    methods: dict[str, BodyAnswer]


def answer_inputs(question: Question, key: str) -> tuple[tuple[float, ...], int | None]:
    """What method ``key``'s answer to ``question`` depends on: the goal, and the snapshot's version for a policy
    trained live (None for every other method)."""
    return question.p, dict(question.versions).get(key)


class BodyWorker:
    """One thread answering the newest ``Question`` of ``gate`` (goal ``p``, the gradient policy's snapshot under
    ``POLICY``, the race's under ``RACE``, where there are) with reach only, those snapshots and the ``trained``
    policies, in one batch.

    Args:
        gate: requests in, answers drawn through it.
        solver: the worker's own ``BodySolver``.
        draw: draws ``BodyAnswers``; called by ``gate.publish``, only while its question is current.
        supervisor: shows a failure of an answer, its drawing or ``after``.
        trained: a loaded run's other policies by method key (fixed: they never change while the scene runs).
        after: called whenever the worker becomes idle (the board adopts what was offered meanwhile).
        settle_s: how long the goal must rest before the full solve.
    """

    PART = "body answers"

    def __init__(
        self,
        gate: GenerationGate[Question],
        solver: BodySolver,
        draw: Callable[[BodyAnswers], None],
        supervisor: Supervisor,
        trained: Mapping[str, nn.Module] | None = None,
        after: Callable[[], None] = lambda: None,
        settle_s: float = 0.3,
    ) -> None:
        self.gate, self.solver, self._draw, self._supervisor = gate, solver, draw, supervisor
        self.trained = dict(trained or {})
        self._after, self.settle_s = after, settle_s
        self.signal = BusySignal()
        self.abandoned = 0  # full solves given up because their question changed
        self._previous: dict[str, torch.Tensor] = {}  # method key -> the pose of its last answer (warm start)
        self._drawn_goal: tuple[float, ...] | None = None  # the goal of the last answer drawn
        self._rested: dict[str, tuple] = {}  # method key -> ``answer_inputs`` of its drawn answer, if rested
        self._thread = threading.Thread(target=self._run, name="body answers", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while (request := self.gate.take()) is not None:
            goal = request.inputs.p
            rest_now = goal == self._drawn_goal  # not moved: only the answers it lacks, by the full solve
            if not rest_now:
                with self.signal.busy(), self._supervisor.guard(self.PART, f"answering goal {goal} (moving)"):
                    rest_now = not self.answer_moving(request)
                with self._supervisor.guard(self.PART, "the work after an answer"):
                    self._after()
            if rest_now or not self.gate.wait_newer(request.generation, self.settle_s):
                with self._supervisor.guard(self.PART, f"answering goal {goal} (rested)"):
                    self.answer_rested(request)
                with self._supervisor.guard(self.PART, "the work after an answer"):
                    self._after()

    def _choices(self, question: Question) -> dict[str, Choice]:
        policies = dict(question.policies) | self.trained  # the live snapshots (the gradient policy's, the race's)
        return self.solver.choices(question.p, policies)

    def answer_moving(self, request: Request[Question]) -> bool:
        """One warm-started chunk from each method's previous pose, drawn if still current; False (nothing done)
        when a method has no previous pose yet."""
        started = time.perf_counter()
        choices = self._choices(request.inputs)
        if any(key not in self._previous for key in choices):
            return False
        seed = torch.stack([self._previous[key] for key in choices])
        iterations = self.solver.chunk_iterations
        result = self.solver.solve(request.inputs.p, list(choices.values()), seed, iterations)
        self._publish(request, choices, result, MOVING, iterations, started)
        return True

    def answer_rested(self, request: Request[Question]) -> bool:
        """The full solve from the standing configuration for every method whose drawn answer is not already the
        rested one to this question, abandoned between chunks if its question changes; True if drawn (False too
        when no method needed it)."""
        started = time.perf_counter()
        question = request.inputs
        choices = {
            key: choice
            for key, choice in self._choices(question).items()
            if self._rested.get(key) != answer_inputs(question, key)
        }
        if not choices:
            return False
        iterations = self.solver.full_iterations
        result = self.solver.solve(
            request.inputs.p,
            list(choices.values()),
            None,
            iterations,
            current=lambda: self.gate.is_current(request.generation),
        )
        if result is None:
            self.abandoned += 1
            return False
        return self._publish(request, choices, result, RESTED, iterations, started)

    def _publish(self, request, choices: dict[str, Choice], result, phase: str, iterations: int, started):
        keys = list(choices)
        for i, key in enumerate(keys):
            self._previous[key] = result.q[i]
        question = request.inputs
        solved = self.solver.answers(keys, list(choices.values()), result, phase, iterations, started)
        versions = dict(question.versions)
        answers = {key: dataclasses.replace(answer, snapshot=versions.get(key)) for key, answer in solved.items()}
        drawn = BodyAnswers(question, answers)
        if not self.gate.publish(request.generation, lambda: self._draw(drawn)):
            return False
        self._drawn_goal = question.p
        for key in keys:
            if phase == RESTED:
                self._rested[key] = answer_inputs(question, key)
            else:
                self._rested.pop(key, None)
        return True

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
