"""The counterweight task's whole-body problem: a standing humanoid holds a payload in its reaching hand.

Constraints at every level: both feet held (contacts), the centre of mass ``margin`` m inside the support polygon
of the soles (hard), joint limits (hard) and a step limit. Level 1 holds the *body tasks*, whose targets the
policy sets: the pelvis pose, the torso orientation and the free hand's position. Level 2 brings the reaching
hand to the goal (position), with a light posture term. The body level is above the reach, so with the body
tasks at their rest targets the motion is the reaching arm's alone; it fails where the payload would carry the
centre of mass past the toes or the heels. Three layers share the tree:

- ``body``: the problem above (the policy's, and the rest targets' "reach only");
- ``no_balance``: the same without the polygon constraint (an upper bound: what balance costs);
- ``free``: the body tasks removed (the whole body free under the same constraints: the per-goal whole-body
  solver's own answer).

A policy sets the body targets in one of two parameterisations (``BODY_PARAMETERISATIONS``):

- ``"r9"`` (the paper's): an offset ``(..., 18)`` added to the rest targets' R^9 coordinates
  (``kinematics.lie.r9``): the pelvis pose (translation, then the rotation's first two columns: 9), the torso
  orientation (its rotation's first two columns: 6; the task has no position rows) and the free hand's position
  (3), all in the world frame, then mapped to SE(3) by Gram-Schmidt. Each 3-vector block of the offset is at most
  ``CounterweightCfg.offset_bound`` long (``bound_offsets``).
- ``"axes"`` (an ablation): an action ``(..., 7)`` in ``[-1, 1]`` on hand-chosen axes: the free hand moved by
  ``(dx, dy, dz)``, the pelvis moved by ``(dx, dz)`` and pitched, the torso pitched (scales in
  ``CounterweightCfg.action_scale``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from assets import RobotDescription
from kinematics.lie import make_transform, r9_to_se3, se3_to_r9, so3_exp
from kinematics.model import KinematicTree, describe_tree, with_payload
from kinematics.wholebody import FrameTask, WholeBodyIKCfg, WholeBodyIKLayer, WholeBodyIKResult, stance
from learning.counterweight.config import CounterweightCfg

BODY_TASKS = ("pelvis", "torso", "left_hand")
# the R^9 offset's blocks: (task, slice of the offset, slice of that task's R^9 coordinates)
R9_BLOCKS = (
    ("pelvis", slice(0, 9), slice(0, 9)),
    ("torso", slice(9, 15), slice(3, 9)),
    ("left_hand", slice(15, 18), slice(0, 3)),
)
R9_SIZE = 18
AXES = ("free hand dx", "free hand dy", "free hand dz", "pelvis dx", "pelvis dz", "pelvis pitch", "torso pitch")
BODY_PARAMETERISATIONS = {"r9": R9_SIZE, "axes": len(AXES)}
HAND = "right_hand"
LIMIT_TOLERANCE = 1e-6  # rad: a joint this far past its limit still counts as within it (the solver's rounding)


def bound_offsets(raw: torch.Tensor, bound: float) -> torch.Tensor:
    """Each 3-vector block of ``raw`` ``(..., 3k)`` squashed radially to a length below ``bound``:
    ``v -> bound tanh(|v| / bound) v / |v|`` (the identity to first order at zero, smooth everywhere)."""
    blocks = raw.unflatten(-1, (-1, 3))
    length = blocks.norm(dim=-1, keepdim=True)
    safe = torch.where(length > 1e-9, length, torch.ones_like(length))
    scale = torch.where(length > 1e-9, bound * torch.tanh(safe / bound) / safe, torch.ones_like(length))
    return (blocks * scale).flatten(-2)


@dataclass(frozen=True)
class Outcome:
    """Per goal: ``success`` (``reached`` and ``balanced``), ``reached`` (hand within tolerance, feet held, joint
    limits), ``balanced`` (the CoM's ground projection inside the polygon shrunk by the margin), ``hand_error``
    (m), ``balance_margin`` (m: how far inside the support polygon the CoM's ground projection lies, negative
    outside), ``feet_error`` (m or rad, the larger foot's), ``limit_violation`` (rad)."""

    success: torch.Tensor
    reached: torch.Tensor
    balanced: torch.Tensor
    hand_error: torch.Tensor
    balance_margin: torch.Tensor
    feet_error: torch.Tensor
    limit_violation: torch.Tensor


class CounterweightProblem:
    """The tree with its payload, the standing configuration, the three layers and the rest targets."""

    def __init__(self, robot: RobotDescription, cfg: CounterweightCfg, dtype: torch.dtype = torch.float32) -> None:
        self.robot, self.cfg = robot, cfg
        hand_link = robot.frames[HAND]
        description = with_payload(describe_tree(robot.urdf_text()), hand_link, cfg.payload_kg, cfg.payload_point)
        self.tree = tree = KinematicTree(description, floating_base=True, dtype=dtype)
        standing = stance(tree, robot, margin=cfg.margin, max_step=cfg.max_step, posture_gain=cfg.gain)
        self.q_stand, self.contacts, self.polygon = standing.q_stand, standing.contacts, standing.polygon
        gain = cfg.gain
        body = [
            FrameTask("pelvis", robot.frames["pelvis"], kind="pose", gain=gain),
            FrameTask("torso", robot.frames["torso"], kind="orientation", gain=gain),
            FrameTask("left_hand", robot.frames["left_hand"], kind="position", gain=gain),
        ]
        reach = [FrameTask(HAND, hand_link, kind="position", gain=gain), standing.posture]
        solver = WholeBodyIKCfg(iterations=cfg.iterations, position_tolerance=cfg.tolerance, gradient=cfg.gradient)
        self.layers = {
            "body": WholeBodyIKLayer(tree, [body, reach], standing.constraints(), solver),
            "no_balance": WholeBodyIKLayer(tree, [body, reach], standing.constraints(balance=False), solver),
            "free": WholeBodyIKLayer(tree, [reach], standing.constraints(), solver),
        }
        self.fixed = standing.fixed_targets(tree)
        state = tree.forward_kinematics(self.q_stand)
        self.rest = {name: tree.frame_pose(state, robot.frames[name]) for name in BODY_TASKS}
        self.rest_r9 = {name: se3_to_r9(pose) for name, pose in self.rest.items()}
        self.hand_rest = self.rest_pose(HAND)[:3, 3]
        self.shoulder = tree.frame_pose(state, robot.frames["right_shoulder"])[:3, 3]
        self.scale = torch.tensor(cfg.action_scale, dtype=dtype)

    def rest_pose(self, role: str) -> torch.Tensor:
        return self.tree.frame_pose(self.q_stand, self.robot.frames[role])

    def body_targets(self, outputs: torch.Tensor, parameterisation: str = "r9") -> dict[str, torch.Tensor]:
        """The body tasks' targets ``(..., 4, 4)`` from a policy's outputs (differentiable): an R^9 offset
        ``(..., 18)`` (already bounded) or, for ``"axes"``, an action ``(..., 7)`` in ``[-1, 1]``."""
        if parameterisation == "axes":
            return self._axes_targets(outputs)
        coordinates = {}
        for name, offset_slice, r9_slice in R9_BLOCKS:
            x = self.rest_r9[name].to(outputs).expand(*outputs.shape[:-1], 9).clone()
            x[..., r9_slice] = x[..., r9_slice] + outputs[..., offset_slice]
            coordinates[name] = x
        return {name: r9_to_se3(x) for name, x in coordinates.items()}

    def _axes_targets(self, actions: torch.Tensor) -> dict[str, torch.Tensor]:
        a = actions * self.scale.to(actions.device)
        zero = torch.zeros_like(a[..., 0])
        pitch = lambda angle: so3_exp(torch.stack((zero, angle, zero), -1))  # noqa: E731  about world y
        pelvis, torso, hand = (self.rest[name].to(actions.device) for name in BODY_TASKS)
        pelvis_position = pelvis[:3, 3] + torch.stack((a[..., 3], zero, a[..., 4]), -1)
        return {
            "pelvis": make_transform(pitch(a[..., 5]) @ pelvis[:3, :3], pelvis_position),
            "torso": make_transform(pitch(a[..., 6]) @ torso[:3, :3], torso[:3, 3].expand_as(pelvis_position)),
            "left_hand": make_transform(hand[:3, :3].expand(*a.shape[:-1], 3, 3), hand[:3, 3] + a[..., :3]),
        }

    def targets(
        self, goals: torch.Tensor, outputs: torch.Tensor | None, layer: str, parameterisation: str = "r9"
    ) -> dict[str, torch.Tensor]:
        """Every target of ``layer`` for goals ``(B, 3)``: the body's from ``outputs`` (rest where ``None``)."""
        hand = make_transform(torch.eye(3, dtype=goals.dtype, device=goals.device).expand(len(goals), 3, 3), goals)
        out = {**self.fixed, HAND: hand}
        if layer != "free":
            if outputs is None:
                out.update({name: pose.to(goals).expand(len(goals), 4, 4) for name, pose in self.rest.items()})
            else:
                out.update(self.body_targets(outputs, parameterisation))
        return out

    def solve(
        self,
        goals: torch.Tensor,
        outputs: torch.Tensor | None = None,
        layer: str = "body",
        parameterisation: str = "r9",
    ) -> WholeBodyIKResult:
        """The whole-body solve from the standing configuration for goals ``(B, 3)``."""
        return self.layers[layer].solve(self.targets(goals, outputs, layer, parameterisation), self.q_stand)

    def outcome(self, result: WholeBodyIKResult) -> Outcome:
        tree = self.tree
        state = tree.forward_kinematics(result.q)
        normal, offset, edge = self.polygon.edges(tree, state)
        com = tree.center_of_mass(state)[..., :2]
        inside = torch.where(edge, offset - (normal * com[..., None, :]).sum(-1), torch.inf).amin(-1)
        feet = torch.stack([result.violations[c.name] for c in self.contacts]).amax(0)
        limits = result.violations["joint_limits"]
        hand_error = result.residuals[HAND].norm(dim=-1)
        reached = (hand_error <= self.cfg.tolerance) & (feet <= self.cfg.feet_tolerance) & (limits <= LIMIT_TOLERANCE)
        balanced = inside >= self.cfg.margin - self.cfg.feet_tolerance
        return Outcome(reached & balanced, reached, balanced, hand_error, inside, feet, limits)
