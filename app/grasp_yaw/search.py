"""The search methods (the angular grid, online optimisation, the teacher) on their own thread, off the fast path.

Each costs many IK solves per target, so they run after the fast methods: the worker waits for the inference
worker to be idle before each search. The grid (tens of milliseconds) runs as soon as a target arrives; online
optimisation and the teacher run once the target has rested ``settle_s``. Answers go through the board's search
gate: one computed for a target that has since moved is discarded, and the searches still to come for that target
are abandoned, not queued (the worker takes the newest target instead). Failures are caught, counted and shown by
the ``Supervisor`` under the key ``"search"``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from app.grasp_yaw.inference import GraspSolver, MethodResult
from app.grasp_yaw.methods import SEARCH_KEYS
from app.shell.generations import GenerationGate, Request
from app.shell.question import Place
from app.shell.supervision import Supervisor

IMMEDIATE = ("angular_grid",)  # searches fast enough to run while the target moves


class SearchWorker:
    """One thread answering the newest ``(p, q0)`` of ``gate`` with each search method in turn.

    Args:
        gate: requests in, results drawn through it.
        solver: the same IK check as the other methods; its ``choosers`` hold the experiment's searches.
        draw: draws ``(place, key, result)``; only ever called while ``place`` is current.
        supervisor: catches, counts and shows a failed search or drawing; the worker keeps serving.
        wait_turn: blocks while the fast methods are being answered (they have priority).
        settle_s: quiet time the target must rest before the slow searches start.
    """

    PART = "search"

    def __init__(
        self,
        gate: GenerationGate[Place],
        solver: GraspSolver,
        draw: Callable[[Place, str, MethodResult], None],
        supervisor: Supervisor,
        wait_turn: Callable[[], object] = lambda: None,
        settle_s: float = 0.3,
    ) -> None:
        self.gate, self.solver, self._draw, self._supervisor = gate, solver, draw, supervisor
        self._wait_turn = wait_turn
        self.settle_s = settle_s
        self.abandoned = 0  # searches skipped because their target moved on
        self._thread = threading.Thread(target=self._run, name="search", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while (request := self.gate.take()) is not None:
            rested = False
            for position, key in enumerate(SEARCH_KEYS):
                if key not in IMMEDIATE and not rested:
                    if self.gate.wait_newer(request.generation, self.settle_s):
                        self.abandoned += len(SEARCH_KEYS) - position
                        break  # the target moved on (or the gate closed): take the newer one
                    rested = True
                self._wait_turn()
                if not self.gate.is_current(request.generation):
                    self.abandoned += len(SEARCH_KEYS) - position
                    break
                with self._supervisor.guard(self.PART, f"{key} for target {request.inputs[0]}"):
                    self.handle(request, key)

    def handle(self, request: Request[Place], key: str) -> bool:
        """Run search ``key`` and draw it if still current; True if drawn. Raises what the search or the drawing
        raises (``_run`` reports it)."""
        p, q0 = request.inputs
        result = self.solver.solve(p, q0, {key: self.solver.choosers[key]})[key]
        return self.gate.publish(request.generation, lambda: self._draw(request.inputs, key, result))

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
