"""The per-goal optimisation (the experiment's reference: each goal's own R^9 offset, optimised through the layer)
on a thread of its own, once the goal has rested.

It costs seconds, so it starts only after the goal has rested ``settle_s``, and its answer is drawn through the
board's search gate: one computed for a goal that has since moved is discarded. The optimisation is abandoned
between its steps once its goal has moved on (``optimise_offsets``'s ``should_stop``), the full solve after it
between chunks. Failures are caught, counted and shown by the ``Supervisor`` under ``PART``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from app.counterweight.answers import ONLINE, RESTED, BodyAnswer, BodySolver
from app.shell.busy import BusySignal
from app.shell.generations import GenerationGate, Request
from app.shell.question import Place
from app.shell.supervision import Supervisor


class OnlineWorker:
    """One thread answering the newest ``(p, ())`` of ``gate`` with the per-goal optimisation.

    Args:
        gate: requests in, answers drawn through it.
        solver: the worker's own ``BodySolver``.
        draw: draws ``(place, answer)``; only ever called while ``place`` is current.
        supervisor: shows a failed optimisation or drawing; the worker keeps serving.
        settle_s: quiet time the goal must rest before the optimisation starts.
    """

    PART = "per-goal optimisation"

    def __init__(
        self,
        gate: GenerationGate[Place],
        solver: BodySolver,
        draw: Callable[[Place, BodyAnswer], None],
        supervisor: Supervisor,
        settle_s: float = 0.3,
    ) -> None:
        self.gate, self.solver, self._draw, self._supervisor = gate, solver, draw, supervisor
        self.settle_s = settle_s
        self.abandoned = 0  # optimisations skipped or discarded because their goal moved on
        self.signal = BusySignal()  # busy while optimising (the live trainer waits: it goes after)
        self._thread = threading.Thread(target=self._run, name="per-goal optimisation", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while (request := self.gate.take()) is not None:
            if self.gate.wait_newer(request.generation, self.settle_s):
                self.abandoned += 1
                continue
            doing = f"optimising the body for goal {request.inputs[0]}"
            with self.signal.busy(), self._supervisor.guard(self.PART, doing):
                if not self.handle(request):
                    self.abandoned += 1

    def handle(self, request: Request[Place]) -> bool:
        """Optimise, solve, and draw if still current; True if drawn. Raises what the optimisation or the drawing
        raises (``_run`` reports it)."""
        started = time.perf_counter()
        p = request.inputs[0]
        current = lambda: self.gate.is_current(request.generation)  # noqa: E731
        choice = self.solver.optimise(p, should_stop=lambda: not current())
        if choice is None:
            return False
        iterations = self.solver.full_iterations
        result = self.solver.solve(p, [choice], None, iterations, current=current)
        if result is None:
            return False
        answer = self.solver.answers([ONLINE], [choice], result, RESTED, iterations, started)[ONLINE]
        return self.gate.publish(request.generation, lambda: self._draw(request.inputs, answer))

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
