"""The centre of mass over the support polygon: the convex hull of the contacts' sole corners on the ground,
shrunk by a margin, as linear inequalities on the step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import NamedTuple

import torch

from kinematics import native
from kinematics.batch_last import first_order, transforms_active
from kinematics.errors import ConfigError
from kinematics.model import KinematicTree, TreeState
from kinematics.native.kernel import Kernel
from kinematics.wholebody.constraints.constraint import Constraint, Linear


def _hull_edges_reference(xy: torch.Tensor, first: torch.Tensor, second: torch.Tensor):
    """The hull edges among the corner pairs ``(first, second)`` of the ground points ``xy``
    ``(..., k, 2)``, gathered into ``k`` rows, the edges first (see ``ComInSupportPolygon``)."""
    a, b = xy[..., first, :], xy[..., second, :]
    along = b - a
    length = along.norm(dim=-1, keepdim=True)
    normal = torch.stack((along[..., 1], -along[..., 0]), -1) / length.clamp_min(1e-12)
    side = torch.einsum("...pd,...kd->...pk", normal, xy) - (normal * a).sum(-1, keepdim=True)
    tol = 1e-9 if xy.dtype == torch.float64 else 1e-5
    on_line = side.abs() <= tol
    t = ((xy[..., None, :, :] - a[..., :, None, :]) * along[..., :, None, :]).sum(-1) / length.square().clamp_min(1e-24)
    between = (t >= -tol) & (t <= 1.0 + tol)
    outward = ((side <= tol) & (~on_line | between)).all(-1)  # every corner behind the line: n points out
    inward = ((side >= -tol) & (~on_line | between)).all(-1)  # every corner in front: flip n
    edge = (outward | inward) & (length[..., 0] > tol)
    normal = torch.where(inward[..., None] & ~outward[..., None], -normal, normal)
    offset = (normal * a).sum(-1)
    rows = torch.argsort((~edge).to(torch.int8), dim=-1, stable=True)[..., : xy.shape[-2]]  # the edges first
    normal = normal.gather(-2, rows[..., None].expand(*rows.shape, 2))
    return normal, offset.gather(-1, rows), edge.gather(-1, rows)


def _support_edges_reference(T: torch.Tensor, corners: torch.Tensor, owner: torch.Tensor, first, second):
    """``SUPPORT_EDGES``: the hull edges of the soles' corners ``corners`` ``(k, 4)`` (homogeneous, in the frame of
    their sole ``owner``) where the soles are posed, ``T`` ``(..., s, 4, 4)``: each corner's sole's top two rows
    applied to it, then ``_hull_edges_reference``."""
    rows = T.index_select(-3, owner)[..., :2, :]  # (..., k, 2, 4): each corner's sole's
    return _hull_edges_reference((rows * corners[:, None, :]).sum(-1), first, second)


# The posing and the hull in one call: the preparation of a step's polygon is one kernel, not a chain of small ops.
SUPPORT_EDGES = Kernel(
    "support_edges",
    "(Tensor T, Tensor corners, Tensor owner, Tensor first, Tensor second) -> (Tensor, Tensor, Tensor)",
    _support_edges_reference,
)
SUPPORT_EDGES.implement("cpu", native.support_edges)


def support_edges(T: torch.Tensor, corners: torch.Tensor, owner: torch.Tensor, first, second):
    """``SUPPORT_EDGES``, and where autograd records a graph to the soles' poses ``T`` on the CPU, its compiled
    forward and compiled backward (``native.support_edges_vjp``) instead of the reference's chain of small ops."""
    if torch.is_grad_enabled() and T.requires_grad and not transforms_active() and not torch.compiler.is_compiling():
        computed = native.support_edges(T.detach(), corners, owner, first, second)
        if computed is not None:
            return _CompiledSupportEdges.apply(T, corners, owner, first, second, computed)
    return SUPPORT_EDGES(T, corners, owner, first, second)


class _CompiledSupportEdges(torch.autograd.Function):
    """``apply(T, corners, owner, first, second, computed) -> (normal, offset, edge)``: the compiled outputs
    ``computed``, differentiable w.r.t. the soles' poses ``T``."""

    @staticmethod
    def forward(ctx, T, corners, owner, first, second, computed):
        ctx.save_for_backward(T, corners, owner, first, second)
        normal, offset, edge = computed
        ctx.mark_non_differentiable(edge)
        return normal, offset, edge

    @staticmethod
    @first_order
    def backward(ctx, grad_normal, grad_offset, _):
        T, corners, owner, first, second = ctx.saved_tensors
        rows = (T.shape[0], corners.shape[0])
        grad_normal = T.new_zeros(*rows, 2) if grad_normal is None else grad_normal
        grad_offset = T.new_zeros(rows) if grad_offset is None else grad_offset
        grad_T = native.support_edges_vjp(T.detach(), corners, owner, first, second, grad_normal, grad_offset)
        if grad_T is None:  # the library went away since the forward: the reference's gradient
            with torch.enable_grad():
                leaf = T.detach().requires_grad_(True)
                normal, offset, _ = _support_edges_reference(leaf, corners, owner, first, second)
                (grad_T,) = torch.autograd.grad((normal, offset), leaf, (grad_normal, grad_offset))
        return grad_T, None, None, None, None, None


# A row that is not a hull edge becomes ``0 dq <= INACTIVE``: always satisfied, never active, no infinity.
INACTIVE = 1e3


class HullEdges(NamedTuple):
    """The support polygon's edges: outward unit normals ``(..., k, 2)``, offsets ``(..., k)`` (``n . x <= offset``
    inside the hull) and which of the ``k`` rows are edges ``(..., k)`` bool, the edges first."""

    normal: torch.Tensor
    offset: torch.Tensor
    edge: torch.Tensor


class ComInSupportPolygon(Constraint):
    """Keep the ground projection of the centre of mass inside the support polygon, ``margin`` m from its edges.

    ``soles``: frame -> its sole corners ``(k, 3)`` in that frame. At each step the corners are posed, projected
    on the ground (x, y) and every pair of them is a candidate edge: a pair is an edge of the convex hull when
    every other corner lies on one side of its line (corners on the line must lie between the two, so a side
    with several collinear corners gives one edge). Edge ``n . c <= n . p - margin`` is linearised as
    ``n . J_xy dq <= n . p - margin - n . c``. A hull of ``k_total`` corners has at most ``k_total`` edges, so
    the edges are gathered into ``k_total`` rows, the rest inactive: the row count is fixed and nothing depends
    on data in Python. (Two corners at one ground point could make one line count twice and push out an edge;
    soles do not overlap.) The violation is how far the CoM lies outside the shrunk polygon (m).

    ``anchors``: sole frame -> the name of the contact that holds it (every sole frame, or none). With them the
    polygon is where the contacts hold the soles, built once per solve from the contacts' anchors (``prepare``);
    without them it is built at every step from where the soles are.
    """

    def __init__(
        self,
        soles: Mapping[str, Sequence[Sequence[float]]],
        margin: float = 0.0,
        name: str = "com_in_support",
        anchors: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(name)
        if margin < 0:
            raise ConfigError(f"{name}: margin must be >= 0, got {margin}")
        self.anchors = dict(anchors or {})
        if self.anchors and set(self.anchors) != set(soles):
            raise ConfigError(
                f"{name}: anchors name the contact of every sole frame or of none; soles {sorted(soles)}, "
                f"anchors {sorted(self.anchors)}"
            )
        self.soles = {frame: torch.as_tensor(corners, dtype=torch.float64) for frame, corners in soles.items()}
        total = sum(c.shape[0] for c in self.soles.values())
        if total < 3 or any(c.ndim != 2 or c.shape[1] != 3 for c in self.soles.values()):
            raise ConfigError(f"{name}: needs at least 3 sole corners, each (x, y, z), got {total}")
        self.margin = margin
        self.prepared_size = len(HullEdges._fields) if self.anchors else 0
        self.prepare_reads = tuple(self.anchors.values())
        self.frames = tuple(self.soles)
        self._corner_sole = torch.cat([torch.full((c.shape[0],), i) for i, c in enumerate(self.soles.values())])
        # (dtype, device) -> the corners (k_total, 4) in homogeneous coordinates and each corner's sole index
        self._corners: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        pairs = torch.tensor(list(combinations(range(total), 2)))
        self._first, self._second = pairs[:, 0].contiguous(), pairs[:, 1].contiguous()
        self.size = total

    def corners_xy(self, tree: KinematicTree, state: TreeState) -> torch.Tensor:
        """Every sole corner on the ground, ``(..., k_total, 2)`` (world x, y), where the soles are at ``state``."""
        return self._ground_corners([tree.frame_pose(state, frame) for frame in self.soles])

    def _ground_corners(self, T_world_soles: Sequence[torch.Tensor]) -> torch.Tensor:
        """Every corner's world (x, y) ``(..., k_total, 2)`` from its sole's pose: the sole's top two rows applied to
        the corner in homogeneous coordinates (a few ops whatever the number of soles)."""
        T, homogeneous, owner = self._posed(T_world_soles)
        rows = T.index_select(-3, owner)[..., :2, :]  # (..., k_total, 2, 4): each corner's sole's
        return (rows * homogeneous[:, None, :]).sum(-1)

    def _posed(self, T_world_soles: Sequence[torch.Tensor]):
        """The soles' poses stacked ``(..., soles, 4, 4)``, the corners in homogeneous coordinates ``(k_total, 4)``
        in their dtype and device, and each corner's sole index."""
        T = torch.stack(torch.broadcast_tensors(*T_world_soles), -3)
        key = (T.dtype, T.device)
        if key not in self._corners:
            corners = torch.cat(list(self.soles.values()), 0)
            ones = torch.ones(corners.shape[0], 1, dtype=torch.float64, device=corners.device)
            homogeneous = torch.cat((corners, ones), 1).to(dtype=T.dtype, device=T.device)
            self._corners[key] = homogeneous, self._corner_sole.to(T.device)
        return (T, *self._corners[key])

    def _posed_edges(self, T_world_soles: Sequence[torch.Tensor]) -> HullEdges:
        """The hull's edges of the corners where the soles are posed (``SUPPORT_EDGES``: one kernel)."""
        T, homogeneous, owner = self._posed(T_world_soles)
        return HullEdges(*support_edges(T, homogeneous, owner, self._first, self._second))

    def edges(self, tree: KinematicTree, state: TreeState) -> HullEdges:
        """The hull's edges (``HullEdges``) of the corners where the soles are at ``state``."""
        return self._posed_edges([tree.frame_pose(state, frame) for frame in self.soles])

    def prepare(self, tree: KinematicTree, targets: Mapping[str, torch.Tensor]) -> HullEdges | None:
        """With ``anchors``: the hull's edges where the contacts hold the soles (their anchors), once per solve. Anchors
        shared by the whole flat batch (stride 0, as a stance expanded over it is) give one hull, expanded."""
        if not self.anchors:
            return None
        anchors = [targets[self.anchors[frame]] for frame in self.soles]
        batch = anchors[0].shape[0]
        shared = batch > 1 and all(anchor.stride(0) == 0 for anchor in anchors)
        edges = self._posed_edges([anchor[:1] for anchor in anchors] if shared else anchors)
        return HullEdges(*(edge.expand(batch, *edge.shape[1:]) for edge in edges) if shared else edges)

    def inequality(self, tree: KinematicTree, state: TreeState, q: torch.Tensor, target) -> Linear:
        normal, offset, edge = target if target is not None else self.edges(tree, state)
        com_xy = tree.center_of_mass(state)[..., :2]
        J_xy = tree.com_jacobian(state)[..., :2, :]
        G = normal @ J_xy  # (..., P, nv)
        h = offset - self.margin - (normal * com_xy[..., None, :]).sum(-1)
        G = torch.where(edge[..., None], G, torch.zeros_like(G))
        h = torch.where(edge, h, torch.full_like(h, INACTIVE))
        return G, h

    def violation(self, tree: KinematicTree, state: TreeState, q: torch.Tensor, target) -> torch.Tensor:
        normal, offset, edge = target if target is not None else self.edges(tree, state)
        com_xy = tree.center_of_mass(state)[..., :2]
        outside = (normal * com_xy[..., None, :]).sum(-1) - (offset - self.margin)
        return torch.where(edge, outside, torch.full_like(outside, -INACTIVE)).amax(-1).clamp_min(0.0)

    def compiled_form(self, plan) -> bool:
        """With anchors only: the kernel reads the polygon prepared once per solve."""
        if type(self) is not ComInSupportPolygon or not self.anchors:
            return False
        plan.support_polygon(self.size, self.margin)
        return True
