"""A standing humanoid reaching with its hands: the whole-body problem built from a robot description.

Every contact of the description (its feet) is held at its pose in the seed; the centre of mass stays inside the
support polygon of their sole corners; joint limits hold; the first level moves the hands (frame tasks); the
second keeps the rest of the body near the reference posture. The robot comes as data (any object with the
``StandingRobot`` fields, such as ``assets.G1``): nothing here names a robot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from kinematics.errors import ConfigError
from kinematics.model import KinematicTree
from kinematics.wholebody.constraints.constraint import Constraint
from kinematics.wholebody.constraints.contact import Contact
from kinematics.wholebody.constraints.limits import ConfigurationLimit, StepLimit
from kinematics.wholebody.constraints.support_polygon import ComInSupportPolygon
from kinematics.wholebody.layer import WholeBodyIKCfg, WholeBodyIKLayer
from kinematics.wholebody.tasks.frame import FrameTask
from kinematics.wholebody.tasks.posture import PostureTask


class Sole(Protocol):
    """A foot: its link and the corners of its sole in that link's frame (metres)."""

    link: str
    corners: Sequence[Sequence[float]]


class StandingRobot(Protocol):
    """What a standing problem reads of a robot description: its name, named frames (role -> link), its feet by
    role, its reference posture by joint name and the base height at which it stands in that posture."""

    name: str
    frames: Mapping[str, str]
    contacts: Mapping[str, Sole]
    standing_base_height: float | None

    @property
    def posture(self) -> Mapping[str, float]: ...


@dataclass(frozen=True)
class Stance:
    """What standing keeps, whatever the hands do: each foot held where it stands in ``q_stand`` (``contacts``), the
    centre of mass ``polygon``'s margin inside their support polygon (built once per solve from the contacts'
    anchors), the joint and step ``limits``, and the ``posture`` task that keeps the rest of the body near the
    reference posture (the lowest level's)."""

    q_stand: torch.Tensor
    contacts: tuple[Contact, ...]
    polygon: ComInSupportPolygon
    limits: tuple[Constraint, ...]
    posture: PostureTask

    def constraints(self, balance: bool = True) -> list[Constraint]:
        """The constraints of every level: contacts, the support polygon (unless ``balance`` is off), limits."""
        return [*self.contacts, *((self.polygon,) if balance else ()), *self.limits]

    def fixed_targets(self, tree: KinematicTree) -> dict[str, torch.Tensor]:
        """The targets that do not move: each contact's anchor (its foot's pose in ``q_stand``) and the posture's
        (the joints of ``q_stand``), under the names of the contacts and the posture task."""
        state = tree.forward_kinematics(self.q_stand)
        fixed = {contact.name: tree.frame_pose(state, contact.frame) for contact in self.contacts}
        fixed[self.posture.name] = self.q_stand[tree.base_nq :].clone()
        return fixed


@dataclass(frozen=True)
class StandingProblem:
    """The layer, the standing configuration ``q_stand`` ``(nq,)`` and the targets that hold the feet where they
    stand and the posture at the reference (add each hand's target under its role's name)."""

    layer: WholeBodyIKLayer
    q_stand: torch.Tensor
    fixed_targets: dict[str, torch.Tensor]


def standing_configuration(tree: KinematicTree, robot: StandingRobot) -> torch.Tensor:
    """``(nq,)``: the base at the description's standing height, the joints at its reference posture."""
    if not tree.floating_base or robot.standing_base_height is None:
        raise ConfigError(f"{robot.name} is not a standing robot (no floating base or standing height)")
    q = tree.neutral()
    q[2] = robot.standing_base_height
    posture = robot.posture
    q[tree.base_nq :] = torch.tensor([posture[name] for name in tree.joint_names], dtype=q.dtype, device=q.device)
    return q


def stance(
    tree: KinematicTree,
    robot: StandingRobot,
    margin: float = 0.02,
    max_step: float = 0.1,
    posture_cost: float = 1e-2,
    posture_gain: float = 0.5,
) -> Stance:
    """The stance of ``robot`` standing in its reference posture: every contact of the description held, the CoM
    ``margin`` m inside their support polygon, joint limits, every step coordinate within ``max_step`` (rad or m:
    a trust region that keeps each linearised step close to what the robot does, so a held foot does not drift
    when a hand pulls towards a target out of reach) and the posture task."""
    return Stance(
        q_stand=standing_configuration(tree, robot),
        contacts=tuple(Contact(role, contact.link) for role, contact in robot.contacts.items()),
        polygon=ComInSupportPolygon(
            {c.link: c.corners for c in robot.contacts.values()},
            margin=margin,
            anchors={c.link: role for role, c in robot.contacts.items()},
        ),
        limits=(ConfigurationLimit(), StepLimit(max_step)),
        posture=PostureTask(tree, cost=posture_cost, gain=posture_gain),
    )


def standing_problem(
    tree: KinematicTree,
    robot: StandingRobot,
    hands: Sequence[str] = ("right_hand",),
    margin: float = 0.02,
    hand_position_cost: float = 1.0,
    hand_orientation_cost: float = 0.0,
    posture_cost: float = 1e-2,
    hand_gain: float = 0.5,
    posture_gain: float = 0.5,
    max_step: float = 0.1,
    extra_constraints: Sequence[Constraint] = (),
    cfg: WholeBodyIKCfg | None = None,
) -> StandingProblem:
    """The hands' frame tasks (by role in ``robot.frames``) on level 1, the posture on level 2, over the ``stance``
    (both feet held, the CoM inside the support polygon, limits). Gains below 1 damp the cycling that a constraint
    toggling between active and inactive causes at full gain."""
    hand_tasks = [
        FrameTask(
            role,
            robot.frames[role],
            position_cost=hand_position_cost,
            orientation_cost=hand_orientation_cost,
            kind="position" if hand_orientation_cost == 0 else "pose",
            gain=hand_gain,
        )
        for role in hands
    ]
    standing = stance(tree, robot, margin, max_step, posture_cost, posture_gain)
    layer = WholeBodyIKLayer(tree, [hand_tasks, [standing.posture]], [*standing.constraints(), *extra_constraints], cfg)
    return StandingProblem(layer, standing.q_stand, standing.fixed_targets(tree))
