"""What each counterweight method does for one reach goal: the G1's whole-body pose and how well it reached and
balanced.

``BodySolver`` is the math. A method's *choice* is the body tasks' targets (the pelvis pose, the torso orientation,
the free hand's position: ``CounterweightProblem.body_targets`` of a policy's outputs, in the policy's own
parameterisation), or None for the rest targets (reach only). Every fast method solves as one batch (a batch of a
few rows costs about what a batch of 1 does: the solve is op overhead). A solve runs in chunks of
``chunk_iterations`` cascade steps, the same steps ``CounterweightProblem.solve`` takes, so a full solve can be
abandoned between chunks when its goal has moved on, and while the goal moves one chunk warm-started from the
previous answer gives a quick *moving* answer; the *rested* one is the full solve from the standing configuration,
what the experiment measures.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.spatial
import torch
from torch import nn

from kinematics.errors import ConfigError
from learning.counterweight.config import ExperimentCfg
from learning.counterweight.experiment import build_problem
from learning.counterweight.online import optimise_offsets
from learning.counterweight.problem import BODY_TASKS, HAND, LIMIT_TOLERANCE

REACH_ONLY, POLICY, ONLINE = "reach_only", "policy", "online"
RACE = "race"  # the live race's zero-order policy (``app.counterweight.race``)
MOVING, RESTED = "moving", "rested"  # a warm-started chunk while the goal moves; the full solve once it rests
FAILURES = ("hand", "margin", "feet", "limits")  # what an answer can miss of the experiment's success
Choice = dict[str, torch.Tensor] | None  # a method's body targets (task -> (4, 4)); None: the rest targets


@dataclass(frozen=True)
class BodyAnswer:
    """One method's whole-body answer to a goal."""

    q: np.ndarray  # (nq,) base xyz, quaternion xyzw, then the joints in ``tree.joint_names`` order
    success: bool  # reached and balanced
    hand_error: float  # m
    balance_margin: float  # m inside the support polygon (negative: outside)
    balanced: bool  # the margin kept (``CounterweightCfg.margin``)
    com_xy: np.ndarray  # (2,) the centre of mass's ground projection, m
    phase: str  # MOVING or RESTED
    iterations: int  # cascade steps behind this pose (warm-started ones count from the previous answer)
    latency_ms: float  # goal in -> this answer (the policy's network included)
    frames: np.ndarray  # (n_frames, 3) every link's origin in ``tree.frame_names`` order, m (the ghost's stick figure)
    payload: np.ndarray  # (3,) the payload's centre in the reaching hand, world frame, m
    # the body targets the method chose, as the ghost draws them (``(4, 4)`` world poses by task; None for reach
    # only): the pelvis pose, the torso's target orientation placed at the solved torso's origin (the task has no
    # position) and the free hand's target position with its target orientation (the rest one)
    targets: dict[str, np.ndarray] | None = None
    snapshot: int | None = None  # the version of the gradient policy's snapshot it answers (None: other methods)
    failed: tuple[str, ...] = ()  # what an unsuccessful answer missed (``FAILURES``' names), in that order


class BodySolver:
    """The counterweight problem of ``cfg`` (its own instance: a ``KinematicTree`` keeps buffers, so each thread
    needs one) and the chunked solve of its ``body`` layer."""

    def __init__(self, cfg: ExperimentCfg, chunk_iterations: int = 2) -> None:
        self.cfg = cfg
        self.problem = build_problem(cfg)
        body = self.problem.layers["body"]
        self.full_iterations = body.cfg.iterations
        if self.full_iterations % chunk_iterations:
            raise ConfigError(
                f"the solve's {self.full_iterations} iterations are not a whole number of {chunk_iterations}-step "
                "chunks; choose a chunk size that divides them"
            )
        self.chunk_iterations = chunk_iterations
        self._body = body
        self.dtype = self.problem.tree.joint_lower.dtype
        self._torso = self.problem.robot.frames["torso"]
        self._hand = self.problem.robot.frames[HAND]

    def goal_tensor(self, p: tuple[float, ...], rows: int) -> torch.Tensor:
        return torch.tensor([p], dtype=self.dtype).expand(rows, 3)

    def choices(self, p: tuple[float, ...], policies: Mapping[str, nn.Module]) -> dict[str, Choice]:
        """Reach only's choice (the rest targets) and each policy's body targets for ``p``, by method key, reach
        only first, then ``policies`` in their order."""
        goal = self.goal_tensor(p, 1)
        out: dict[str, Choice] = {REACH_ONLY: None}
        with torch.no_grad():
            for key, policy in policies.items():
                targets = self.problem.body_targets(policy(goal), policy.parameterisation)
                out[key] = {name: pose[0] for name, pose in targets.items()}
        return out

    def solve(
        self,
        p: tuple[float, ...],
        choices: Sequence[Choice],
        seed: torch.Tensor | None,
        iterations: int,
        current: Callable[[], bool] = lambda: True,
    ):
        """``iterations`` cascade steps for goal ``p``, one row per choice, from ``seed`` ``(B, nq)`` (None: the
        standing configuration); the ``WholeBodyIKResult``, or None if ``current()`` turned false between chunks."""
        problem = self.problem
        goals = self.goal_tensor(p, len(choices))
        body = {
            name: torch.stack([problem.rest[name] if c is None else c[name] for c in choices]) for name in BODY_TASKS
        }
        targets = problem.targets(goals, None, "body") | body
        q = problem.q_stand.expand(len(choices), -1) if seed is None else seed
        result = None
        with torch.no_grad():
            for _ in range(iterations // self.chunk_iterations):
                if not current():
                    return None
                result = self._body.solve(targets, q, iterations=self.chunk_iterations)
                q = result.q
        return result

    def optimise(self, p: tuple[float, ...], should_stop: Callable[[], bool] = lambda: False) -> Choice:
        """The per-goal optimisation's body targets for ``p`` (its R^9 offset: the experiment's reference, seconds);
        None if ``should_stop()`` turned true between its steps."""
        cfg = self.cfg
        goal = self.goal_tensor(p, 1)
        with torch.enable_grad():
            offsets = optimise_offsets(self.problem, goal, cfg.baselines, cfg.train.output_penalty, should_stop)
        if offsets is None:
            return None
        with torch.no_grad():
            return {name: pose[0] for name, pose in self.problem.body_targets(offsets, "r9").items()}

    def answers(
        self, keys: Sequence[str], choices: Sequence[Choice], result, phase: str, iterations: int, started: float
    ) -> dict[str, BodyAnswer]:
        """The solved rows as answers, by key (row ``i`` of ``result`` is ``keys[i]``'s, chosen by
        ``choices[i]``)."""
        problem, tree, cfg = self.problem, self.problem.tree, self.problem.cfg
        with torch.no_grad():
            state = tree.forward_kinematics(result.q)
            outcome = problem.outcome(result)
            com = tree.center_of_mass(state)[..., :2]
            frames = tree.frame_poses(state)[..., :3, 3]
            torso = tree.frame_pose(state, self._torso)[..., :3, 3]
            payload = self._payload(state)
        latency_ms = 1e3 * (time.perf_counter() - started)
        out = {}
        for i, (key, choice) in enumerate(zip(keys, choices, strict=True)):
            drawn = None
            if choice is not None:
                drawn = {name: pose.double().numpy().copy() for name, pose in choice.items()}
                drawn["torso"][:3, 3] = torso[i].double().numpy()
            missed = (
                not bool(outcome.hand_error[i] <= cfg.tolerance),
                not bool(outcome.balanced[i]),
                not bool(outcome.feet_error[i] <= cfg.feet_tolerance),
                not bool(outcome.limit_violation[i] <= LIMIT_TOLERANCE),
            )
            out[key] = BodyAnswer(
                q=result.q[i].double().numpy(),
                success=bool(outcome.success[i]),
                hand_error=float(outcome.hand_error[i]),
                balance_margin=float(outcome.balance_margin[i]),
                balanced=bool(outcome.balanced[i]),
                com_xy=com[i].double().numpy(),
                phase=phase,
                iterations=iterations,
                latency_ms=latency_ms,
                frames=frames[i].double().numpy(),
                payload=payload[i].double().numpy(),
                targets=drawn,
                failed=tuple(name for name, miss in zip(FAILURES, missed, strict=True) if miss),
            )
        return out

    def standing_payload(self) -> np.ndarray:
        """``(3,)`` the payload's centre at the standing configuration (the solid robot's hand), world frame, m."""
        problem = self.problem
        with torch.no_grad():
            return self._payload(problem.tree.forward_kinematics(problem.q_stand)).double().numpy()

    def _payload(self, state) -> torch.Tensor:
        """``(..., 3)`` the payload's centre (``CounterweightCfg.payload_point`` in the hand's frame) in ``state``."""
        hand = self.problem.tree.frame_pose(state, self._hand)
        point = torch.tensor(self.problem.cfg.payload_point, dtype=hand.dtype)
        return hand[..., :3, :3] @ point + hand[..., :3, 3]

    def support_polygon_xy(self) -> np.ndarray:
        """``(k, 2)`` the hull of the sole corners at the standing configuration (the feet are held), in order."""
        problem = self.problem
        with torch.no_grad():
            corners = problem.polygon.corners_xy(problem.tree, problem.tree.forward_kinematics(problem.q_stand))
        return convex_hull(corners.double().numpy())


def convex_hull(points: np.ndarray) -> np.ndarray:
    """``(h, 2)`` the convex hull's vertices of ``points`` ``(n, 2)``, counter-clockwise (scipy's Qhull; the layer's
    own hull, ``kinematics.wholebody.constraints.support_polygon``, gives the edges' normals and offsets, not an outline)."""
    points = np.asarray(points, dtype=float)
    return points[scipy.spatial.ConvexHull(points).vertices]
