"""The counterweight task's whole-body problem: a standing humanoid holds a payload in its reaching hand.

Constraints at every level: both feet held (contacts), the centre of mass ``margin`` m inside the support polygon
of the soles (hard), joint limits (hard) and a step limit. Level 1 holds the *body tasks*, whose targets the
policy sets: the pelvis pose, the torso orientation and the free hand's position. Level 2 brings the reaching
hand to the goal (position), with a light posture term. The body level is above the reach, so with the body
tasks at their rest targets the motion is the reaching arm's alone; it fails where the payload would carry the
centre of mass past the toes. Three layers share the tree:

- ``body``: the problem above (the policy's, and the rest targets' "reach only");
- ``no_balance``: the same without the polygon constraint (an upper bound: what balance costs);
- ``free``: the body tasks removed (the whole body free under the same constraints: the per-goal whole-body
  solver's own answer).

An *action* ``(..., 7)`` in ``[-1, 1]`` sets the body targets: the free hand moved by ``(dx, dy, dz)``, the
pelvis moved by ``(dx, dz)`` and pitched, the torso pitched (world axes; scales in ``CounterweightCfg``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from assets import RobotDescription
from kinematics.payload import with_payload
from kinematics.rotations import make_transform, so3_exp
from kinematics.tree import KinematicTree
from kinematics.urdf_tree import describe_tree
from kinematics.wholebody import (
    FrameTask,
    PostureTask,
    WholeBodyIKCfg,
    WholeBodyIKLayer,
    WholeBodyIKResult,
    standing_configuration,
)
from kinematics.wholebody.contact import Contact
from kinematics.wholebody.limits import ConfigurationLimit, StepLimit
from kinematics.wholebody.support_polygon import ComInSupportPolygon
from learning.counterweight.config import CounterweightCfg

BODY_TASKS = ("pelvis", "torso", "left_hand")
ACTIONS = ("free hand dx", "free hand dy", "free hand dz", "pelvis dx", "pelvis dz", "pelvis pitch", "torso pitch")
LAYERS = ("body", "no_balance", "free")
HAND = "right_hand"


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
        self.q_stand = standing_configuration(tree, robot)
        self.contacts = [Contact(role, contact.link) for role, contact in robot.contacts.items()]
        self.polygon = ComInSupportPolygon({c.link: c.corners for c in robot.contacts.values()}, margin=cfg.margin)
        gain = cfg.gain
        body = [
            FrameTask("pelvis", robot.frames["pelvis"], kind="pose", gain=gain),
            FrameTask("torso", robot.frames["torso"], kind="orientation", gain=gain),
            FrameTask("left_hand", robot.frames["left_hand"], kind="position", gain=gain),
        ]
        reach = [FrameTask(HAND, hand_link, kind="position", gain=gain), PostureTask(tree, cost=1e-2, gain=gain)]
        limits = [ConfigurationLimit(), StepLimit(cfg.max_step)]
        solver = WholeBodyIKCfg(iterations=cfg.iterations, position_tolerance=cfg.tolerance, gradient=cfg.gradient)
        self.layers = {
            "body": WholeBodyIKLayer(tree, [body, reach], [*self.contacts, self.polygon, *limits], solver),
            "no_balance": WholeBodyIKLayer(tree, [body, reach], [*self.contacts, *limits], solver),
            "free": WholeBodyIKLayer(tree, [reach], [*self.contacts, self.polygon, *limits], solver),
        }
        state = tree.forward_kinematics(self.q_stand)
        self.fixed = {c.name: tree.frame_pose(state, c.frame) for c in self.contacts}
        self.fixed["posture"] = self.q_stand[tree.base_nq :].clone()
        self.rest = {name: tree.frame_pose(state, robot.frames[name]) for name in BODY_TASKS}
        self.hand_rest = self.rest_pose(HAND)[:3, 3]
        self.shoulder = tree.frame_pose(state, robot.frames["right_shoulder"])[:3, 3]
        self.scale = torch.tensor(cfg.action_scale, dtype=dtype)

    def rest_pose(self, role: str) -> torch.Tensor:
        return self.tree.frame_pose(self.q_stand, self.robot.frames[role])

    def body_targets(self, actions: torch.Tensor) -> dict[str, torch.Tensor]:
        """The body tasks' targets ``(..., 4, 4)`` for actions ``(..., 7)`` in ``[-1, 1]`` (differentiable)."""
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

    def targets(self, goals: torch.Tensor, actions: torch.Tensor | None, layer: str) -> dict[str, torch.Tensor]:
        """Every target of ``layer`` for goals ``(B, 3)``: the body's from ``actions`` (rest where ``None``)."""
        hand = make_transform(torch.eye(3, dtype=goals.dtype, device=goals.device).expand(len(goals), 3, 3), goals)
        out = {**self.fixed, HAND: hand}
        if layer != "free":
            if actions is None:
                actions = goals.new_zeros(len(goals), len(ACTIONS))
            out.update(self.body_targets(actions))
        return out

    def solve(self, goals: torch.Tensor, actions: torch.Tensor | None = None, layer: str = "body") -> WholeBodyIKResult:
        """The whole-body solve from the standing configuration for goals ``(B, 3)``."""
        return self.layers[layer].solve(self.targets(goals, actions, layer), self.q_stand)

    def outcome(self, result: WholeBodyIKResult) -> Outcome:
        tree = self.tree
        state = tree.forward_kinematics(result.q)
        normal, offset, edge = self.polygon.edges(tree, state)
        com = tree.center_of_mass(state)[..., :2]
        inside = torch.where(edge, offset - (normal * com[..., None, :]).sum(-1), torch.inf).amin(-1)
        feet = torch.stack([result.violations[c.name] for c in self.contacts]).amax(0)
        limits = result.violations["joint_limits"]
        hand_error = result.residuals[HAND].norm(dim=-1)
        reached = (hand_error <= self.cfg.tolerance) & (feet <= self.cfg.feet_tolerance) & (limits <= 1e-6)
        balanced = inside >= self.cfg.margin - self.cfg.feet_tolerance
        return Outcome(reached & balanced, reached, balanced, hand_error, inside, feet, limits)
