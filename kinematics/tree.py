"""A URDF kinematic tree with an optional floating base: every link's pose, frame Jacobians, the centre of mass
and its Jacobian, batched and differentiable in torch.

Conventions (Pinocchio's, so that its results compare one to one):

* ``q`` is ``(..., nq)``. With ``floating_base=True`` it starts with the base (root link) position ``(x, y, z)``
  and orientation as a unit quaternion in ``(x, y, z, w)`` order, then the joints; a fixed base has the joints only.
* ``v`` is ``(..., nv)``: the base's linear then angular velocity, both in the base frame (``nv = nq - 1``), then
  the joint rates. ``integrate(q, v)`` and ``difference(q0, q1)`` act on that manifold
  (``kinematics.free_flyer``); for a fixed base they are ``q + v`` and ``q1 - q0``.
* Joints (``joint_names``) are the URDF's independent movable joints (revolute, continuous, prismatic) in the
  depth-first order of the URDF walk, children in the URDF's joint order. Fixed joints are folded; a mimic joint
  (``mimic_names``) moves with ``multiplier * q_source + offset`` and has no coordinate: its Jacobian columns are
  added to its source's, times the multiplier. A continuous joint has one coordinate (its angle).
* Frames (``frame_names``) are the URDF's links in the same depth-first order, the root link first; poses are in
  the world frame (the root link's frame for a fixed base). Jacobians are ``(..., 6, nv)``, linear rows first, in
  world-aligned axes at the frame origin (Pinocchio's LOCAL_WORLD_ALIGNED): ``J v`` is the frame's twist.

Every quantity comes from one forward pass, ``forward_kinematics(q)`` (``TreeState``); each query method takes
either ``q`` or such a state, so that several quantities share one pass. The pass runs level by level over the
tree (all joints at the same depth in one matrix product, in a batch-last layout, ``(node, 3, 4, B)``, where a small product is a few
multiply-adds over contiguous rows of ``B`` values); nothing syncs with the device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from kinematics import free_flyer, native
from kinematics.batch_last import cross
from kinematics.errors import (
    DtypeDeviceMismatchError,
    FrameNotFoundError,
    InvalidQuaternionError,
    MissingInertialError,
    ShapeError,
)
from kinematics.urdf_tree import REVOLUTE, TreeDescription, close_names, describe_tree

__all__ = ["QUATERNION_TOLERANCE", "KinematicTree", "TreeState"]

# |norm(quaternion) - 1| above this is an InvalidQuaternionError (when the quaternion is checked).
QUATERNION_TOLERANCE = 1e-3


@dataclass
class TreeState:
    """One forward pass: every node's aligned frame in the batch-last layout, and lazily derived quantities.

    ``nodes``: ``(n_nodes + 1, 3, 4, B)``, index 0 the root (base) frame, then the movable joints' aligned frames
    (z along the joint axis, origin on it) in the tree's level order. Built by ``KinematicTree.forward_kinematics``;
    only meaningful to the tree that built it.
    """

    tree_id: int
    batch: torch.Size
    nodes: torch.Tensor
    cache: dict = field(default_factory=dict)

    @property
    def batch_size(self) -> int:
        return self.nodes.shape[-1]


def _t(array, dtype, device) -> torch.Tensor:
    return torch.as_tensor(np.ascontiguousarray(array), dtype=dtype, device=device)


class KinematicTree(nn.Module):
    """Geometry of a URDF tree as buffers; batched FK, frame Jacobians, centre of mass and its Jacobian.

    Build it with ``KinematicTree.from_urdf``. See the module docstring for the ``q`` / ``v`` conventions.
    """

    def __init__(
        self,
        description: TreeDescription,
        floating_base: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        d = description
        self.description = d
        self.floating_base = bool(floating_base)
        self.base_nq, self.base_nv = (7, 6) if floating_base else (0, 0)
        n = len(d.node_names)
        self.n_nodes = n
        self.all_revolute = bool(np.all(d.kind == REVOLUTE))
        self.has_mimic = bool(np.any(d.is_mimic))
        self._frame_index = {name: i for i, name in enumerate(d.frame_names)}
        self.total_mass = float(d.mass.sum())

        # Level order: nodes sorted by depth (stable, so depth-first within a level). order[k] = walk index.
        depth = np.zeros(n, dtype=np.int64)
        for i in range(n):
            depth[i] = 0 if d.parent[i] < 0 else depth[d.parent[i]] + 1
        order = np.argsort(depth, kind="stable")
        level_of = {int(w): k for k, w in enumerate(order)}  # walk index -> level-order index
        slot = lambda walk: 0 if walk < 0 else level_of[int(walk)] + 1  # noqa: E731  index into TreeState.nodes
        self._levels = []  # (start, end, parent-index buffer name or None), into the level order
        start = 0
        for level in range(int(depth.max()) + 1 if n else 0):
            members = order[depth[order] == level]
            end = start + len(members)
            parents = np.array([slot(d.parent[w]) for w in members])
            prev_start = 0 if level == 0 else self._levels[-1][0] + 1
            prev_end = 1 if level == 0 else self._levels[-1][1] + 1
            local = parents - prev_start  # index into the previous level's tensor
            same = len(local) == prev_end - prev_start and np.array_equal(local, np.arange(len(local)))
            name = None
            if not same:
                name = f"_level{level}_parent"
                self.register_buffer(name, torch.as_tensor(local, dtype=torch.long, device=device), persistent=False)
            self._levels.append((start, end, name))
            start = end
        self._levels = tuple(self._levels)

        as_t = lambda a: _t(a, dtype, device)  # noqa: E731
        long_t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.int64), device=device)  # noqa: E731
        origins = d.node_origin[order]
        self.register_buffer("node_origin_top", as_t(origins[:, :3, :, None]))  # (n, 3, 4, 1)
        self.register_buffer("node_dof", long_t(d.dof[order]))
        self.register_buffer("node_multiplier", as_t(d.multiplier[order]))
        self.register_buffer("node_offset", as_t(d.offset[order]))
        self.register_buffer("node_revolute", as_t((d.kind[order] == REVOLUTE).astype(float)))
        self._identity_map = not self.has_mimic and np.array_equal(d.dof[order], np.arange(n))
        # For the compiled pass (kinematics.native): each node's q column, constant frame (n, 3, 4), parent slot.
        self.register_buffer("_node_q_column", long_t(d.dof[order] + self.base_nq), persistent=False)
        self.register_buffer("_node_origin34", as_t(origins[:, :3, :]), persistent=False)
        self.register_buffer("_node_parent_slot", long_t([slot(d.parent[w]) for w in order]), persistent=False)

        # Frames: owner slot and the constant offset from the owner's aligned frame.
        self._frame_slots = tuple(slot(w) for w in d.frame_node)
        self.register_buffer("frame_slot", long_t(self._frame_slots))
        self.register_buffer("frame_offset", as_t(d.frame_offset))  # (n_frames, 4, 4)
        # Ancestor nodes of each frame (level-order indices), their dofs and multipliers.
        self._frame_ancestors = []
        for f, owner in enumerate(d.frame_node):
            chain, w = [], int(owner)
            while w >= 0:
                chain.append(level_of[w])
                w = int(d.parent[w])
            chain = sorted(chain)
            names = (f"_frame{f}_nodes", f"_frame{f}_dofs", f"_frame{f}_weights")
            self.register_buffer(names[0], long_t(chain), persistent=False)
            self.register_buffer(names[1], long_t(d.dof[order][chain]), persistent=False)
            self.register_buffer(names[2], as_t(d.multiplier[order][chain]), persistent=False)
            self.register_buffer(f"_frame{f}_slots", long_t(np.asarray(chain, dtype=np.int64) + 1), persistent=False)
            revolute_chain = (d.kind[order][chain] == REVOLUTE).astype(float)
            self.register_buffer(f"_frame{f}_revolute", as_t(revolute_chain), persistent=False)
            independent = not np.any(d.is_mimic[order][chain])
            self._frame_ancestors.append((names, len(chain), independent))

        # Mass: first moments per slot (m [c; 1] summed over the links each slot carries) and subtree masses.
        moments = np.zeros((n + 1, 4))
        for f, owner in enumerate(d.frame_node):
            c = d.frame_offset[f] @ np.r_[d.com_local[f], 1.0]
            moments[slot(owner)] += d.mass[f] * c
        subtree = np.zeros((n, n + 1))  # node (level order) x slot: 1 where the slot is in the node's subtree
        for k, w in enumerate(order):
            subtree[k, k + 1] = 1.0
            p = int(d.parent[w])
            while p >= 0:
                subtree[level_of[p], k + 1] = 1.0
                p = int(d.parent[p])
        self.register_buffer("slot_moment", as_t(moments[:, :, None, None]))  # (n + 1, 4, 1, 1)
        self.register_buffer("subtree", as_t(subtree))
        self.register_buffer("subtree_mass", as_t(subtree @ moments[:, 3]))
        self.register_buffer("_total_mass", as_t([self.total_mass]), persistent=False)

        lower = np.r_[np.full(self.base_nq, -np.inf), d.lower]
        upper = np.r_[np.full(self.base_nq, np.inf), d.upper]
        self.register_buffer("lower", as_t(lower))
        self.register_buffer("upper", as_t(upper))
        neutral = np.clip(np.zeros(len(d.joint_names)), d.lower, d.upper)
        base = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0] if floating_base else []
        self.register_buffer("_neutral", as_t(np.r_[base, neutral]), persistent=False)
        self.register_buffer("_homogeneous_row", as_t([[0.0, 0.0, 0.0, 1.0]]), persistent=False)
        self.register_buffer("_identity34", as_t(np.eye(4)[:3, :, None]), persistent=False)
        self.register_buffer("_e3", as_t(np.eye(4)[3][None, None, :, None]), persistent=False)

    @classmethod
    def from_urdf(
        cls,
        urdf_text: str,
        floating_base: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> KinematicTree:
        """Every link and movable joint of the URDF text; ``floating_base=True`` puts a free flyer under the root
        link. Raises ``URDFError`` for unparsable text, a forest, unsupported joints or a bad mimic source."""
        return cls(describe_tree(urdf_text), floating_base, device, dtype)

    # ----------------------------------------------------------------------------------------------- properties
    @property
    def nq(self) -> int:
        return self.base_nq + len(self.description.joint_names)

    @property
    def nv(self) -> int:
        return self.base_nv + len(self.description.joint_names)

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Independent joints, in the order of ``q[..., base_nq:]`` and ``v[..., base_nv:]``."""
        return self.description.joint_names

    @property
    def mimic_names(self) -> tuple[str, ...]:
        """Mimic joints (no coordinate of their own), in walk order."""
        return self.description.mimic_names

    @property
    def frame_names(self) -> tuple[str, ...]:
        """Every link, in the order of ``frame_poses``; the root link first."""
        return self.description.frame_names

    @property
    def root_link_name(self) -> str:
        return self.description.root_link

    @property
    def joint_lower(self) -> torch.Tensor:
        """``(n_joints,)`` lower joint limits (``-inf`` for continuous or unbounded joints)."""
        return self._buffers["lower"][self.base_nq :]

    @property
    def joint_upper(self) -> torch.Tensor:
        return self._buffers["upper"][self.base_nq :]

    def neutral(self) -> torch.Tensor:
        """``(nq,)``: the identity base pose and every joint at 0, clamped into its limits."""
        return self._buffers["_neutral"].clone()

    def frame_index(self, name: str) -> int:
        """Index of frame ``name`` in ``frame_names``; ``FrameNotFoundError`` (with close names) if unknown."""
        try:
            return self._frame_index[name]
        except (KeyError, TypeError):
            close = close_names(str(name), self.frame_names)
            hint = f"; similar names: {close}" if close else ""
            raise FrameNotFoundError(f"{name!r} is not a frame (link) of this tree{hint}") from None

    # ------------------------------------------------------------------------------------------------ manifold
    def integrate(self, q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``q (+) v``: ``(..., nq) x (..., nv) -> (..., nq)`` (broadcast), as ``pin.integrate``."""
        self._check(q, "q", self.nq)
        self._check(v, "v", self.nv)
        if not self.floating_base:
            return q + v
        batch = torch.broadcast_shapes(q.shape[:-1], v.shape[:-1])
        q, v = q.expand(*batch, self.nq), v.expand(*batch, self.nv)
        base = free_flyer.integrate(q[..., :7], v[..., :6])
        return torch.cat((base, q[..., 7:] + v[..., 6:]), -1)

    def difference(self, q0: torch.Tensor, q1: torch.Tensor) -> torch.Tensor:
        """``q1 (-) q0``: ``(..., nq) x (..., nq) -> (..., nv)``, as ``pin.difference(model, q0, q1)``."""
        self._check(q0, "q0", self.nq)
        self._check(q1, "q1", self.nq)
        if not self.floating_base:
            return q1 - q0
        q0, q1 = torch.broadcast_tensors(q0, q1)
        base = free_flyer.difference(q0[..., :7], q1[..., :7])
        return torch.cat((base, q1[..., 7:] - q0[..., 7:]), -1)

    def integrate_jacobians(self, q: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(d integrate / dq, d integrate / dv)``, each ``(..., nv, nv)`` in tangent coordinates, as
        ``pin.dIntegrate`` ARG0 / ARG1 (identity on the joints)."""
        self._check(q, "q", self.nq)
        self._check(v, "v", self.nv)
        batch = torch.broadcast_shapes(q.shape[:-1], v.shape[:-1])
        eye = torch.eye(self.nv, dtype=v.dtype, device=v.device).expand(*batch, self.nv, self.nv)
        if not self.floating_base:
            return eye, eye
        dq, dv = free_flyer.integrate_jacobians(q[..., :7], v[..., :6])
        return self._embed_base(eye, dq.expand(*batch, 6, 6)), self._embed_base(eye, dv.expand(*batch, 6, 6))

    def difference_jacobians(self, q0: torch.Tensor, q1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(d difference / dq0, d difference / dq1)``, each ``(..., nv, nv)``, as ``pin.dDifference`` ARG0 /
        ARG1 (``-I`` and ``I`` on the joints)."""
        self._check(q0, "q0", self.nq)
        self._check(q1, "q1", self.nq)
        batch = torch.broadcast_shapes(q0.shape[:-1], q1.shape[:-1])
        eye = torch.eye(self.nv, dtype=q0.dtype, device=q0.device).expand(*batch, self.nv, self.nv)
        if not self.floating_base:
            return -eye, eye
        d0, d1 = free_flyer.difference_jacobians(*torch.broadcast_tensors(q0[..., :7], q1[..., :7]))
        return self._embed_base(-eye, d0), self._embed_base(eye, d1)

    def _embed_base(self, joints: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
        top = torch.cat((base, torch.zeros_like(joints[..., :6, 6:])), -1)
        return torch.cat((top, joints[..., 6:, :]), -2)

    # -------------------------------------------------------------------------------------------------- inputs
    def _check(self, x: torch.Tensor, name: str, size: int) -> None:
        ref = self._buffers["lower"]
        if not isinstance(x, torch.Tensor):
            raise ShapeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dtype is not ref.dtype or not ((x.is_cpu and ref.is_cpu) or x.device == ref.device):
            raise DtypeDeviceMismatchError(
                f"{name} is {x.dtype} on {x.device} but the tree is {ref.dtype} on {ref.device}; "
                "convert the input with .to(...) or move the tree"
            )
        if x.ndim < 1 or x.shape[-1] != size:
            raise ShapeError(f"{name} must have shape (..., {size}), got {tuple(x.shape)}")

    def check_quaternion(self, q: torch.Tensor) -> None:
        """Raise ``InvalidQuaternionError`` if a base quaternion of ``q`` is off the unit sphere by more than
        ``QUATERNION_TOLERANCE`` or not finite (reads the result back: a device synchronisation off the CPU)."""
        if not self.floating_base or q.numel() == 0:
            return
        deviation = (q[..., 3:7].detach().norm(dim=-1) - 1.0).abs()
        bad = ~(deviation <= QUATERNION_TOLERANCE)
        if bool(bad.any()):
            index = tuple(int(i) for i in bad.nonzero()[0])
            raise InvalidQuaternionError(
                f"the base quaternion (x, y, z, w) = q[..., 3:7] must be unit (|norm - 1| <= "
                f"{QUATERNION_TOLERANCE}); at batch index {index} its norm is "
                f"{float(q[index][3:7].detach().norm()):.6g}"
            )

    # ------------------------------------------------------------------------------------------ forward pass
    def forward_kinematics(self, q: torch.Tensor, validate: bool | None = None) -> TreeState:
        """One pass over the tree for ``q`` ``(..., nq)``; pass the state to the query methods.

        ``validate``: check the base quaternion's norm (``check_quaternion``). ``None`` (default) checks CPU
        inputs, where it costs a few microseconds, and skips the check on other devices, where it would
        synchronise with the device; ``True`` always checks, ``False`` never. The pass itself reads the rotation
        of the normalised quaternion either way.
        """
        self._check(q, "q", self.nq)
        if validate or (validate is None and q.is_cpu):
            self.check_quaternion(q)
        batch = q.shape[:-1]
        return TreeState(id(self), batch, self._nodes(q.reshape(math.prod(batch), self.nq)))

    forward = forward_kinematics

    def _root(self, q: torch.Tensor) -> torch.Tensor | None:
        """The base frame ``(3, 4, B)`` from ``q`` ``(B, nq)``; ``None`` for a fixed base (the identity)."""
        if not self.floating_base:
            return None
        rows = free_flyer.rotation_entries(*q[:, 3:7].unbind(1))
        entries = [entry for i, row in enumerate(rows) for entry in (*row, q[:, i])]
        return torch.stack(entries, 0).view(3, 4, q.shape[0])

    def _nodes(self, q: torch.Tensor) -> torch.Tensor:
        buffers = self._buffers
        nodes = native.tree_nodes(
            q,
            self.floating_base,
            buffers["_node_q_column"],
            buffers["node_multiplier"],
            buffers["node_offset"],
            buffers["node_revolute"],
            buffers["_node_origin34"],
            buffers["_node_parent_slot"],
        )
        if nodes is not None:  # the compiled pass (no autograd graph to record, a CPU tensor)
            return nodes
        batch = q.shape[0]
        root = self._root(q)
        if root is None:
            root = buffers["_identity34"].expand(3, 4, batch)
        if self.n_nodes == 0:
            return root[None].contiguous()
        joints = q[:, self.base_nq :].t()  # (n_joints, B)
        if self._identity_map:
            values = joints.contiguous()
        else:
            values = joints.index_select(0, buffers["node_dof"])
            if self.has_mimic:
                values = torch.addcmul(buffers["node_offset"][:, None], values, buffers["node_multiplier"][:, None])
        # Local frames L = C R_z(q) (C translated by q along its z for a prismatic joint), top rows (n, 3, 4, B):
        # columns 0 and 1 turn by the angle, columns 2 and 3 are C's (column 3 slides along column 2).
        origin = buffers["node_origin_top"]  # (n, 3, 4, 1)
        c0, c1, c23 = origin[:, :, 0], origin[:, :, 1], origin[:, :, 2:]
        if self.all_revolute:
            c, s = torch.cos(values)[:, None], torch.sin(values)[:, None]
            tail = c23.expand(-1, -1, -1, batch)
        else:
            revolute = buffers["node_revolute"][:, None]
            angle = values * revolute
            c, s = torch.cos(angle)[:, None], torch.sin(angle)[:, None]
            slid = torch.addcmul(c23[:, :, 1], c23[:, :, 0], (values * (1.0 - revolute))[:, None])
            tail = torch.stack((c23[:, :, 0].expand(-1, -1, batch), slid), 2)
        local = torch.cat(
            (torch.addcmul(c0 * c, c1, s)[:, :, None], torch.addcmul(c1 * c, c0, -s)[:, :, None], tail), 2
        )
        e3 = buffers["_e3"]  # (1, 1, 4, 1): the homogeneous row of L
        nodes, previous = [root[None]], root[None]
        for level, (start, end, parent_name) in enumerate(self._levels):
            lo = local[start:end]
            if level == 0 and not self.floating_base:
                nodes.append(lo)
                previous = lo
                continue
            p = previous if parent_name is None else previous.index_select(0, buffers[parent_name])
            if p.shape[0] != end - start:
                p = p.expand(end - start, -1, -1, -1)
            out = p[:, :, 0:1] * lo[:, None, 0]
            out = torch.addcmul(out, p[:, :, 1:2], lo[:, None, 1])
            out = torch.addcmul(out, p[:, :, 2:3], lo[:, None, 2])
            previous = torch.addcmul(out, p[:, :, 3:4], e3)
            nodes.append(previous)
        return torch.cat(nodes, 0)

    def _state(self, q_or_state) -> TreeState:
        if isinstance(q_or_state, TreeState):
            if q_or_state.tree_id != id(self):
                raise ShapeError("this TreeState was computed by another KinematicTree")
            return q_or_state
        return self.forward_kinematics(q_or_state)

    # ------------------------------------------------------------------------------------------------ frames
    @staticmethod
    def _times_constant(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        """``(n, 3, 4, B) @ (n, 4, 4)`` (``x`` with its homogeneous row implied) -> ``(n, 3, 4, B)``."""
        out = x[:, :, 0:1] * m[:, None, 0, :, None]
        for k in (1, 2, 3):
            out = torch.addcmul(out, x[:, :, k : k + 1], m[:, None, k, :, None])
        return out

    def _frames(self, state: TreeState) -> torch.Tensor:
        """Every frame ``(n_frames, 3, 4, B)`` in the world frame (cached on the state)."""
        frames = state.cache.get("frames")
        if frames is None:
            owners = state.nodes.index_select(0, self._buffers["frame_slot"])
            frames = self._times_constant(owners, self._buffers["frame_offset"])
            state.cache["frames"] = frames
        return frames

    def _frame(self, state: TreeState, index: int) -> torch.Tensor:
        """Frame ``index`` ``(3, 4, B)``."""
        frames = state.cache.get("frames")
        if frames is not None:
            return frames[index]
        key = ("frame", index)
        frame = state.cache.get(key)
        if frame is None:
            slot = self._frame_slots[index]
            owner = state.nodes[slot : slot + 1]
            frame = self._times_constant(owner, self._buffers["frame_offset"][index : index + 1])[0]
            state.cache[key] = frame
        return frame

    def frame_poses(self, q_or_state) -> torch.Tensor:
        """Every frame's pose in the world frame, ``(..., n_frames, 4, 4)`` in ``frame_names`` order."""
        state = self._state(q_or_state)
        buffers = self._buffers
        n_frames, batch = len(self._frame_slots), state.batch_size
        out = native.tree_frames(state.nodes, buffers["frame_offset"], buffers["frame_slot"])
        if out is None:
            frames = self._frames(state)
            out = frames.new_empty(batch, n_frames, 4, 4)
            out[:, :, :3].copy_(frames.permute(3, 0, 1, 2))
            out[:, :, 3] = buffers["_homogeneous_row"]
        return out.view(*state.batch, n_frames, 4, 4)

    def frame_pose(self, q_or_state, name: str) -> torch.Tensor:
        """Pose of frame ``name`` in the world frame, ``(..., 4, 4)``."""
        index = self.frame_index(name)
        state = self._state(q_or_state)
        buffers = self._buffers
        out = native.tree_frames(
            state.nodes, buffers["frame_offset"][index : index + 1], buffers["frame_slot"][index : index + 1]
        )
        if out is not None:
            return out.view(*state.batch, 4, 4)
        top = self._frame(state, index).permute(2, 0, 1)
        row = buffers["_homogeneous_row"].expand(top.shape[0], 1, 4)
        return torch.cat((top, row), 1).view(*state.batch, 4, 4)

    def frame_poses_batch_last(self, q_or_state) -> torch.Tensor:
        """Every frame's pose as its top three rows, batch last: ``(n_frames, 3, 4, B)`` with ``B`` the flattened
        batch (``state.batch_size``), the layout of a solver that works batch-last (no transpose). The result may
        be the state's cache: do not modify it in place."""
        state = self._state(q_or_state)
        buffers = self._buffers
        out = native.tree_frames(state.nodes, buffers["frame_offset"], buffers["frame_slot"], batch_first=False)
        return self._frames(state) if out is None else out

    def frame_pose_batch_last(self, q_or_state, name: str) -> torch.Tensor:
        """Frame ``name``'s top three rows, ``(3, 4, B)`` (see ``frame_poses_batch_last``)."""
        index = self.frame_index(name)
        state = self._state(q_or_state)
        buffers = self._buffers
        out = native.tree_frames(
            state.nodes,
            buffers["frame_offset"][index : index + 1],
            buffers["frame_slot"][index : index + 1],
            batch_first=False,
        )
        return self._frame(state, index) if out is None else out[0]

    # --------------------------------------------------------------------------------------------- Jacobians
    def _base_block(self, state: TreeState, point: torch.Tensor, rows: int) -> torch.Tensor:
        """The free flyer's columns ``(6 columns, rows, B)`` for a point ``(3, B)``: the base's linear velocity
        (base frame) moves the point along the base axes; its angular velocity turns it about the base origin."""
        root = state.nodes[0]
        axes = root[:, :3].transpose(0, 1)  # (3 columns, 3, B): base axis k in the world frame
        arm = (point - root[:, 3])[None].expand(3, -1, -1)
        turned = cross(axes, arm)
        if rows == 3:
            return torch.cat((axes, turned), 0)
        return torch.cat((torch.cat((axes, torch.zeros_like(axes)), 1), torch.cat((turned, axes), 1)), 0)

    def _assemble(
        self,
        state: TreeState,
        point: torch.Tensor,
        columns: torch.Tensor,
        dofs,
        weights,
        rows: int,
        batch_first: bool = True,
    ):
        """``(..., rows, nv)`` (``batch_first``; else ``(rows, nv, B)``) from node columns ``(k, rows, B)`` driving
        joints ``dofs`` (times ``weights`` for mimic joints, or ``None``) and, with a floating base, the base
        columns at ``point``."""
        batch = state.batch_size
        if batch_first:
            out = columns.new_zeros(batch, rows, self.nv)
            column_dim, base, source = 2, (2, 1, 0), columns.permute(2, 1, 0)
        else:
            out = columns.new_zeros(rows, self.nv, batch)
            column_dim, base, source = 1, (1, 0, 2), columns.transpose(0, 1)
            weights = None if weights is None else weights[:, None]
        if self.base_nv:
            out.narrow(column_dim, 0, self.base_nv).copy_(self._base_block(state, point, rows).permute(*base))
        joints = out.narrow(column_dim, self.base_nv, self.nv - self.base_nv)
        if weights is None:
            joints.index_copy_(column_dim, dofs, source)
        else:
            joints.index_add_(column_dim, dofs, source * weights)
        return out.view(*state.batch, rows, self.nv) if batch_first else out

    def frame_jacobian(self, q_or_state, name: str) -> torch.Tensor:
        """Jacobian of frame ``name``, ``(..., 6, nv)``: linear rows first, world-aligned axes at the frame origin
        (LOCAL_WORLD_ALIGNED), mapping ``v`` (base velocity in the base frame, then joint rates)."""
        return self._frame_jacobian(q_or_state, name, True)

    def frame_jacobian_batch_last(self, q_or_state, name: str) -> torch.Tensor:
        """``frame_jacobian`` batch last: ``(6, nv, B)`` with ``B`` the flattened batch."""
        return self._frame_jacobian(q_or_state, name, False)

    def _frame_jacobian(self, q_or_state, name: str, batch_first: bool) -> torch.Tensor:
        index = self.frame_index(name)
        state = self._state(q_or_state)
        buffers = self._buffers
        (node_name, dof_name, weight_name), count, independent = self._frame_ancestors[index]
        jacobian = native.tree_frame_jacobian(
            state.nodes,
            self._frame_slots[index],
            buffers["frame_offset"][index],
            buffers[f"_frame{index}_slots"],
            buffers[dof_name],
            buffers[weight_name],
            buffers[f"_frame{index}_revolute"],
            self.nv,
            self.base_nv,
            batch_first,
        )
        if jacobian is not None:
            return jacobian.view(*state.batch, 6, self.nv) if batch_first else jacobian
        point = self._frame(state, index)[:, 3]  # (3, B)
        if count == 0:
            columns, dofs, weights = point.new_zeros(0, 6, state.batch_size), buffers[dof_name], None
        else:
            ancestors = state.nodes[1:].index_select(0, buffers[node_name])  # (k, 3, 4, B)
            z, origin = ancestors[:, :, 2], ancestors[:, :, 3]
            linear = cross(z, point - origin)
            if self.all_revolute:
                columns = torch.cat((linear, z), 1)
            else:
                revolute = buffers["node_revolute"].index_select(0, buffers[node_name])[:, None, None]
                columns = torch.cat((torch.lerp(z, linear, revolute), z * revolute), 1)
            dofs, weights = buffers[dof_name], None if independent else buffers[weight_name]
        return self._assemble(state, point, columns, dofs, weights, 6, batch_first)

    # ----------------------------------------------------------------------------------------- centre of mass
    def _require_mass(self) -> None:
        if self.total_mass <= 0.0:
            raise MissingInertialError(
                "the centre of mass needs link masses, but no link of this URDF has an <inertial> with a positive mass"
            )

    def _moments(self, state: TreeState) -> torch.Tensor:
        """Mass-weighted positions ``m c`` per node slot, ``(n_nodes + 1, 3, B)`` (cached)."""
        moments = state.cache.get("moments")
        if moments is None:
            nodes, w = state.nodes, self._buffers["slot_moment"]  # w: (n + 1, 4, 1, 1)
            moments = nodes[:, :, 0] * w[:, 0]
            for k in (1, 2, 3):
                moments = torch.addcmul(moments, nodes[:, :, k], w[:, k])
            state.cache["moments"] = moments
        return moments

    def _native_com(self, state: TreeState, jacobian: bool, batch_first: bool):
        buffers = self._buffers
        return native.tree_com(
            state.nodes,
            buffers["slot_moment"].view(-1, 4),
            buffers["subtree_mass"],
            buffers["node_revolute"],
            buffers["node_multiplier"],
            buffers["_total_mass"],
            buffers["node_dof"],
            buffers["_node_parent_slot"],
            self.nv,
            self.base_nv,
            jacobian,
            batch_first,
        )

    def center_of_mass(self, q_or_state) -> torch.Tensor:
        """Centre of mass in the world frame, ``(..., 3)``, from the URDF's inertials (every link, including
        those welded to the root)."""
        return self._center_of_mass(q_or_state, True)

    def center_of_mass_batch_last(self, q_or_state) -> torch.Tensor:
        """``center_of_mass`` batch last: ``(3, B)`` with ``B`` the flattened batch."""
        return self._center_of_mass(q_or_state, False)

    def _center_of_mass(self, q_or_state, batch_first: bool) -> torch.Tensor:
        self._require_mass()
        state = self._state(q_or_state)
        computed = self._native_com(state, False, batch_first)
        if computed is not None:
            com = computed[0]
        else:
            com = self._moments(state).sum(0) / self.total_mass  # (3, B)
            if batch_first:
                com = com.t()
        return com.reshape(*state.batch, 3) if batch_first else com

    def com_jacobian(self, q_or_state) -> torch.Tensor:
        """Jacobian of the centre of mass, ``(..., 3, nv)``, mapping ``v`` to the CoM's world velocity."""
        return self._com_jacobian(q_or_state, True)

    def com_jacobian_batch_last(self, q_or_state) -> torch.Tensor:
        """``com_jacobian`` batch last: ``(3, nv, B)`` with ``B`` the flattened batch."""
        return self._com_jacobian(q_or_state, False)

    def _com_jacobian(self, q_or_state, batch_first: bool) -> torch.Tensor:
        self._require_mass()
        state = self._state(q_or_state)
        computed = self._native_com(state, True, batch_first)
        if computed is not None:
            jacobian = computed[1]
            return jacobian.view(*state.batch, 3, self.nv) if batch_first else jacobian
        buffers, batch = self._buffers, state.batch_size
        moments = self._moments(state)
        com = moments.sum(0) / self.total_mass
        if self.n_nodes == 0:
            columns = com.new_zeros(0, 3, batch)
            return self._assemble(state, com, columns, buffers["node_dof"], None, 3, batch_first)
        subtree = torch.mm(buffers["subtree"], moments.view(self.n_nodes + 1, 3 * batch)).view(-1, 3, batch)
        nodes = state.nodes[1:]
        z, origin = nodes[:, :, 2], nodes[:, :, 3]
        mass = buffers["subtree_mass"][:, None, None]
        linear = cross(z, subtree - mass * origin)
        if not self.all_revolute:
            linear = torch.lerp(z * mass, linear, buffers["node_revolute"][:, None, None])
        weights = buffers["node_multiplier"] if self.has_mimic else None
        return self._assemble(state, com, linear / self.total_mass, buffers["node_dof"], weights, 3, batch_first)

    def extra_repr(self) -> str:
        return (
            f"nq={self.nq}, nv={self.nv}, joints={len(self.joint_names)}, mimic={len(self.mimic_names)}, "
            f"frames={len(self.frame_names)}, floating_base={self.floating_base}"
        )
