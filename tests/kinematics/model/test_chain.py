"""``SerialChainKinematics`` on its own: Jacobian against autograd and finite differences, batching and
broadcasting, chain extraction (fixed joints folded, off-chain joints ignored), default seeds, errors."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest
import torch

import assets
from kinematics import (
    KinematicsLayer,
    LinkNotFoundError,
    NotAChainError,
    ProjectError,
    SerialChainKinematics,
    URDFError,
)
from kinematics.model.urdf import PRISMATIC, REVOLUTE

PANDA_ROOT, PANDA_TCP = assets.PANDA.root_link, assets.PANDA.frames["tcp"]
PR2_JOINTS = (
    "torso_lift_joint",
    "r_shoulder_pan_joint",
    "r_shoulder_lift_joint",
    "r_upper_arm_roll_joint",
    "r_elbow_flex_joint",
    "r_forearm_roll_joint",
    "r_wrist_flex_joint",
    "r_wrist_roll_joint",
)
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])


@pytest.fixture(scope="module")
def pr2(pr2_urdf, chain_of) -> SerialChainKinematics:
    return chain_of(pr2_urdf, "base_link", "r_gripper_tool_frame", torch.float64)


@pytest.fixture(scope="module")
def panda_chain(panda_urdf, chain_of) -> SerialChainKinematics:
    return chain_of(panda_urdf, PANDA_ROOT, PANDA_TCP, torch.float64)


def _vee(s: torch.Tensor) -> torch.Tensor:
    """Rotation vector of the skew part of ``(..., 3, 3)``."""
    a = 0.5 * (s - s.transpose(-1, -2))
    return torch.stack((a[..., 2, 1], a[..., 0, 2], a[..., 1, 0]), -1)


def _jacobian_from_pose_derivative(d_pose: torch.Tensor, pose: torch.Tensor) -> torch.Tensor:
    """``d_pose (4, 4, dof)`` -> ``(6, dof)``: linear rows dp/dq, angular rows vee(dR/dq R^T)."""
    linear = d_pose[:3, 3, :]
    rot = pose[:3, :3]
    angular = torch.stack([_vee(d_pose[:3, :3, i] @ rot.T) for i in range(d_pose.shape[-1])], -1)
    return torch.cat((linear, angular), 0)


# --------------------------------------------------------------------------------------------------
# Jacobian against autograd and finite differences (float64)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("robot", ["panda", "pr2"])
def test_analytic_jacobian_equals_autograd_of_fk(robot, panda_chain, pr2, sample_joints):
    chain = panda_chain if robot == "panda" else pr2
    for q in sample_joints(chain.lower, chain.upper, 4, seed=21):
        pose, jac = chain.fk_and_jacobian(q)
        d_pose = torch.autograd.functional.jacobian(chain.forward_kinematics, q)  # (4, 4, dof)
        expected = _jacobian_from_pose_derivative(d_pose, pose)
        torch.testing.assert_close(jac, expected, rtol=0, atol=1e-12)
        # The last row of the pose is constant.
        assert d_pose[3].abs().max() == 0


@pytest.mark.parametrize("robot", ["panda", "pr2"])
def test_analytic_jacobian_equals_central_finite_differences(robot, panda_chain, pr2, sample_joints):
    chain = panda_chain if robot == "panda" else pr2
    eps = 1e-6
    for q in sample_joints(chain.lower, chain.upper, 4, seed=22):
        pose, jac = chain.fk_and_jacobian(q)
        steps = eps * torch.eye(chain.dof, dtype=q.dtype)
        plus, minus = chain.forward_kinematics(q + steps), chain.forward_kinematics(q - steps)  # (dof, 4, 4)
        d_pose = ((plus - minus) / (2 * eps)).permute(1, 2, 0)
        expected = _jacobian_from_pose_derivative(d_pose, pose)
        torch.testing.assert_close(jac, expected, rtol=0, atol=1e-8)


def test_jacobian_is_differentiable_in_q(panda_chain, sample_joints):
    """Autograd flows through J(q) (it is built from torch ops on the FK intermediates)."""
    q = sample_joints(panda_chain.lower, panda_chain.upper, 2, seed=23).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: panda_chain.fk_and_jacobian(x)[1], (q,))


def test_prismatic_joint_translates_along_its_axis(pr2, sample_joints):
    """PR2's torso lift is prismatic along the base z axis: moving it by d shifts the tool by (0, 0, d)."""
    q = sample_joints(pr2.lower, pr2.upper, 3, seed=24)
    assert pr2.joints[0].name == "torso_lift_joint" and pr2.joints[0].kind == PRISMATIC
    lifted = q.clone()
    lifted[:, 0] += 0.05
    before, after = pr2.forward_kinematics(q), pr2.forward_kinematics(lifted)
    torch.testing.assert_close(after[:, :3, :3], before[:, :3, :3], rtol=0, atol=1e-14)
    torch.testing.assert_close(
        after[:, :3, 3] - before[:, :3, 3], torch.tensor([0.0, 0.0, 0.05], dtype=q.dtype).expand(3, 3)
    )
    jac = pr2.fk_and_jacobian(q)[1]
    torch.testing.assert_close(jac[:, :, 0], torch.tensor([0.0, 0, 1, 0, 0, 0], dtype=q.dtype).expand(3, 6))


TOY_URDF = """<?xml version="1.0"?>
<robot name="toy">
  <link name="base"/><link name="a"/><link name="b"/><link name="c"/><link name="tip"/>
  <joint name="slide" type="prismatic">
    <parent link="base"/><child link="a"/>
    <origin xyz="1 0 0" rpy="0 0 1.5707963267948966"/>
    <axis xyz="1 0 0"/>
    <limit lower="-0.5" upper="0.5" effort="1" velocity="1"/>
  </joint>
  <joint name="bolt" type="fixed">
    <parent link="a"/><child link="b"/>
    <origin xyz="0 0 2" rpy="0 0 0"/>
  </joint>
  <joint name="spin" type="{spin_type}">
    <parent link="b"/><child link="c"/>
    <origin xyz="0 0 0" rpy="0 0 0"/>
    <axis xyz="0 0 {axis_z}"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
  <joint name="tip_joint" type="fixed">
    <parent link="c"/><child link="tip"/>
    <origin xyz="0.5 0 0" rpy="0 0 0"/>
  </joint>
</robot>
"""


def _toy(spin_type: str = "revolute", axis_z: str = "2") -> str:
    return TOY_URDF.format(spin_type=spin_type, axis_z=axis_z)


def test_toy_chain_matches_hand_computed_fk():
    """A prismatic joint behind a rotated origin, a fixed joint, a revolute joint with a long axis."""
    chain = SerialChainKinematics.from_urdf(_toy(), end_link_name="tip", root_link_name="base", dtype=torch.float64)
    assert chain.joint_names == ("slide", "spin")
    assert [j.kind for j in chain.joints] == [PRISMATIC, REVOLUTE]
    d, th = 0.3, 0.7
    pose = chain.forward_kinematics(torch.tensor([d, th], dtype=torch.float64))
    # Origin of 'a' at (1, 0, 0) rotated 90 deg about z: the slide axis x_a is the root's y.
    # spin rotates about z by th: the tip (0.5 along x_c) is at x_a * 0.5 cos th + y_a * 0.5 sin th.
    expected_p = torch.tensor([1.0 - 0.5 * math.sin(th), d + 0.5 * math.cos(th), 2.0], dtype=torch.float64)
    torch.testing.assert_close(pose[:3, 3], expected_p, rtol=0, atol=1e-14)
    c, s = math.cos(th + math.pi / 2), math.sin(th + math.pi / 2)
    expected_r = torch.tensor([[c, -s, 0], [s, c, 0], [0, 0, 1]], dtype=torch.float64)
    torch.testing.assert_close(pose[:3, :3], expected_r, rtol=0, atol=1e-14)


# --------------------------------------------------------------------------------------------------
# Batching and broadcasting
# --------------------------------------------------------------------------------------------------


@DTYPES
def test_batched_fk_and_jacobian_equal_a_per_sample_loop(dtype, panda_layer, sample_joints):
    layer = panda_layer(dtype)
    q = sample_joints(layer.lower, layer.upper, 6, seed=31)
    pose, jac = layer.fk_and_jacobian(q)
    for i in range(q.shape[0]):
        pose_i, jac_i = layer.fk_and_jacobian(q[i])
        assert pose_i.shape == (4, 4) and jac_i.shape == (6, 7)
        tol = 1e-6 if dtype == torch.float32 else 1e-14
        torch.testing.assert_close(pose[i], pose_i, rtol=0, atol=tol)
        torch.testing.assert_close(jac[i], jac_i, rtol=0, atol=tol)


@DTYPES
def test_leading_dimensions_are_kept(dtype, panda_layer, sample_joints):
    layer = panda_layer(dtype)
    q = sample_joints(layer.lower, layer.upper, 6, seed=32).reshape(2, 3, 7)
    pose, jac = layer.fk_and_jacobian(q)
    assert pose.shape == (2, 3, 4, 4) and jac.shape == (2, 3, 6, 7)
    assert layer(q).shape == (2, 3, 4, 4) and layer.jacobian(q).shape == (2, 3, 6, 7)
    flat_pose, flat_jac = layer.fk_and_jacobian(q.reshape(6, 7))
    torch.testing.assert_close(pose.reshape(6, 4, 4), flat_pose, rtol=0, atol=0)
    torch.testing.assert_close(jac.reshape(6, 6, 7), flat_jac, rtol=0, atol=0)
    expected_bottom = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=dtype)
    assert torch.equal(pose[..., 3, :], expected_bottom.expand(2, 3, 4))
    # A single configuration and an empty batch.
    assert layer(q[0, 0]).shape == (4, 4) and layer.jacobian(q[0, 0]).shape == (6, 7)
    assert layer(q[:0]).shape == (0, 3, 4, 4)


# --------------------------------------------------------------------------------------------------
# Chain extraction
# --------------------------------------------------------------------------------------------------


def test_panda_chain_folds_fixed_joints_and_ignores_fingers(panda_chain):
    assert panda_chain.dof == 7
    assert panda_chain.joint_names == assets.PANDA.joints
    assert panda_chain.root_link_name == PANDA_ROOT and panda_chain.end_link_name == PANDA_TCP
    assert all(j.kind == REVOLUTE for j in panda_chain.joints)


def test_fixed_tail_equals_link8_times_hand_and_tcp_offsets(panda_urdf, panda_chain, sample_joints):
    """panda_link8 -> panda_hand (rpy 0 0 -pi/4) -> panda_hand_tcp (z + 0.1034) are folded into one offset."""
    link8 = SerialChainKinematics.from_urdf(
        panda_urdf, end_link_name="panda_link8", root_link_name=PANDA_ROOT, dtype=torch.float64
    )
    c, s = math.cos(-math.pi / 4), math.sin(-math.pi / 4)
    offset = torch.tensor([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0.1034], [0, 0, 0, 1]], dtype=torch.float64)
    q = sample_joints(panda_chain.lower, panda_chain.upper, 5, seed=41)
    torch.testing.assert_close(panda_chain.forward_kinematics(q), link8.forward_kinematics(q) @ offset)
    # The same offset given as a TCP reproduces the longer chain, Jacobian included.
    via_tcp = KinematicsLayer(link8, tcp=offset)
    pose, jac = via_tcp.fk_and_jacobian(q)
    ref_pose, ref_jac = panda_chain.fk_and_jacobian(q)
    torch.testing.assert_close(pose, ref_pose, rtol=0, atol=1e-14)
    torch.testing.assert_close(jac, ref_jac, rtol=0, atol=1e-14)
    assert link8.fingerprint != panda_chain.fingerprint


def test_pr2_arm_is_cut_out_of_the_tree(pr2):
    """Prismatic torso and continuous joints kept; head, left arm, grippers and mimic joints ignored."""
    assert pr2.joint_names == PR2_JOINTS
    kinds = [j.kind for j in pr2.joints]
    assert kinds == [PRISMATIC] + [REVOLUTE] * 7
    continuous = {"r_forearm_roll_joint", "r_wrist_roll_joint"}
    for joint in pr2.joints:
        unbounded = math.isinf(joint.lower) and math.isinf(joint.upper)
        assert unbounded == (joint.name in continuous), joint


def _urdf_limits(urdf_text: str, names) -> list[tuple[float, float]]:
    """Limits read with a plain XML parser (independent of yourdfpy); continuous joints unbounded."""
    joints = {j.get("name"): j for j in ET.fromstring(urdf_text).findall("joint")}
    out = []
    for name in names:
        joint = joints[name]
        if joint.get("type") == "continuous":
            out.append((-math.inf, math.inf))
        else:
            limit = joint.find("limit")
            out.append((float(limit.get("lower")), float(limit.get("upper"))))
    return out


def test_default_seed_is_midpoint_of_bounded_joints_and_zero_for_unbounded(panda_urdf, pr2_urdf, pr2, panda64):
    for layer, text in ((panda64, panda_urdf), (KinematicsLayer(pr2), pr2_urdf)):
        limits = _urdf_limits(text, layer.joint_names)
        expected = [0.0 if math.isinf(lo) else 0.5 * (lo + hi) for lo, hi in limits]
        seed = layer.default_seed()
        assert seed.shape == (layer.dof,) and seed.dtype == layer.dtype
        torch.testing.assert_close(seed, torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-12)
        torch.testing.assert_close(layer.lower, torch.tensor([lo for lo, _ in limits], dtype=torch.float64))
        torch.testing.assert_close(layer.upper, torch.tensor([hi for _, hi in limits], dtype=torch.float64))
    pr2_seed = KinematicsLayer(pr2).default_seed()
    assert pr2_seed[0] == pytest.approx(0.155)  # torso lift: [0, 0.31]
    assert pr2_seed[5] == 0 and pr2_seed[7] == 0  # continuous roll joints
    # The default seed is a fresh tensor: changing it does not change the layer.
    pr2_seed += 1.0
    assert KinematicsLayer(pr2).default_seed()[5] == 0


# --------------------------------------------------------------------------------------------------
# Typed errors
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("joint_type", ["floating", "planar"])
def test_unsupported_joint_type_on_the_chain_raises_urdf_error(joint_type):
    with pytest.raises(URDFError, match=rf"spin.*{joint_type}"):
        SerialChainKinematics.from_urdf(_toy(spin_type=joint_type), end_link_name="tip", root_link_name="base")
    # Off the chain, the same joint is ignored.
    chain = SerialChainKinematics.from_urdf(_toy(spin_type=joint_type), end_link_name="a", root_link_name="base")
    assert chain.joint_names == ("slide",)


def test_a_mimic_joint_on_the_chain_raises_urdf_error():
    mimicking = _toy().replace(
        '<joint name="spin" type="revolute">', '<joint name="spin" type="revolute">\n    <mimic joint="slide"/>'
    )
    assert "<mimic" in mimicking
    with pytest.raises(URDFError, match="spin.*mimics 'slide'"):
        SerialChainKinematics.from_urdf(mimicking, end_link_name="tip", root_link_name="base")
    # Off the chain, it is ignored.
    chain = SerialChainKinematics.from_urdf(mimicking, end_link_name="a", root_link_name="base")
    assert chain.joint_names == ("slide",)


def test_zero_axis_raises_urdf_error():
    with pytest.raises(URDFError, match="zero axis"):
        SerialChainKinematics.from_urdf(_toy(axis_z="0"), end_link_name="tip", root_link_name="base")


@pytest.mark.parametrize("role", ["end", "root"])
def test_unknown_link_raises_link_not_found(panda_urdf, role):
    kwargs = {"end_link_name": PANDA_TCP, "root_link_name": PANDA_ROOT}
    kwargs[f"{role}_link_name"] = "panda_link42"
    with pytest.raises(LinkNotFoundError, match="panda_link42") as info:
        SerialChainKinematics.from_urdf(panda_urdf, **kwargs)
    assert isinstance(info.value, KeyError)  # also a KeyError, as a missing name is
    assert "panda_link42" in str(info.value) and str(info.value).count("'panda_link42'") == 1


@pytest.mark.parametrize(
    ("root", "end"),
    [
        ("panda_link5", "panda_link3"),
        ("panda_leftfinger", "panda_rightfinger"),
        ("panda_hand", "panda_link0"),
    ],
)
def test_root_not_an_ancestor_raises_not_a_chain(panda_urdf, root, end):
    with pytest.raises(NotAChainError, match="not an ancestor"):
        SerialChainKinematics.from_urdf(panda_urdf, end_link_name=end, root_link_name=root)


def test_pr2_sibling_arms_are_not_a_chain(pr2_urdf):
    with pytest.raises(NotAChainError):
        SerialChainKinematics.from_urdf(
            pr2_urdf, end_link_name="l_gripper_tool_frame", root_link_name="r_shoulder_pan_link"
        )


def test_chain_without_movable_joint_raises_not_a_chain(panda_urdf):
    with pytest.raises(NotAChainError, match="no movable joint"):
        SerialChainKinematics.from_urdf(panda_urdf, end_link_name="panda_hand_tcp", root_link_name="panda_link8")


BAD_URDFS = {
    "not_xml": "not xml at all",
    "empty": "",
    "nameless_joint": "<robot><joint/></robot>",
    "childless_joint": "<robot name='x'><link name='a'/><joint name='j' type='revolute'>"
    "<parent link='a'/></joint></robot>",
    "short_origin": "<robot name='x'><link name='a'/><link name='b'/><joint name='j' type='revolute'>"
    "<parent link='a'/><child link='b'/><origin xyz='1 2'/></joint></robot>",
}


@pytest.mark.parametrize("text", list(BAD_URDFS.values()), ids=list(BAD_URDFS))
def test_bad_urdf_raises_urdf_error(text):
    with pytest.raises(URDFError, match="could not parse"):
        SerialChainKinematics.from_urdf(text, end_link_name="a", root_link_name="a")


def test_every_chain_error_is_a_project_error():
    for error in (URDFError, LinkNotFoundError, NotAChainError):
        assert issubclass(error, ProjectError)


def test_root_defaults_to_the_urdf_root(panda_urdf):
    chain = SerialChainKinematics.from_urdf(panda_urdf, end_link_name=PANDA_TCP, dtype=torch.float64)
    assert chain.root_link_name == PANDA_ROOT
    assert chain.joint_names == assets.PANDA.joints
