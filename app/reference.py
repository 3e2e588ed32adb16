"""The numerical reference (the teacher: a dense yaw grid with 64-step IK plus local refinement) on its own thread.

It costs (grid + refine) IK solves per target, far more than the other methods, so it waits until the target has
rested for ``settle_s`` and its ghost shows a pending state meanwhile. Results go through their own
``GenerationGate``: an answer for a target that has since moved is discarded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from app.generations import GenerationGate, Request
from app.inference import Chooser, GraspSolver, MethodResult
from learning.baselines import ik_layer, teacher

ReferenceInputs = tuple[tuple[float, float, float], tuple[float, ...]]  # (p, q0)


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
        draw: draws ``(inputs, result)``; only ever called while ``inputs`` are current.
        on_error: called with a message when a request fails.
        settle_s: quiet time the target must rest before the search starts.
    """

    def __init__(
        self,
        gate: GenerationGate[ReferenceInputs],
        solver: GraspSolver,
        draw: Callable[[ReferenceInputs, MethodResult], None],
        on_error: Callable[[str], None],
        settle_s: float = 0.6,
    ) -> None:
        self.gate, self.solver, self._draw, self._on_error = gate, solver, draw, on_error
        self.settle_s = settle_s
        self._choosers = {"reference": teacher_chooser(solver)}
        self._thread = threading.Thread(target=self._run, name="reference", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while (request := self.gate.take()) is not None:
            if self.gate.wait_newer(request.generation, self.settle_s):
                continue  # the target moved on (or the gate closed): take the newer one
            self.handle(request)

    def handle(self, request: Request[ReferenceInputs]) -> bool:
        p, q0 = request.inputs
        try:
            result = self.solver.solve(p, q0, self._choosers)["reference"]
        except Exception as exc:  # noqa: BLE001 - reported in the page; the worker keeps serving
            self._on_error(f"reference search failed for target {p}: {type(exc).__name__}: {exc}")
            return False
        return self.gate.publish(request.generation, lambda: self._draw(request.inputs, result))

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
