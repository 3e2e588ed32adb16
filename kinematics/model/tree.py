"""A URDF kinematic tree with an optional floating base: every link's pose, frame Jacobians, the centre of mass
and its Jacobian, batched and differentiable in torch.

Conventions (Pinocchio's, so that its results compare one to one):

* ``q`` is ``(..., nq)``. With ``floating_base=True`` it starts with the base (root link) position ``(x, y, z)``
  and orientation as a unit quaternion in ``(x, y, z, w)`` order, then the joints; a fixed base has the joints only.
* ``v`` is ``(..., nv)``: the base's linear then angular velocity, both in the base frame (``nv = nq - 1``), then
  the joint rates. ``integrate(q, v)`` and ``difference(q0, q1)`` act on that manifold
  (``kinematics.lie.free_flyer``); for a fixed base they are ``q + v`` and ``q1 - q0``.
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
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from kinematics.errors import (
    DtypeDeviceMismatchError,
    FrameNotFoundError,
    InvalidQuaternionError,
    MissingInertialError,
    ShapeError,
)
from kinematics.lie import free_flyer
from kinematics.model.tree_kernels import TREE_COM, TREE_FRAME_JACOBIAN, TREE_FRAMES, TREE_NODES
from kinematics.model.urdf import REVOLUTE, TreeDescription, close_names, describe_tree

__all__ = ["QUATERNION_TOLERANCE", "KinematicTree", "TreeState"]

# |norm(quaternion) - 1| above this is an InvalidQuaternionError (when the quaternion is checked).
QUATERNION_TOLERANCE = 1e-3


@dataclass
class TreeState:
    """One forward pass: every node's aligned frame in the batch-last layout.

    ``nodes``: ``(n_nodes + 1, 3, 4, B)``, index 0 the root (base) frame, then the movable joints' aligned frames
    (z along the joint axis, origin on it) in the tree's level order. Built by ``KinematicTree.forward_kinematics``;
    only meaningful to the tree that built it.
    """

    tree_id: int
    batch: torch.Size
    nodes: torch.Tensor

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
        # Where each level ends in the level order (a node's parent is in the level before it): the tree kernels
        # run the pass level by level.
        self._level_ends = [int(np.sum(depth <= level)) for level in range(int(depth.max()) + 1 if n else 0)]

        as_t = lambda a: _t(a, dtype, device)  # noqa: E731
        long_t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.int64), device=device)  # noqa: E731
        origins = d.node_origin[order]
        self.register_buffer("node_origin_top", as_t(origins[:, :3, :, None]))  # (n, 3, 4, 1)
        self.register_buffer("node_dof", long_t(d.dof[order]))
        self.register_buffer("node_multiplier", as_t(d.multiplier[order]))
        self.register_buffer("node_offset", as_t(d.offset[order]))
        self.register_buffer("node_revolute", as_t((d.kind[order] == REVOLUTE).astype(float)))
        # For the compiled pass (kinematics.native): each node's q column, constant frame (n, 3, 4), parent slot.
        self.register_buffer("_node_q_column", long_t(d.dof[order] + self.base_nq), persistent=False)
        self.register_buffer("_node_origin34", as_t(origins[:, :3, :]), persistent=False)
        self.register_buffer("_node_parent_slot", long_t([slot(d.parent[w]) for w in order]), persistent=False)

        # Frames: owner slot and the constant offset from the owner's aligned frame.
        self._frame_slots = tuple(slot(w) for w in d.frame_node)
        self.register_buffer("frame_slot", long_t(self._frame_slots))
        self.register_buffer("frame_offset", as_t(d.frame_offset))  # (n_frames, 4, 4)
        # Each frame's ancestor nodes (their slots), their dofs, multipliers and kinds: what its Jacobian reads.
        for f, owner in enumerate(d.frame_node):
            chain, w = [], int(owner)
            while w >= 0:
                chain.append(level_of[w])
                w = int(d.parent[w])
            chain = sorted(chain)
            self.register_buffer(f"_frame{f}_slots", long_t(np.asarray(chain, dtype=np.int64) + 1), persistent=False)
            self.register_buffer(f"_frame{f}_dofs", long_t(d.dof[order][chain]), persistent=False)
            self.register_buffer(f"_frame{f}_weights", as_t(d.multiplier[order][chain]), persistent=False)
            revolute_chain = (d.kind[order][chain] == REVOLUTE).astype(float)
            self.register_buffer(f"_frame{f}_revolute", as_t(revolute_chain), persistent=False)

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
    def configuration_lower(self) -> torch.Tensor:
        """``(nq,)`` lower bounds of every coordinate of ``q`` (the base's ``-inf``): the buffer itself, which
        ``.to(...)`` replaces, so what is built for the tree's dtype, device and storage can check that it still
        applies by this tensor's identity (a view such as ``joint_lower`` is a new tensor at every access)."""
        return self._buffers["lower"]

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

    def _nodes(self, q: torch.Tensor) -> torch.Tensor:
        buffers = self._buffers
        return TREE_NODES(
            q,
            self.floating_base,
            buffers["_node_q_column"],
            buffers["node_multiplier"],
            buffers["node_offset"],
            buffers["node_revolute"],
            buffers["_node_origin34"],
            buffers["_node_parent_slot"],
            self._level_ends,
        )

    def _state(self, q_or_state) -> TreeState:
        if isinstance(q_or_state, TreeState):
            if q_or_state.tree_id != id(self):
                raise ShapeError("this TreeState was computed by another KinematicTree")
            return q_or_state
        return self.forward_kinematics(q_or_state)

    # ------------------------------------------------------------------------------------------------ frames
    # Each quantity comes batch first, ``(..., *shape)``, or with ``batch_last=True`` in the layout of a solver that
    # works batch last, ``(*shape, B)`` with ``B`` the flattened batch (``state.batch_size``; no transpose).
    def frame_poses(self, q_or_state, *, batch_last: bool = False) -> torch.Tensor:
        """Every frame's pose in the world frame, ``(..., n_frames, 4, 4)`` in ``frame_names`` order; batch last,
        the top three rows, ``(n_frames, 3, 4, B)``."""
        state = self._state(q_or_state)
        buffers = self._buffers
        out = TREE_FRAMES(state.nodes, buffers["frame_offset"], buffers["frame_slot"], not batch_last)
        return out if batch_last else out.view(*state.batch, len(self._frame_slots), 4, 4)

    def frame_pose(self, q_or_state, name: str, *, batch_last: bool = False) -> torch.Tensor:
        """Pose of frame ``name`` in the world frame, ``(..., 4, 4)``; batch last, the top three rows, ``(3, 4, B)``."""
        index = self.frame_index(name)
        state = self._state(q_or_state)
        buffers = self._buffers
        offset, slot = buffers["frame_offset"][index : index + 1], buffers["frame_slot"][index : index + 1]
        if batch_last:
            return TREE_FRAMES(state.nodes, offset, slot, False)[0]
        return TREE_FRAMES(state.nodes, offset, slot, True).view(*state.batch, 4, 4)

    # --------------------------------------------------------------------------------------------- Jacobians
    def frame_jacobian(self, q_or_state, name: str, *, batch_last: bool = False) -> torch.Tensor:
        """Jacobian of frame ``name``, ``(..., 6, nv)`` (batch last ``(6, nv, B)``): linear rows first,
        world-aligned axes at the frame origin (LOCAL_WORLD_ALIGNED), mapping ``v`` (base velocity in the base
        frame, then joint rates)."""
        index = self.frame_index(name)
        state = self._state(q_or_state)
        buffers = self._buffers
        jacobian = TREE_FRAME_JACOBIAN(
            state.nodes,
            self._frame_slots[index],
            buffers["frame_offset"][index],
            buffers[f"_frame{index}_slots"],
            buffers[f"_frame{index}_dofs"],
            buffers[f"_frame{index}_weights"],
            buffers[f"_frame{index}_revolute"],
            self.nv,
            self.base_nv,
            not batch_last,
        )
        return jacobian if batch_last else jacobian.view(*state.batch, 6, self.nv)

    # ----------------------------------------------------------------------------------------- centre of mass
    def _require_mass(self) -> None:
        if self.total_mass <= 0.0:
            raise MissingInertialError(
                "the centre of mass needs link masses, but no link of this URDF has an <inertial> with a positive mass"
            )

    def _com(self, state: TreeState, jacobian: bool, batch_first: bool):
        buffers = self._buffers
        return TREE_COM(
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
            self._level_ends,
        )

    def center_of_mass(self, q_or_state, *, batch_last: bool = False) -> torch.Tensor:
        """Centre of mass in the world frame, ``(..., 3)`` (batch last ``(3, B)``), from the URDF's inertials
        (every link, including those welded to the root)."""
        self._require_mass()
        state = self._state(q_or_state)
        com = self._com(state, False, not batch_last)[0]
        return com if batch_last else com.reshape(*state.batch, 3)

    def com_jacobian(self, q_or_state, *, batch_last: bool = False) -> torch.Tensor:
        """Jacobian of the centre of mass, ``(..., 3, nv)`` (batch last ``(3, nv, B)``), mapping ``v`` to the CoM's
        world velocity."""
        self._require_mass()
        state = self._state(q_or_state)
        jacobian = self._com(state, True, not batch_last)[1]
        return jacobian if batch_last else jacobian.view(*state.batch, 3, self.nv)

    def compiled_arrays(self, frames: list[str]) -> tuple[tuple[torch.Tensor, ...], list[int]]:
        """What the compiled whole-body step (``csrc/wholebody_step.c``) reads of this tree: its buffers (the nodes'
        origins, joint types, multipliers, offsets, columns, parents, moments, subtree masses, total mass, dofs and the
        joint limits), then five per frame of ``frames`` (its offset, chain, dofs, weights, revolute flags), contiguous;
        and per frame its node slot and chain length."""
        buffers = self._buffers
        held = [
            buffers["_node_origin34"], buffers["node_revolute"], buffers["node_multiplier"], buffers["node_offset"],
            buffers["_node_q_column"], buffers["_node_parent_slot"], buffers["slot_moment"].reshape(-1, 4),
            buffers["subtree_mass"], buffers["_total_mass"], buffers["node_dof"], self.joint_lower, self.joint_upper,
        ]  # fmt: skip
        entries = []
        for name in frames:
            index = self.frame_index(name)
            chain = buffers[f"_frame{index}_slots"]
            entries += [self._frame_slots[index], chain.numel()]
            held += [buffers["frame_offset"][index], chain, buffers[f"_frame{index}_dofs"],
                     buffers[f"_frame{index}_weights"], buffers[f"_frame{index}_revolute"]]  # fmt: skip
        return tuple(t.contiguous() for t in held), entries

    def extra_repr(self) -> str:
        return (
            f"nq={self.nq}, nv={self.nv}, joints={len(self.joint_names)}, mimic={len(self.mimic_names)}, "
            f"frames={len(self.frame_names)}, floating_base={self.floating_base}"
        )
