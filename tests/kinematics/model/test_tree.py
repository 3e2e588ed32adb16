"""``KinematicTree`` without a reference library: Jacobians against central differences through ``integrate``,
the manifold's identities and derivatives, batching, dtypes, gradcheck, the Panda against the serial chain, and
the typed errors."""

from __future__ import annotations

import pytest
import torch

import assets
from assets import robot_file
from kinematics import (
    DtypeDeviceMismatchError,
    FrameNotFoundError,
    InvalidQuaternionError,
    KinematicTree,
    MissingInertialError,
    SerialChainKinematics,
    ShapeError,
    URDFError,
)
from kinematics.lie.rotations import so3_log

G1 = "example-robot-data/robots/g1_description/urdf/g1_29dof_rev_1_0.urdf"

# A small tree with every joint kind: a prismatic slide, a continuous joint, a mimic joint (multiplier and
# offset), a fixed joint, off-axis joint axes and two branches.
TOY = """<robot name="toy">
  <link name="base"><inertial><origin xyz="0.1 0 0.05"/><mass value="2.0"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="slider"><inertial><origin xyz="0 0.1 0"/><mass value="0.5"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="arm"><inertial><origin xyz="0.2 0 0"/><mass value="1.0"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="tool"/>
  <link name="wheel"><inertial><origin xyz="0 0 0.03"/><mass value="0.3"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="follower"><inertial><origin xyz="0.05 0.02 0"/><mass value="0.2"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="slide" type="prismatic"><parent link="base"/><child link="slider"/><origin xyz="0 0 0.3" rpy="0.1 0.2 0.3"/>
    <axis xyz="0.6 0 0.8"/><limit lower="0.1" upper="0.5" effort="1" velocity="1"/></joint>
  <joint name="shoulder" type="revolute"><parent link="slider"/><child link="arm"/><origin xyz="0.1 0.2 0" rpy="0 0.5 0"/>
    <axis xyz="0 1 1"/><limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
  <joint name="tip" type="fixed"><parent link="arm"/><child link="tool"/><origin xyz="0.4 0 0.1" rpy="0.3 0 0"/></joint>
  <joint name="spin" type="continuous"><parent link="base"/><child link="wheel"/><origin xyz="-0.2 0 0" rpy="0 0 0.7"/>
    <axis xyz="1 0 0"/></joint>
  <joint name="copy" type="revolute"><parent link="arm"/><child link="follower"/><origin xyz="0.2 0.1 0"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/><mimic joint="shoulder" multiplier="-1.5" offset="0.2"/></joint>
</robot>"""

NO_MASS = """<robot name="massless"><link name="a"/><link name="b"/>
  <joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
  <limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>"""


def _random_q(tree: KinematicTree, batch, seed: int, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    joints = torch.randn(*batch, len(tree.joint_names), generator=g, dtype=dtype)
    if not tree.floating_base:
        return joints
    quat = torch.randn(*batch, 4, generator=g, dtype=dtype)
    return torch.cat(
        (3.0 * torch.randn(*batch, 3, generator=g, dtype=dtype), quat / quat.norm(dim=-1, keepdim=True), joints), -1
    )


@pytest.fixture(scope="module")
def g1() -> KinematicTree:
    return KinematicTree.from_urdf(robot_file(G1).read_text(), floating_base=True, dtype=torch.float64)


@pytest.fixture(scope="module", params=["fixed", "free"])
def toy(request) -> KinematicTree:
    return KinematicTree.from_urdf(TOY, floating_base=request.param == "free", dtype=torch.float64)


def test_structure_of_the_toy_tree(toy):
    assert toy.joint_names == ("slide", "shoulder", "spin")
    assert toy.mimic_names == ("copy",)
    assert toy.frame_names == ("base", "slider", "arm", "tool", "follower", "wheel")
    assert (toy.nq, toy.nv) == ((10, 9) if toy.floating_base else (3, 3))
    neutral = toy.neutral()
    assert neutral[toy.base_nq :].tolist() == [0.1, 0.0, 0.0]  # 0 clamped into the slide's limits
    if toy.floating_base:
        assert neutral[:7].tolist() == [0, 0, 0, 0, 0, 0, 1.0]
        assert torch.isinf(toy.lower[:7]).all()
    assert toy.joint_lower.tolist()[:2] == [0.1, -2.0] and toy.joint_upper.tolist()[2] == float("inf")


def _central_jacobians(tree: KinematicTree, q: torch.Tensor, name: str, eps: float = 1e-6):
    """Frame (world-aligned twist) and CoM Jacobians by central differences through ``integrate``."""
    frame, com = [], []
    for i in range(tree.nv):
        step = torch.zeros(tree.nv, dtype=q.dtype)
        step[i] = eps
        plus, minus = tree.integrate(q, step), tree.integrate(q, -step)
        tp, tm = tree.frame_pose(plus, name), tree.frame_pose(minus, name)
        linear = (tp[:3, 3] - tm[:3, 3]) / (2 * eps)
        angular = so3_log(tp[:3, :3] @ tm[:3, :3].T) / (2 * eps)
        frame.append(torch.cat((linear, angular)))
        com.append((tree.center_of_mass(plus) - tree.center_of_mass(minus)) / (2 * eps))
    return torch.stack(frame, -1), torch.stack(com, -1)


@pytest.mark.parametrize("name", ["tool", "follower", "wheel", "base"])
def test_toy_jacobians_match_central_differences(toy, name):
    q = _random_q(toy, (), seed=1)
    frame, com = _central_jacobians(toy, q, name)
    torch.testing.assert_close(toy.frame_jacobian(q, name), frame, rtol=0, atol=1e-8)
    torch.testing.assert_close(toy.com_jacobian(q), com, rtol=0, atol=1e-8)


def test_toy_mimic_joint_follows_its_source(toy):
    q = _random_q(toy, (), seed=2)
    arm, follower = toy.frame_pose(q, "arm"), toy.frame_pose(q, "follower")
    relative = torch.linalg.inv(arm) @ follower
    angle = -1.5 * q[toy.base_nq + 1] + 0.2  # copy = -1.5 shoulder + 0.2, about the arm's z
    torch.testing.assert_close(
        relative[:2, :2],
        torch.stack((torch.stack((angle.cos(), -angle.sin())), torch.stack((angle.sin(), angle.cos())))),
        rtol=0,
        atol=1e-12,
    )


def test_g1_jacobians_match_central_differences(g1):
    q = _random_q(g1, (), seed=3)
    for name in ("left_ankle_roll_link", "right_wrist_yaw_link"):
        frame, com = _central_jacobians(g1, q, name)
        torch.testing.assert_close(g1.frame_jacobian(q, name), frame, rtol=0, atol=1e-8)
    torch.testing.assert_close(g1.com_jacobian(q), com, rtol=0, atol=1e-8)


def test_integrate_difference_identities_and_derivatives(g1):
    q = _random_q(g1, (3,), seed=4)
    g = torch.Generator().manual_seed(5)
    v = torch.randn(3, g1.nv, generator=g, dtype=torch.float64) * torch.tensor(
        [[1.0], [1e-3], [1e-8]], dtype=torch.float64
    )
    q1 = g1.integrate(q, v)
    torch.testing.assert_close(q1[:, 3:7].norm(dim=-1), torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(g1.difference(q, q1), v, rtol=0, atol=1e-12)
    torch.testing.assert_close(g1.difference(q, q), torch.zeros_like(v), rtol=0, atol=1e-12)
    # d integrate / dv and d difference / dq1 against central differences in tangent coordinates.
    eps = 1e-6
    dq, dv = g1.integrate_jacobians(q, v)
    d0, d1 = g1.difference_jacobians(q, q1)
    eye = torch.eye(g1.nv, dtype=torch.float64)
    for i in (0, 2, 4, 6, 10):
        e = eps * eye[i]
        num_dv = (g1.difference(q1, g1.integrate(q, v + e)) - g1.difference(q1, g1.integrate(q, v - e))) / (2 * eps)
        num_dq = (
            g1.difference(q1, g1.integrate(g1.integrate(q, e), v))
            - g1.difference(q1, g1.integrate(g1.integrate(q, -e), v))
        ) / (2 * eps)
        num_d1 = (g1.difference(q, g1.integrate(q1, e)) - g1.difference(q, g1.integrate(q1, -e))) / (2 * eps)
        num_d0 = (g1.difference(g1.integrate(q, e), q1) - g1.difference(g1.integrate(q, -e), q1)) / (2 * eps)
        for analytic, numeric in ((dv, num_dv), (dq, num_dq), (d1, num_d1), (d0, num_d0)):
            torch.testing.assert_close(analytic[..., i], numeric, rtol=0, atol=1e-7)


def test_fixed_base_manifold_is_euclidean():
    tree = KinematicTree.from_urdf(TOY, dtype=torch.float64)
    q, v = _random_q(tree, (2,), 6), _random_q(tree, (2,), 7)
    torch.testing.assert_close(tree.integrate(q, v), q + v)
    torch.testing.assert_close(tree.difference(q, v), v - q)
    dq, dv = tree.integrate_jacobians(q, v)
    assert torch.equal(dq, torch.eye(3, dtype=torch.float64).expand(2, 3, 3)) and torch.equal(dv, dq)


def test_batched_equals_per_sample_and_keeps_leading_dims(g1):
    q = _random_q(g1, (2, 3), seed=8)
    state = g1.forward_kinematics(q)
    name = "right_wrist_yaw_link"
    out = (
        g1.frame_poses(state),
        g1.frame_pose(state, name),
        g1.frame_jacobian(state, name),
        g1.center_of_mass(state),
        g1.com_jacobian(state),
    )
    shapes = [(2, 3, len(g1.frame_names), 4, 4), (2, 3, 4, 4), (2, 3, 6, g1.nv), (2, 3, 3), (2, 3, 3, g1.nv)]
    assert [tuple(x.shape) for x in out] == shapes
    for i in range(2):
        for j in range(3):
            single = q[i, j]
            ref = (
                g1.frame_poses(single),
                g1.frame_pose(single, name),
                g1.frame_jacobian(single, name),
                g1.center_of_mass(single),
                g1.com_jacobian(single),
            )
            for batched, one in zip(out, ref, strict=True):
                torch.testing.assert_close(batched[i, j], one, rtol=0, atol=1e-12)
    # The single-frame pose without a full pass equals the one read from all frames.
    torch.testing.assert_close(g1.frame_pose(q, name), out[0][..., g1.frame_names.index(name), :, :])
    assert g1.frame_poses(q[:0]).shape == (0, 3, len(g1.frame_names), 4, 4)


def test_float32_close_to_float64(g1):
    tree32 = KinematicTree.from_urdf(robot_file(G1).read_text(), floating_base=True)
    q = _random_q(g1, (5,), seed=9)
    s64, s32 = g1.forward_kinematics(q), tree32.forward_kinematics(q.float())
    torch.testing.assert_close(tree32.frame_poses(s32).double(), g1.frame_poses(s64), rtol=0, atol=1e-5)
    torch.testing.assert_close(tree32.com_jacobian(s32).double(), g1.com_jacobian(s64), rtol=0, atol=1e-5)
    name = "left_ankle_roll_link"
    torch.testing.assert_close(
        tree32.frame_jacobian(s32, name).double(), g1.frame_jacobian(s64, name), rtol=0, atol=1e-5
    )


def test_gradcheck_pose_and_com(toy):
    q0 = _random_q(toy, (1,), seed=10)
    base = toy.base_nq

    def through_tangent(v):  # the quaternion moves on its sphere: through integrate
        q = toy.integrate(q0, v)
        return toy.frame_pose(q, "follower"), toy.center_of_mass(q), toy.frame_jacobian(q, "tool")

    v = (0.1 * torch.randn(1, toy.nv, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(through_tangent, (v,))
    joints = q0[:, base:].clone().requires_grad_()
    position = q0[:, :3].clone().requires_grad_()

    def direct(joints, position):
        q = torch.cat((position, q0[:, 3:7], joints), -1) if toy.floating_base else joints
        return toy.frame_poses(q), toy.com_jacobian(q)

    assert torch.autograd.gradcheck(direct, (joints, position))


def test_panda_tree_matches_the_serial_chain():
    text = assets.PANDA.urdf_text()
    chain = SerialChainKinematics.from_urdf(text, "panda_hand_tcp", dtype=torch.float64)
    tree = KinematicTree.from_urdf(text, dtype=torch.float64)
    # + the first finger; the second finger mimics it
    assert tree.joint_names[:7] == chain.joint_names and tree.joint_names[7:] == ("panda_finger_joint1",)
    assert tree.mimic_names == ("panda_finger_joint2",)
    q = _random_q(tree, (6,), seed=11)
    pose, jacobian = chain.fk_and_jacobian(q[:, :7])
    torch.testing.assert_close(tree.frame_pose(q, "panda_hand_tcp"), pose, rtol=0, atol=1e-12)
    tree_jacobian = tree.frame_jacobian(q, "panda_hand_tcp")
    torch.testing.assert_close(tree_jacobian[..., :7], jacobian, rtol=0, atol=1e-12)
    assert torch.equal(tree_jacobian[..., 7:], torch.zeros(6, 6, 1, dtype=torch.float64))  # a finger: no ancestor


def test_typed_errors(g1):
    with pytest.raises(FrameNotFoundError, match="left_ankle_roll_link"):
        g1.frame_pose(g1.neutral(), "left_ankle_rol_link")
    with pytest.raises(KeyError):  # FrameNotFoundError is a KeyError too
        g1.frame_jacobian(g1.neutral(), "nope")
    with pytest.raises(ShapeError, match=r"\(\.\.\., 36\)"):
        g1.frame_poses(torch.zeros(4, 35, dtype=torch.float64))
    with pytest.raises(ShapeError):
        g1.forward_kinematics(torch.tensor(1.0, dtype=torch.float64))
    with pytest.raises(ShapeError):
        g1.integrate(g1.neutral(), torch.zeros(36, dtype=torch.float64))
    with pytest.raises(DtypeDeviceMismatchError):
        g1.frame_poses(g1.neutral().float())
    bad = g1.neutral().repeat(3, 1)
    bad[1, 3:7] = torch.tensor([0.0, 0.0, 0.0, 1.01], dtype=torch.float64)
    with pytest.raises(InvalidQuaternionError, match=r"batch index \(1,\)"):
        g1.center_of_mass(bad)
    with pytest.raises(InvalidQuaternionError):
        g1.check_quaternion(torch.full((36,), float("nan"), dtype=torch.float64))
    g1.forward_kinematics(bad, validate=False)  # the caller's choice: no check, no synchronisation
    slightly = g1.neutral()
    slightly[6] = 1.0 + 5e-4  # within the stated tolerance: accepted, read as normalised
    torch.testing.assert_close(g1.frame_poses(slightly), g1.frame_poses(g1.neutral()))
    massless = KinematicTree.from_urdf(NO_MASS)
    massless.frame_poses(massless.neutral())
    with pytest.raises(MissingInertialError):
        massless.center_of_mass(massless.neutral())
    with pytest.raises(MissingInertialError):
        massless.com_jacobian(massless.neutral())
    other = KinematicTree.from_urdf(NO_MASS)
    with pytest.raises(ShapeError, match="another KinematicTree"):
        other.frame_poses(massless.forward_kinematics(massless.neutral()))
    with pytest.raises(URDFError):
        KinematicTree.from_urdf("<robot name='x'><link name='a'/><link name='b'/></robot>")  # two roots
    with pytest.raises(URDFError, match="mimics"):
        KinematicTree.from_urdf(TOY.replace('mimic joint="shoulder"', 'mimic joint="tip"'))


# ------------------------------------------------------------------------------- compiled pass (native kernels)
def _every_quantity(tree: KinematicTree, q: torch.Tensor) -> list[torch.Tensor]:
    state = tree.forward_kinematics(q)
    out = [state.nodes, tree.frame_poses(state), tree.center_of_mass(state), tree.com_jacobian(state)]
    out += [tree.frame_poses(state, batch_last=True), tree.center_of_mass(state, batch_last=True)]
    out.append(tree.com_jacobian(state, batch_last=True))
    for name in tree.frame_names:
        out += [tree.frame_pose(state, name), tree.frame_jacobian(state, name)]
        out += [tree.frame_pose(state, name, batch_last=True), tree.frame_jacobian(state, name, batch_last=True)]
    return out


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("robot", ["toy", "g1"])
@pytest.mark.parametrize("floating_base", [False, True])
@pytest.mark.parametrize("batch", [(), (1,), (3, 11), (70,)])  # tile edges: the kernels walk 32 samples at a time
def test_compiled_pass_equals_the_torch_pass(robot, floating_base, dtype, batch):
    from kinematics import native

    if native.library() is None:
        pytest.skip("no compiled kernels on this machine")
    text = TOY if robot == "toy" else robot_file(G1).read_text()
    tree = KinematicTree.from_urdf(text, floating_base=floating_base, dtype=dtype)
    q = _random_q(tree, batch, seed=21).to(dtype)
    state = tree.forward_kinematics(q)
    assert native.tree_frames(state.nodes, tree.frame_offset, tree.frame_slot) is not None  # the kernel ran
    compiled = _every_quantity(tree, q)
    with native.disabled():
        reference = _every_quantity(tree, q)
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    for got, want in zip(compiled, reference, strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=0, atol=tol)


def test_batch_last_accessors_are_the_public_results_transposed(g1):
    q = _random_q(g1, (2, 5), seed=22)
    state = g1.forward_kinematics(q)
    poses = g1.frame_poses(state).reshape(10, -1, 4, 4)
    torch.testing.assert_close(
        g1.frame_poses(state, batch_last=True), poses[:, :, :3].permute(1, 2, 3, 0), rtol=0, atol=0
    )
    name = "right_wrist_yaw_link"
    torch.testing.assert_close(
        g1.frame_pose(state, name, batch_last=True), poses[:, g1.frame_index(name), :3].permute(1, 2, 0)
    )
    jacobian = g1.frame_jacobian(state, name).reshape(10, 6, g1.nv)
    torch.testing.assert_close(
        g1.frame_jacobian(state, name, batch_last=True), jacobian.permute(1, 2, 0), rtol=0, atol=0
    )
    com, com_jacobian = g1.center_of_mass(state).reshape(10, 3), g1.com_jacobian(state).reshape(10, 3, g1.nv)
    torch.testing.assert_close(g1.center_of_mass(state, batch_last=True), com.t(), rtol=0, atol=0)
    torch.testing.assert_close(g1.com_jacobian(state, batch_last=True), com_jacobian.permute(1, 2, 0), rtol=0, atol=0)
    with torch.enable_grad():  # the torch pass (autograd) gives the same batch-last layouts
        traced = g1.forward_kinematics(q.clone().requires_grad_())
        assert traced.nodes.requires_grad
        torch.testing.assert_close(g1.com_jacobian(traced, batch_last=True), com_jacobian.permute(1, 2, 0))
        torch.testing.assert_close(g1.frame_jacobian(traced, name, batch_last=True), jacobian.permute(1, 2, 0))
        torch.testing.assert_close(g1.frame_poses(traced, batch_last=True), poses[:, :, :3].permute(1, 2, 3, 0))


def test_compiled_angles_match_libm_far_out_and_pass_nan():
    """The kernel's own sine / cosine (Cody-Waite reduction, Taylor series; libm beyond 1e6 rad)."""
    text = """<robot name="r"><link name="a"/><link name="b"/><joint name="j" type="continuous">
      <parent link="a"/><child link="b"/><axis xyz="0 0 1"/></joint></robot>"""
    tree = KinematicTree.from_urdf(text, dtype=torch.float64)
    x = torch.cat((torch.linspace(-60.0, 60.0, 20001, dtype=torch.float64), torch.tensor([3e5, -2e6, 1e12])))
    pose = tree.frame_pose(x[:, None], "b")
    torch.testing.assert_close(pose[:, 0, 0], torch.cos(x), rtol=0, atol=4e-16)
    torch.testing.assert_close(pose[:, 1, 0], torch.sin(x), rtol=0, atol=4e-16)
    assert torch.isnan(
        tree.frame_pose(torch.tensor([[float("nan")], [float("inf")]], dtype=torch.float64), "b")[:, :2, :2]
    ).all()


def test_inputs_that_record_a_graph_take_the_torch_pass(g1):
    from kinematics import native

    q = _random_q(g1, (3,), seed=23).requires_grad_()
    state = g1.forward_kinematics(q)
    assert state.nodes.grad_fn is not None
    assert native.tree_frames(state.nodes, g1.frame_offset, g1.frame_slot) is None
    g1.com_jacobian(state).sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_the_former_batch_last_names_are_gone(g1):
    for former in (
        "frame_poses_batch_last",
        "frame_pose_batch_last",
        "frame_jacobian_batch_last",
        "center_of_mass_batch_last",
        "com_jacobian_batch_last",
    ):
        assert not hasattr(g1, former), former
