"""Whole-body tasks and constraints on the G1: each task's Jacobian predicts how its error moves along a step
(central differences through ``integrate``), errors vanish at their own targets, the relative-frame task equals
its definition, and the support polygon is the convex hull of the sole corners."""

from __future__ import annotations

import pytest
import torch

import assets
from kinematics import ConfigError, KinematicTree, ShapeError
from kinematics.wholebody import (
    ComInSupportPolygon,
    ComTask,
    ConfigurationLimit,
    Contact,
    FrameTask,
    PostureTask,
    RelativeFrameTask,
    StepLimit,
)

G1 = assets.G1


@pytest.fixture(scope="module")
def g1() -> KinematicTree:
    return KinematicTree.from_urdf(G1.urdf_text(), floating_base=True, dtype=torch.float64)


def standing(tree: KinematicTree, batch: int = 1, spread: float = 0.0, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q = tree.neutral().expand(batch, -1).clone()
    q[:, 2] = G1.standing_base_height
    q[:, 7:] = torch.tensor(G1.reference_posture, dtype=torch.float64)
    if spread:
        q[:, :3] += spread * torch.randn(batch, 3, generator=g, dtype=torch.float64)
        quat = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64) + spread * torch.randn(
            batch, 4, generator=g, dtype=torch.float64
        )
        q[:, 3:7] = quat / quat.norm(dim=-1, keepdim=True)
        q[:, 7:] += spread * torch.randn(batch, tree.nv - 6, generator=g, dtype=torch.float64)
    return q


def tasks(tree: KinematicTree):
    hand, torso = G1.frames["right_hand"], G1.frames["torso"]
    return [
        FrameTask("hand", hand, position_cost=(1.0, 2.0, 3.0), orientation_cost=0.5),
        FrameTask("hand_position", hand, kind="position"),
        FrameTask("hand_orientation", hand, kind="orientation"),
        ComTask("com", cost=(1.0, 1.0, 0.0)),
        PostureTask(tree),
        RelativeFrameTask("hand_in_torso", hand, torso),
    ]


def current_value_as_target(task, tree, q):
    state = tree.forward_kinematics(q)
    if isinstance(task, FrameTask):
        return tree.frame_pose(state, task.frame)
    if isinstance(task, ComTask):
        return tree.center_of_mass(state)
    if isinstance(task, PostureTask):
        return q[..., 7:].clone()
    return RelativeFrameTask.relative_pose(tree, state, task.frame, task.root)


@pytest.mark.parametrize("index", range(6), ids=["pose", "position", "orientation", "com", "posture", "relative"])
def test_a_task_jacobian_predicts_its_error_along_a_step(g1, index) -> None:
    """At the task's own target (error 0) the error along ``integrate(q, eps v)`` moves by ``-eps J v``."""
    task = tasks(g1)[index]
    q = standing(g1, batch=3, spread=0.3)
    target = current_value_as_target(task, g1, q)
    state = g1.forward_kinematics(q)
    error = task.error(g1, state, q, target)
    assert error.shape == (3, task.size) and error.abs().max() < 1e-12
    J = task.jacobian(g1, state, q)
    assert J.shape == (3, task.size, g1.nv)
    v = torch.randn(3, g1.nv, dtype=torch.float64, generator=torch.Generator().manual_seed(index))
    eps = 1e-6

    def err_at(s: float) -> torch.Tensor:
        qs = g1.integrate(q, s * v)
        return task.error(g1, g1.forward_kinematics(qs), qs, target)

    numeric = (err_at(eps) - err_at(-eps)) / (2 * eps)
    torch.testing.assert_close(numeric, -(J @ v[..., None])[..., 0], atol=1e-7, rtol=1e-6)


def test_the_relative_pose_is_the_root_inverse_times_the_frame(g1) -> None:
    q = standing(g1, batch=2, spread=0.5)
    state = g1.forward_kinematics(q)
    hand, torso = G1.frames["right_hand"], G1.frames["torso"]
    expected = torch.linalg.inv(g1.frame_pose(state, torso)) @ g1.frame_pose(state, hand)
    torch.testing.assert_close(RelativeFrameTask.relative_pose(g1, state, hand, torso), expected)


def test_a_frame_task_error_is_target_minus_current(g1) -> None:
    q = standing(g1)
    task = FrameTask("hand", G1.frames["right_hand"])
    target = current_value_as_target(task, g1, q).clone()
    target[..., :3, 3] += torch.tensor([0.01, -0.02, 0.03], dtype=torch.float64)
    error = task.error(g1, g1.forward_kinematics(q), q, target)
    torch.testing.assert_close(error[0, :3], torch.tensor([0.01, -0.02, 0.03], dtype=torch.float64))
    torch.testing.assert_close(error[0, 3:], torch.zeros(3, dtype=torch.float64))


def test_costs_gains_and_targets_are_checked(g1) -> None:
    with pytest.raises(ConfigError, match="cost"):
        ComTask(cost=(1.0, 2.0))
    with pytest.raises(ConfigError, match="gain"):
        ComTask(gain=0.0)
    with pytest.raises(ConfigError, match="kind"):
        FrameTask("hand", "x", kind="twist")
    with pytest.raises(ShapeError, match=r"\(3,\)"):
        ComTask().check_target(torch.zeros(2, 4))
    with pytest.raises(ConfigError, match="positive"):
        StepLimit(0.0)


def test_a_contact_asks_for_the_drift_back_and_reports_it(g1) -> None:
    q = standing(g1)
    foot = G1.frames["left_foot"]
    contact = Contact("left_foot", foot)
    state = g1.forward_kinematics(q)
    anchor = g1.frame_pose(state, foot).clone()
    anchor[..., 2, 3] += 0.002
    A, b = contact.equality(g1, state, q, anchor)
    torch.testing.assert_close(A, g1.frame_jacobian(state, foot))
    torch.testing.assert_close(b[0], torch.tensor([0, 0, 0.002, 0, 0, 0], dtype=torch.float64))
    torch.testing.assert_close(contact.violation(g1, state, q, anchor), torch.tensor([0.002], dtype=torch.float64))


def test_limits_are_bounds_on_the_step(g1) -> None:
    q = standing(g1)
    lb, ub = ConfigurationLimit().bounds(g1, g1.forward_kinematics(q), q)
    assert torch.isinf(lb[0, :6]).all() and torch.isinf(ub[0, :6]).all()
    torch.testing.assert_close(lb[0, 6:], g1.joint_lower - q[0, 7:])
    torch.testing.assert_close(ub[0, 6:], g1.joint_upper - q[0, 7:])
    outside = q.clone()
    outside[0, 7 + 3] = g1.joint_upper[3] + 0.1  # a knee past its limit
    violation = ConfigurationLimit().violation(g1, g1.forward_kinematics(outside), outside, None)
    torch.testing.assert_close(violation, torch.tensor([0.1], dtype=torch.float64))
    lb, ub = StepLimit(0.1).bounds(g1, None, q)
    assert lb.shape == (1, g1.nv) and (ub == 0.1).all() and (lb == -0.1).all()


def _soles():
    return {c.link: c.corners for c in G1.contacts.values()}


def test_the_support_polygon_is_the_hull_of_the_sole_corners(g1) -> None:
    """Standing with the feet side by side, the hull of the eight corners is a hexagon-free rectangle-ish shape:
    its edges are exactly those of ``scipy.spatial.ConvexHull`` of the same points, heel and toe lines once."""
    scipy_spatial = pytest.importorskip("scipy.spatial")
    q = standing(g1, batch=4, spread=0.05)
    polygon = ComInSupportPolygon(_soles(), margin=0.01)
    state = g1.forward_kinematics(q)
    xy = polygon.corners_xy(g1, state)
    normal, offset, edge = polygon.edges(g1, state)
    for row in range(4):
        hull = scipy_spatial.ConvexHull(xy[row].numpy())
        ours = torch.cat((normal[row][edge[row]], offset[row][edge[row], None]), -1)
        theirs = torch.as_tensor(hull.equations, dtype=torch.float64)  # n . x + c <= 0
        theirs = torch.cat((theirs[:, :2], -theirs[:, 2:]), -1)
        assert len(ours) == len(theirs), (len(ours), len(theirs))
        for line in theirs:
            assert (ours - line).abs().amax(-1).min() < 1e-9


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_compiled_hull_edges_equal_the_torch_reference(dtype) -> None:
    """The compiled hull test against its torch reference: random corners, two feet apart, collinear corners
    (one side of several points is one edge) and coincident ones (each corner its own "sole" placed at the point, so
    the kernel's posing gives the points themselves)."""
    from kinematics import native
    from kinematics.wholebody.constraints.support_polygon import _hull_edges_reference

    if native.library() is None:
        pytest.skip("no compiled kernels here")
    polygon = ComInSupportPolygon(_soles())
    g = torch.Generator().manual_seed(3)
    xy = torch.rand(400, polygon.size, 2, generator=g, dtype=torch.float64)
    xy[:100, 4:] = xy[:100, :4] + 0.3
    xy[100:200, 2] = 0.5 * (xy[100:200, 0] + xy[100:200, 1])
    xy[200:250, 3] = xy[200:250, 1]
    xy = xy.to(dtype)
    T = torch.eye(4, dtype=dtype).repeat(400, polygon.size, 1, 1)
    T[..., :2, 3] = xy
    origin = torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=dtype).expand(polygon.size, 4).contiguous()
    owner = torch.arange(polygon.size)
    compiled = native.support_edges(T, origin, owner, polygon._first, polygon._second)
    assert compiled is not None
    reference = _hull_edges_reference(xy, polygon._first, polygon._second)
    assert torch.equal(compiled[2], reference[2])
    for ours, theirs in zip(compiled[:2], reference[:2], strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-6 if dtype == torch.float32 else 1e-12, rtol=0)
    assert (compiled[2].sum(-1) >= 3).all() and (compiled[2].sum(-1) <= polygon.size).all()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_compiled_support_edges_pose_the_corners_and_equal_the_torch_reference(dtype) -> None:
    """The polygon's preparation in one kernel (the soles posed, then the hull) against its torch reference: random
    sole poses, one foot on the other's corners (collinear and coincident corners); an owner that is no sole gives
    NaN and no edge, nothing read out of bounds."""
    from kinematics import native
    from kinematics.lie import so3_exp
    from kinematics.wholebody.constraints.support_polygon import _support_edges_reference

    if native.library() is None:
        pytest.skip("no compiled kernels here")
    polygon = ComInSupportPolygon(_soles())
    g = torch.Generator().manual_seed(5)
    T = torch.eye(4, dtype=torch.float64).repeat(300, 2, 1, 1)
    T[:, :, :3, :3] = so3_exp(torch.randn(300, 2, 3, generator=g, dtype=torch.float64))
    T[:, :, :3, 3] = 0.3 * torch.rand(300, 2, 3, generator=g, dtype=torch.float64)
    T[:50, 1] = T[:50, 0]  # both soles in one place
    T = T.to(dtype)
    _, homogeneous, owner = polygon._posed([T[:, 0], T[:, 1]])
    compiled = native.support_edges(T, homogeneous, owner, polygon._first, polygon._second)
    assert compiled is not None
    reference = _support_edges_reference(T, homogeneous, owner, polygon._first, polygon._second)
    assert torch.equal(compiled[2], reference[2])
    for ours, theirs in zip(compiled[:2], reference[:2], strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-5 if dtype == torch.float32 else 1e-12, rtol=0)
    wrong = owner.clone()
    wrong[3] = 2  # two soles: indices 0 and 1
    normal, offset, edge = native.support_edges(T, homogeneous, wrong, polygon._first, polygon._second)
    assert normal.isnan().all() and offset.isnan().all() and not edge.any()


def test_the_compiled_support_edges_gradient_is_the_references_and_the_derivative() -> None:
    """A graph to the soles' poses takes the compiled forward and backward (``native.support_edges_vjp``): the
    gradient of random weights on the normals and offsets equals the torch reference's (float64, 1e-12 of its
    scale, random poses of two soles apart) and central differences of the reference (1e-6)."""
    from kinematics import native
    from kinematics.lie import so3_exp
    from kinematics.wholebody.constraints.support_polygon import _support_edges_reference, support_edges

    if native.library() is None:
        pytest.skip("no compiled kernels here")
    polygon = ComInSupportPolygon(_soles())
    g = torch.Generator().manual_seed(7)
    T = torch.eye(4, dtype=torch.float64).repeat(40, 2, 1, 1)
    T[:, :, :3, :3] = so3_exp(0.3 * torch.randn(40, 2, 3, generator=g, dtype=torch.float64))
    T[:, :, :3, 3] = 0.05 * torch.randn(40, 2, 3, generator=g, dtype=torch.float64)
    T[:, 1, 1, 3] += 0.2  # the second sole beside the first
    _, homogeneous, owner = polygon._posed([T[:, 0], T[:, 1]])
    weights = torch.randn(40, polygon.size, 3, generator=g, dtype=torch.float64)

    def loss(function, poses):
        normal, offset, _ = function(poses, homogeneous, owner, polygon._first, polygon._second)
        return (normal * weights[..., :2]).sum() + (offset * weights[..., 2]).sum()

    leaf = T.clone().requires_grad_(True)
    compiled = loss(support_edges, leaf)
    assert any(type(f[0]).__name__ == "_CompiledSupportEdgesBackward" for f in _grad_fns(compiled))
    (ours,) = torch.autograd.grad(compiled, leaf)
    reference_leaf = T.clone().requires_grad_(True)
    (theirs,) = torch.autograd.grad(loss(_support_edges_reference, reference_leaf), reference_leaf)
    torch.testing.assert_close(ours, theirs, atol=1e-12 * float(theirs.abs().max()), rtol=0)
    direction = torch.randn(T.shape, generator=g, dtype=torch.float64)
    direction[..., 3, :] = 0
    h = 1e-6
    with torch.no_grad():
        plus, minus = (loss(_support_edges_reference, T + sign * h * direction) for sign in (1, -1))
    assert float((plus - minus) / (2 * h)) == pytest.approx(float((ours * direction).sum()), rel=1e-6, abs=1e-8)


def _grad_fns(tensor):
    """Every autograd node below ``tensor``'s."""
    seen, stack = [], [(tensor.grad_fn, 0)]
    while stack:
        node = stack.pop()
        if node[0] is None or any(node[0] is s[0] for s in seen):
            continue
        seen.append(node)
        stack.extend(node[0].next_functions)
    return seen


def test_the_polygon_constraint_is_the_linearised_hull_test(g1) -> None:
    q = standing(g1, batch=2, spread=0.05)
    polygon = ComInSupportPolygon(_soles(), margin=0.02)
    state = g1.forward_kinematics(q)
    G, h = polygon.inequality(g1, state, q, None)
    assert G.shape == (2, polygon.size, g1.nv) and h.shape == (2, polygon.size)
    normal, offset, edge = polygon.edges(g1, state)
    com = g1.center_of_mass(state)[:, :2]
    inside = ((normal * com[:, None]).sum(-1) <= offset - 0.02) | ~edge
    assert ((h >= 0) == inside).all(), "a zero step satisfies the rows exactly where the CoM is inside"
    assert (polygon.violation(g1, state, q, None) == 0).all()
    far = q.clone()
    far[:, 0] += 1.0  # the whole robot moves forward: the CoM moves with the feet, still inside
    assert (polygon.violation(g1, g1.forward_kinematics(far), far, None) == 0).all()
    leaning = q.clone()
    leaning[:, 7 + 12 + 2] = 0.5  # waist pitch: the torso leans forward; the CoM moves towards the toes
    assert (polygon.violation(g1, g1.forward_kinematics(leaning), leaning, None) >= 0).all()


def test_an_anchored_polygon_is_built_from_the_contacts_anchors_once_per_solve(g1) -> None:
    """With ``anchors``, ``prepare`` builds the hull where the contacts hold the soles: at the standing feet it is
    the hull of the feet where they stand; moving one anchor moves it, whatever the configuration; the rows and the
    violation read it. Anchors name the contact of every sole frame or of none."""
    from kinematics.wholebody.constraints.support_polygon import _hull_edges_reference

    q = standing(g1, batch=3, spread=0.05)
    state = g1.forward_kinematics(q)
    anchors = {c.link: role for role, c in G1.contacts.items()}
    polygon = ComInSupportPolygon(_soles(), margin=0.02, anchors=anchors)
    assert ComInSupportPolygon(_soles()).prepare(g1, {}) is None, "without anchors: built at every step"
    targets = {role: g1.frame_pose(state, c.link) for role, c in G1.contacts.items()}
    prepared = polygon.prepare(g1, targets)
    for ours, theirs in zip(prepared, polygon.edges(g1, state), strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-12, rtol=0)
    rows = zip(polygon.inequality(g1, state, q, prepared), polygon.inequality(g1, state, q, None), strict=True)
    for ours, theirs in rows:
        torch.testing.assert_close(ours, theirs, atol=1e-12, rtol=0)
    moved = {role: T.clone() for role, T in targets.items()}
    role, contact = next(iter(G1.contacts.items()))
    moved[role][:, 0, 3] += 0.05  # one foot's anchor 5 cm forward: that sole's corners 5 cm forward
    front = polygon.prepare(g1, moved)
    xy = polygon.corners_xy(g1, state).clone()
    links = list(_soles())
    first = sum(len(_soles()[link]) for link in links[: links.index(contact.link)])  # its first corner
    xy[:, first : first + len(contact.corners), 0] += 0.05
    for ours, theirs in zip(front, _hull_edges_reference(xy, polygon._first, polygon._second), strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-12, rtol=0)
    h_moved, h_here = polygon.inequality(g1, state, q, front)[1], polygon.inequality(g1, state, q, prepared)[1]
    assert (h_moved - h_here).abs().amax() > 1e-3, "the rows read the prepared polygon"
    assert polygon.violation(g1, state, q, front).shape == (3,)
    with pytest.raises(ConfigError, match="every sole frame or of none"):
        ComInSupportPolygon(_soles(), anchors=dict(list(anchors.items())[:1]))


def test_anchors_shared_by_the_batch_give_one_hull_expanded_and_the_same_edges(g1) -> None:
    """A stance expanded over a flat batch (stride 0): one hull, expanded (stride 0 too), equal to the hull of every
    row built on its own; anchors that differ by row are each built."""
    q = standing(g1, batch=1)
    state = g1.forward_kinematics(q)
    anchors = {c.link: role for role, c in G1.contacts.items()}
    polygon = ComInSupportPolygon(_soles(), margin=0.02, anchors=anchors)
    stance = {role: g1.frame_pose(state, c.link) for role, c in G1.contacts.items()}
    shared = {role: T.expand(5, 4, 4) for role, T in stance.items()}
    copied = {role: T.contiguous() for role, T in shared.items()}
    once, each = polygon.prepare(g1, shared), polygon.prepare(g1, copied)
    for ours, theirs in zip(once, each, strict=True):
        assert ours.shape == theirs.shape and ours.stride(0) == 0
        torch.testing.assert_close(ours, theirs, atol=0, rtol=0)
    moved = {role: T.clone() for role, T in copied.items()}
    next(iter(moved.values()))[2, 0, 3] += 0.05  # one row's foot forward: that row's hull differs
    built = polygon.prepare(g1, moved)
    assert built.offset.stride(0) != 0 and not torch.equal(built.offset[2], once.offset[2])
