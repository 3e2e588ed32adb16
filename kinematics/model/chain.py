"""A serial chain cut out of a URDF, with batched forward kinematics and the analytic geometric Jacobian.

``SerialChainKinematics.from_urdf`` walks the URDF tree from the end link up to the root link, keeps the
movable joints on that path (revolute, continuous, prismatic), folds fixed joints into the next transform,
and ignores every joint off the path (fingers, other branches, mimic joints; a mimic joint on the path is an error). Nothing robot-specific lives here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from kinematics import native
from kinematics.batch_last import cross, from_batch_last, matmul, matmul_constant, to_batch_last, transforms_active
from kinematics.errors import DtypeDeviceMismatchError, NotAChainError, ShapeError, URDFError
from kinematics.model.chain_gradient import RevoluteChainKinematics
from kinematics.model.urdf import MOVABLE, REVOLUTE, chain_joints, parse_urdf, rotation_taking_z_to
from kinematics.native.kernel import Kernel


@dataclass(frozen=True)
class JointSpec:
    """One movable joint of the chain: its name, kind, and limits (``-inf``/``inf`` when unbounded)."""

    name: str
    kind: int
    lower: float
    upper: float


class SerialChainKinematics(nn.Module):
    """Geometry of a serial chain as buffers, and batched FK plus geometric Jacobian in torch.

    For movable joint ``i`` the transform is ``T_i = T_{i-1} @ O_i @ M_i(q_i)``, with ``O_i`` the joint origin
    (preceded by any folded fixed joints) and ``M_i`` a rotation about (or translation along) the joint axis.
    The local rotation is precomputed as ``O_i R(q) = A_i + sin(q) B_i + (1 - cos(q)) C_i`` so that one
    vectorised step builds every joint's local transform.
    """

    def __init__(
        self,
        joints: list[JointSpec],
        origins: np.ndarray,
        axes: np.ndarray,
        tail: np.ndarray,
        root_link_name: str,
        end_link_name: str,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if not joints:
            raise NotAChainError(f"the chain {root_link_name!r} -> {end_link_name!r} has no movable joint")
        self.joints = tuple(joints)
        self.all_revolute = all(j.kind == REVOLUTE for j in joints)
        self.root_link_name = root_link_name
        self.end_link_name = end_link_name
        kinds = np.array([j.kind for j in joints])
        axes = axes / np.linalg.norm(axes, axis=-1, keepdims=True)
        # Re-express every joint frame by a constant rotation P_i that takes z to the joint axis, so that each
        # joint moves along its local z: O_i' = P_{i-1}^T O_i P_i and tail' = P_n^T tail. Joint origins and the TCP
        # are unchanged, and each joint's axis in the root frame is the third column of its frame's rotation.
        frames, previous = [], np.eye(4)
        for origin, axis in zip(origins, axes, strict=True):
            to_axis = np.eye(4)
            to_axis[:3, :3] = rotation_taking_z_to(axis)
            frames.append(previous.T @ origin @ to_axis)
            previous = to_axis
        frames = np.stack(frames)
        rev = (kinds == REVOLUTE)[:, None, None]
        rot, zero = frames[:, :3, :3], np.zeros((len(joints), 3, 1))
        k = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # skew(z)
        slide = np.where(rev[..., 0], 0.0, rot[:, :, 2])[..., None]
        as_t = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=dtype, device=device)  # noqa: E731
        # Local frame i as [R | p] (dof, 3, 4) = constant + sin(q) sine + (1 - cos(q)) versine + q slide: O_i' R_z(q)
        # by Rodrigues for revolute joints, O_i' translated by q along z for prismatic ones.
        self.register_buffer("local_constant", as_t(frames[:, :3, :]))
        self.register_buffer("local_sine", as_t(np.concatenate((np.where(rev, rot @ k, 0.0), zero), 2)))
        self.register_buffer("local_versine", as_t(np.concatenate((np.where(rev, rot @ k @ k, 0.0), zero), 2)))
        self.register_buffer("local_slide", as_t(np.concatenate((np.zeros((len(joints), 3, 3)), slide), 2)))
        self.register_buffer("revolute_mask", as_t((kinds == REVOLUTE).astype(float)))
        self.register_buffer("tail", as_t(previous.T @ tail))
        self.register_buffer("homogeneous_row", as_t([[0.0, 0.0, 0.0, 1.0]]))
        self.register_buffer("lower", as_t([j.lower for j in joints]))
        self.register_buffer("upper", as_t([j.upper for j in joints]))
        digest = hashlib.sha256()
        for array in (origins, axes, kinds, tail):
            digest.update(np.ascontiguousarray(array, dtype=np.float64).round(12).tobytes())
        digest.update("|".join(j.name for j in joints).encode())
        self._fingerprint = digest.hexdigest()

    @classmethod
    def from_urdf(
        cls,
        urdf_text: str,
        end_link_name: str,
        root_link_name: str | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> SerialChainKinematics:
        """Build the chain from ``root_link_name`` (default: the URDF's root) to ``end_link_name``."""
        urdf = parse_urdf(urdf_text)
        children = {joint.child for joint in urdf.robot.joints}
        roots = [link.name for link in urdf.robot.links if link.name not in children]
        root = root_link_name if root_link_name is not None else roots[0]
        joints, origins, axes = [], [], []
        pending = np.eye(4)
        for joint in chain_joints(urdf, root, end_link_name):
            origin = np.eye(4) if joint.origin is None else np.asarray(joint.origin, dtype=np.float64)
            pending = pending @ origin
            if joint.type == "fixed":
                continue
            if joint.type not in MOVABLE:
                raise URDFError(f"joint {joint.name!r} has unsupported type {joint.type!r} for a serial chain")
            if joint.mimic is not None:
                raise URDFError(
                    f"joint {joint.name!r} on the chain mimics {joint.mimic.joint!r}: a serial chain has one "
                    "independent variable per movable joint (mimic joints are ignored only off the chain)"
                )
            axis = np.array([1.0, 0.0, 0.0]) if joint.axis is None else np.asarray(joint.axis, dtype=np.float64)
            if np.linalg.norm(axis) < 1e-12:
                raise URDFError(f"joint {joint.name!r} has a zero axis")
            bounded = joint.type != "continuous" and joint.limit is not None and joint.limit.lower is not None
            lower = float(joint.limit.lower) if bounded else -np.inf
            upper = float(joint.limit.upper) if bounded and joint.limit.upper is not None else np.inf
            joints.append(JointSpec(joint.name, MOVABLE[joint.type], lower, upper))
            origins.append(pending)
            axes.append(axis)
            pending = np.eye(4)
        return cls(
            joints,
            np.stack(origins) if origins else np.zeros((0, 4, 4)),
            np.array(axes),
            pending,
            root,
            end_link_name,
            device,
            dtype,
        )

    @property
    def dof(self) -> int:
        return len(self.joints)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the chain's geometry (origins, axes, joint kinds and names, fixed tail)."""
        return self._fingerprint

    def forward_kinematics(self, q: torch.Tensor, tcp: torch.Tensor | None = None) -> torch.Tensor:
        """TCP pose in the root frame, ``(..., dof) -> (..., 4, 4)``."""
        return self.fk_and_jacobian(q, tcp, with_jacobian=False)[0]

    def fk_and_jacobian(
        self, q: torch.Tensor, tcp: torch.Tensor | None = None, with_jacobian: bool = True, *, batch_last: bool = False
    ) -> tuple[torch.Tensor, ...]:
        """TCP pose ``(..., 4, 4)`` and geometric Jacobian ``(..., 6, dof)`` (linear rows first, root-frame axes
        at the TCP: Pinocchio's LOCAL_WORLD_ALIGNED), both from one pass over the chain (the Jacobian ``None``
        without ``with_jacobian``).

        ``q``: ``(..., dof)``; ``tcp``: optional ``(4, 4)`` offset after the chain's end link; both on the
        chain's dtype and device.

        ``batch_last=True``: the layout of a solver that works batch last (``kinematics.batch_last``): ``q``
        ``(dof, B)`` -> TCP rotation ``(3, 3, B)``, TCP position ``(3, B)`` and the transposed Jacobian
        ``(dof, 6, B)``.

        Gradients to ``q`` through an all-revolute chain's pose and Jacobian use the closed form of
        ``kinematics.model.chain_gradient``; otherwise (and under forward-mode AD or a ``torch.func`` transform)
        autograd follows the pass itself.
        """
        self._check_inputs(q, tcp, batch_last=batch_last)
        if batch_last:
            return self._fk_and_jacobian_batch_last(q, tcp, with_jacobian)
        batch = q.shape[:-1]
        rot, position, jac_t = self._fk_and_jacobian_batch_last(to_batch_last(q, 1), tcp, with_jacobian)
        tip = from_batch_last(torch.cat((rot, position[:, None]), 1), batch)
        pose = torch.cat((tip, self._buffers["homogeneous_row"].expand(*batch, 1, 4)), -2)
        return pose, None if jac_t is None else from_batch_last(jac_t.transpose(0, 1), batch)

    def _check_inputs(self, q: torch.Tensor, tcp: torch.Tensor | None, batch_last: bool) -> None:
        """Shape, dtype and device of ``q`` (``(dof, B)`` or ``(..., dof)``) and ``tcp``; attribute reads only."""
        ref = self._buffers["tail"]
        for name, x in (("q", q), ("tcp", tcp)) if tcp is not None else (("q", q),):
            if not isinstance(x, torch.Tensor):
                raise ShapeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
            if x.dtype is not ref.dtype or not ((x.is_cpu and ref.is_cpu) or x.device == ref.device):
                raise DtypeDeviceMismatchError(
                    f"{name} is {x.dtype} on {x.device} but the chain is {ref.dtype} on {ref.device}; "
                    "convert the input with .to(...) or move the chain"
                )
        if (q.ndim != 2 or q.shape[0] != self.dof) if batch_last else (q.ndim < 1 or q.shape[-1] != self.dof):
            want = f"the batch-last shape ({self.dof}, B)" if batch_last else f"shape (..., {self.dof})"
            raise ShapeError(f"q must have {want}, got {tuple(q.shape)}")
        if tcp is not None and tcp.shape != (4, 4):
            raise ShapeError(f"tcp must have shape (4, 4), got {tuple(tcp.shape)}")

    def _fk_and_jacobian_batch_last(
        self, q: torch.Tensor, tcp: torch.Tensor | None, with_jacobian: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        closed_form = self.all_revolute and (tcp is None or not tcp.requires_grad)
        if closed_form and torch.is_grad_enabled() and q.requires_grad and not transforms_active():
            rot, pos, jac_t = RevoluteChainKinematics.apply(q, lambda x: self._batch_last_pass(x, tcp, True))
            return rot, pos, jac_t if with_jacobian else None
        return self._batch_last_pass(q, tcp, with_jacobian)

    def kernel_geometry(self, tcp: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The chain as the compiled kernels read it: each joint's constant, sine, versine and slide blocks
        ``(dof, 4, 3, 4)``, the revolute mask ``(dof,)`` and the fixed end transform after the last joint, the
        ``tcp`` offset included, ``(3, 4)``."""
        buffers = self._buffers
        blocks = (buffers["local_constant"], buffers["local_sine"], buffers["local_versine"], buffers["local_slide"])
        tail = buffers["tail"]
        end = tail if tcp is None else tail @ tcp
        return torch.stack(blocks, 1), buffers["revolute_mask"], end[:3]

    def _batch_last_pass(
        self, q: torch.Tensor, tcp: torch.Tensor | None, with_jacobian: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        local, mask, end = self.kernel_geometry(tcp)
        rot, pos, jac_t = FK_JACOBIAN(q, local, mask, end, self.all_revolute, with_jacobian)
        return rot, pos, jac_t if with_jacobian else None


def fk_jacobian_reference(
    q: torch.Tensor,
    local: torch.Tensor,
    revolute: torch.Tensor,
    end: torch.Tensor,
    revolute_only: bool,
    with_jacobian: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``FK_JACOBIAN`` in torch ops: ``q`` ``(dof, B)``, ``local`` ``(dof, 4, 3, 4)`` (each joint's constant, sine,
    versine and slide blocks), ``revolute`` ``(dof,)`` 1/0, ``end`` ``(3, 4)`` -> the TCP rotation ``(3, 3, B)``,
    position ``(3, B)`` and transposed Jacobian ``(dof, 6, B)`` (``(0, 6, B)`` without ``with_jacobian``).
    ``revolute_only`` says that every entry of ``revolute`` is 1 (the slide blocks are then not read)."""
    constant, sine, versine, slide = local.unbind(1)
    s, one_minus_c = torch.sin(q)[:, None, None], (1.0 - torch.cos(q))[:, None, None]
    frames = torch.addcmul(constant[..., None], s, sine[..., None])
    frames = torch.addcmul(frames, one_minus_c, versine[..., None])
    if not revolute_only:
        frames = torch.addcmul(frames, q[:, None, None], slide[..., None])
    # Frame i in the root frame: R_{i-1} [R_i^local | p_i^local] = [R_i | p_i - p_{i-1}]; its z column is
    # joint i's axis. unbind/split rather than indexing: their backward concatenates instead of filling a
    # zero tensor per slice.
    frames = frames.unbind(0)
    products = [frames[0]]
    rot = frames[0].split([3, 1], 1)[0]
    for frame in frames[1:]:
        products.append(matmul(rot, frame))
        rot = products[-1].split([3, 1], 1)[0]
    _, axes, steps = torch.stack(products).split([2, 1, 1], 2)  # axes, steps: (dof, 3, 1, B)
    tip_rot, tip_step = matmul_constant(rot, end).split([3, 1], 1)
    origins = steps.squeeze(2).cumsum(0)  # (dof, 3, B) joint origins
    position = origins[-1] + tip_step.squeeze(1)
    if not with_jacobian:
        return tip_rot, position, q.new_empty(0, 6, q.shape[1])
    z = axes.squeeze(2)  # (dof, 3, B) joint axes in the root frame
    arm = position - origins
    if revolute_only:
        jac_t = torch.cat((cross(z, arm), z), 1)
    else:
        rev = revolute[:, None, None]
        jac_t = torch.cat((rev * cross(z, arm) + (1.0 - rev) * z, rev * z), 1)
    return tip_rot, position, jac_t


FK_JACOBIAN = Kernel(
    "fk_jacobian",
    "(Tensor q, Tensor local, Tensor revolute, Tensor end, bool revolute_only, bool with_jacobian)"
    " -> (Tensor, Tensor, Tensor)",
    fk_jacobian_reference,
)
FK_JACOBIAN.implement("cpu", native.fk_jacobian)
