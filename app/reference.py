"""The numerical reference (the teacher: a dense yaw grid with 64-step IK plus local refinement) on its own thread.

It costs (grid + refine) IK solves per target, far more than the other methods, so it waits until the target has
rested for ``settle_s`` and its ghost shows a pending state meanwhile. Results go through their own
``GenerationGate``: an answer for a target that has since moved is discarded. Failures are caught, counted and
shown by the ``Supervisor`` under the key ``"reference"``, apart from the fast methods'.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from app.generations import GenerationGate, Request
from app.inference import Chooser, GraspSolver, MethodResult
from app.question import Place
from app.supervision import Supervisor
from learning.baselines import ik_layer, teacher


def teacher_chooser(solver: GraspSolver) -> Chooser:
    b, kin = solver.cfg.baselines, solver.kinematics
    ik = ik_layer(kin, b.teacher_ik_iterations)
    return lambda p, q0: (
        teacher(ik, p, q0, b.teacher_yaws, b.teacher_refine_yaws, solver.cfg.weights, solver.penalty).yaw
    )


class ReferenceWorker:
    """One thread answering the newest ``(p, q0)`` of ``gate`` with the teacher's yaw.

    Args:
        gate: requests in, results drawn through it.
        solver: the same IK check as the other methods.
        draw: draws ``(place, result)``; only ever called while ``place`` is current.
        supervisor: catches, counts and shows a failed search or drawing; the worker keeps serving.
        settle_s: quiet time the target must rest before the search starts.
    """

    PART = "reference"

    def __init__(
        self,
        gate: GenerationGate[Place],
        solver: GraspSolver,
        draw: Callable[[Place, MethodResult], None],
        supervisor: Supervisor,
        settle_s: float = 0.6,
    ) -> None:
        self.gate, self.solver, self._draw, self._supervisor = gate, solver, draw, supervisor
        self.settle_s = settle_s
        self._choosers = {"reference": teacher_chooser(solver)}
        self._thread = threading.Thread(target=self._run, name="reference", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while (request := self.gate.take()) is not None:
            if self.gate.wait_newer(request.generation, self.settle_s):
                continue  # the target moved on (or the gate closed): take the newer one
            with self._supervisor.guard(self.PART, f"the search for target {request.inputs[0]}"):
                self.handle(request)

    def handle(self, request: Request[Place]) -> bool:
        """Search and draw if still current; True if drawn. Raises what the search or the drawing raises."""
        p, q0 = request.inputs
        result = self.solver.solve(p, q0, self._choosers)["reference"]
        return self.gate.publish(request.generation, lambda: self._draw(request.inputs, result))

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
