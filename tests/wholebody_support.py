"""The G1 layers and targets the whole-body kernel tests share: a layer with every kind of task and constraint the
compiled step's plan encodes, and targets for it at random reaches."""

from __future__ import annotations

import torch

import assets
from kinematics import KinematicTree
from kinematics.wholebody import (
    ComInSupportPolygon,
    ComTask,
    ConfigurationLimit,
    Contact,
    FrameTask,
    PostureTask,
    RelativeFrameTask,
    StepLimit,
    WholeBodyIKCfg,
    WholeBodyIKLayer,
    standing_problem,
)

G1 = assets.G1
HAND, LEFT_HAND = G1.frames["right_hand"], G1.frames["left_hand"]
HEAD = "head_link"  # fixed to the torso: its pose in the right hand's frame is the relative frame task's


def tree_of(dtype: torch.dtype) -> KinematicTree:
    return KinematicTree.from_urdf(G1.urdf_text(), floating_base=True, dtype=dtype)


def every_kind_layer(tree: KinematicTree, cfg: WholeBodyIKCfg | None = None, relative: bool = True) -> WholeBodyIKLayer:
    """Four levels with every task and constraint the plan encodes, zero-cost rows among them (three without the
    relative frame task's level: ``relative=False``; its targets then leave out ``"head"``)."""
    soles = {c.link: c.corners for c in G1.contacts.values()}
    anchors = {c.link: role for role, c in G1.contacts.items()}
    max_step = torch.full((tree.nv,), 0.1, dtype=torch.float64)
    max_step[:6] = 0.05
    constraints = [
        *(Contact(role, c.link) for role, c in G1.contacts.items()),
        ComInSupportPolygon(soles, margin=0.02, anchors=anchors),
        ConfigurationLimit(gain=0.8),
        StepLimit(max_step),
    ]
    levels = [
        [FrameTask("right_hand", HAND, position_cost=[1.0, 1.0, 0.5], orientation_cost=[0.2, 0.0, 0.2], gain=0.7)],
        [FrameTask("left_hand", LEFT_HAND, kind="position", gain=0.5), ComTask(cost=[0.3, 0.3, 0.0], gain=0.5)],
        *(
            [[RelativeFrameTask("head", HEAD, HAND, position_cost=[0.5, 0.5, 0.2], orientation_cost=[0.1, 0.0, 0.1])]]
            if relative
            else []
        ),
        [PostureTask(tree, cost=[0.0 if i % 7 == 0 else 1e-2 for i in range(len(tree.joint_names))], gain=0.5)],
    ]
    return WholeBodyIKLayer(tree, levels, constraints, cfg)


def every_kind_targets(tree: KinematicTree, batch: int, seed: int, reach: float = 0.25):
    """Targets for ``every_kind_layer`` at ``batch`` rows: the feet where they stand, the hands, the head in the right
    hand's frame and the CoM moved at random (by up to ``reach`` m: some out of reach), the posture at the
    reference."""
    generator = torch.Generator().manual_seed(seed)
    q_stand = standing_problem(tree, G1).q_stand
    state = tree.forward_kinematics(q_stand)
    out = {role: tree.frame_pose(state, c.link).expand(batch, 4, 4) for role, c in G1.contacts.items()}
    for name, frame in (("right_hand", HAND), ("left_hand", LEFT_HAND)):
        T = tree.frame_pose(state, frame).expand(batch, 4, 4).clone()
        T[:, :3, 3] += reach * (2 * torch.rand(batch, 3, generator=generator, dtype=torch.float64) - 1).to(T.dtype)
        out[name] = T
    out["com"] = tree.center_of_mass(state) + 0.05 * torch.randn(batch, 3, generator=generator).to(q_stand.dtype)
    out["posture"] = q_stand[tree.base_nq :].expand(batch, -1)
    seed_q = q_stand.expand(batch, -1).clone()
    seed_q[:, 7:] += 0.05 * torch.randn(batch, tree.nv - 6, generator=generator).to(q_stand.dtype)
    head = RelativeFrameTask.relative_pose(tree, state, HEAD, HAND).expand(batch, 4, 4).clone()
    head[:, :3, 3] += reach * (2 * torch.rand(batch, 3, generator=generator, dtype=torch.float64) - 1).to(head.dtype)
    out["head"] = head
    return out, seed_q
