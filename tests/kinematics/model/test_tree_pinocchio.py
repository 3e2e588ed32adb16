"""``KinematicTree`` against Pinocchio, the independent reference: the Unitree G1 and Talos, free flyer and fixed base.

Every link's pose (matched by name with Pinocchio's BODY frames), every frame Jacobian (LOCAL_WORLD_ALIGNED), the
centre of mass and its Jacobian, at random configurations far from neutral (base positions of metres, arbitrary
orientations, joints across their limits), to 1e-9 in float64. ``integrate`` / ``difference`` and their tangent
Jacobians against ``pin.integrate`` / ``pin.difference`` / ``pin.dIntegrate`` / ``pin.dDifference``.

Talos's gripper mimic joints are ``fixed`` in ``talos_reduced.urdf`` (Pinocchio and the tree agree to keep them
fixed); a variant with those joints made revolute exercises mimic joints: Pinocchio (``mimic=False``) treats them as
independent, so its mimic coordinates are set from their sources and its mimic Jacobian columns are folded into
the sources' columns times the multiplier.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from optional_dependencies import require_module

from assets import robot_file
from kinematics import KinematicTree

pin = require_module("pinocchio", "pip install pin, or the dev extra")

G1 = "example-robot-data/robots/g1_description/urdf/g1_29dof_rev_1_0.urdf"
TALOS = "example-robot-data/robots/talos_data/robots/talos_reduced.urdf"
TOL = 1e-9
N_CONFIGS = 4


def _mimic_variant(text: str) -> str:
    """Talos with its ``fixed`` joints that carry a ``<mimic>`` tag made revolute."""

    def fix(match: re.Match) -> str:
        block = match.group(0)
        return block.replace('type="fixed"', 'type="revolute"') if "<mimic" in block else block

    return re.sub(r"<joint [^>]*>.*?</joint>", fix, text, flags=re.S)


class Reference:
    """Pinocchio's model of a URDF and the maps from the tree's q / v to Pinocchio's."""

    def __init__(self, path, floating: bool, tree: KinematicTree) -> None:
        root = (pin.JointModelFreeFlyer(),) if floating else ()
        self.model = pin.buildModelFromUrdf(str(path), *root)
        self.data = self.model.createData()
        self.tree, self.floating = tree, floating
        d = tree.description
        joint = lambda name: self.model.joints[self.model.getJointId(name)]  # noqa: E731
        assert all(self.model.joints[i].nq == 1 for i in range(1 + floating, self.model.njoints))
        self.q_index = [joint(n).idx_q for n in tree.joint_names]
        self.v_index = [joint(n).idx_v for n in tree.joint_names]
        self.mimic = []  # (pin idx_q, pin idx_v, source dof, multiplier, offset)
        for name, dof, mult, off, is_mimic in zip(d.node_names, d.dof, d.multiplier, d.offset, d.is_mimic, strict=True):
            if is_mimic:
                self.mimic.append((joint(name).idx_q, joint(name).idx_v, int(dof), float(mult), float(off)))
        assert self.model.nq == tree.nq + len(self.mimic) and self.model.nv == tree.nv + len(self.mimic)
        self.base_v = list(range(6)) if floating else []

    def configuration(self, q: np.ndarray) -> np.ndarray:
        qp = pin.neutral(self.model)
        base = self.tree.base_nq
        qp[:base] = q[:base]
        qp[self.q_index] = q[base:]
        for iq, _, dof, mult, off in self.mimic:
            qp[iq] = mult * q[base + dof] + off
        return qp

    def fold(self, jac: np.ndarray) -> np.ndarray:
        """Pinocchio's ``(rows, model.nv)`` Jacobian -> the tree's ``(rows, nv)``."""
        out = jac[:, self.base_v + self.v_index].copy()
        for _, iv, dof, mult, _ in self.mimic:
            out[:, self.tree.base_nv + dof] += mult * jac[:, iv]
        return out

    def quantities(self, q: np.ndarray):
        model, data = self.model, self.data
        qp = self.configuration(q)
        pin.computeJointJacobians(model, data, qp)
        pin.framesForwardKinematics(model, data, qp)
        poses, jacobians = [], []
        for name in self.tree.frame_names:
            fid = model.getFrameId(name, pin.FrameType.BODY)
            poses.append(data.oMf[fid].homogeneous)
            jacobians.append(self.fold(pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED)))
        com = pin.centerOfMass(model, data, qp)
        jcom = self.fold(pin.jacobianCenterOfMass(model, data, qp))
        # Pinocchio's CoM leaves out the bodies welded to the universe (a fixed base's root link); the tree's
        # counts every link. Add them back: they do not move, so they only dilute the Jacobian.
        fixed = model.inertias[0]
        if fixed.mass > 0:
            moving = data.mass[0]
            com = (moving * com + fixed.mass * fixed.lever) / (moving + fixed.mass)
            jcom = jcom * moving / (moving + fixed.mass)
        return np.stack(poses), np.stack(jacobians), com, jcom


def _configs(tree: KinematicTree, n: int, seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    lower, upper = tree.joint_lower.double().numpy(), tree.joint_upper.double().numpy()
    lower, upper = np.where(np.isfinite(lower), lower, -np.pi), np.where(np.isfinite(upper), upper, np.pi)
    joints = rng.uniform(lower - 0.5, upper + 0.5, size=(n, len(lower)))  # across the limits
    if not tree.floating_base:
        return torch.tensor(joints)
    quat = rng.normal(size=(n, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    position = rng.uniform(-5.0, 5.0, size=(n, 3))
    return torch.tensor(np.concatenate((position, quat, joints), 1))


CASES = {
    "g1-free-flyer": (G1, True, False),
    "g1-fixed": (G1, False, False),
    "talos-free-flyer": (TALOS, True, False),
    "talos-mimic-free-flyer": (TALOS, True, True),
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request, tmp_path_factory):
    relative, floating, mimic = CASES[request.param]
    path = robot_file(relative)
    text = path.read_text()
    if mimic:
        text = _mimic_variant(text)
        path = tmp_path_factory.mktemp("urdf") / "talos_mimic.urdf"
        path.write_text(text)
    tree = KinematicTree.from_urdf(text, floating_base=floating, dtype=torch.float64)
    if mimic:
        assert len(tree.mimic_names) == 12
    return text, tree, Reference(path, floating, tree)


def test_poses_jacobians_and_com_match_pinocchio(case):
    _, tree, ref = case
    q = _configs(tree, N_CONFIGS, seed=1)
    state = tree.forward_kinematics(q)
    poses = tree.frame_poses(state).numpy()
    jacobians = np.stack([tree.frame_jacobian(state, name).numpy() for name in tree.frame_names], 1)
    com, jcom = tree.center_of_mass(state).numpy(), tree.com_jacobian(state).numpy()
    for i, qi in enumerate(q.numpy()):
        ref_poses, ref_jac, ref_com, ref_jcom = ref.quantities(qi)
        np.testing.assert_allclose(poses[i], ref_poses, rtol=0, atol=TOL)
        np.testing.assert_allclose(jacobians[i], ref_jac, rtol=0, atol=TOL)
        np.testing.assert_allclose(com[i], ref_com, rtol=0, atol=TOL)
        np.testing.assert_allclose(jcom[i], ref_jcom, rtol=0, atol=TOL)


def test_float32_is_close_to_pinocchio(case):
    text, tree64, ref = case
    q = _configs(tree64, 2, seed=2)
    tree32 = KinematicTree.from_urdf(text, floating_base=tree64.floating_base, dtype=torch.float32)
    state = tree32.forward_kinematics(q.float())
    poses, com = tree32.frame_poses(state).double().numpy(), tree32.center_of_mass(state).double().numpy()
    jac = tree32.frame_jacobian(state, tree32.frame_names[-1]).double().numpy()
    for i, qi in enumerate(q.numpy()):
        ref_poses, ref_jac, ref_com, _ = ref.quantities(qi)
        np.testing.assert_allclose(poses[i], ref_poses, rtol=0, atol=1e-4)
        np.testing.assert_allclose(com[i], ref_com, rtol=0, atol=1e-4)
        np.testing.assert_allclose(jac[i], ref_jac[-1], rtol=0, atol=1e-4)


@pytest.fixture(scope="module")
def g1_free_flyer():
    path = robot_file(G1)
    tree = KinematicTree.from_urdf(path.read_text(), floating_base=True, dtype=torch.float64)
    return tree, pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())


def _same_configuration(a: np.ndarray, b: np.ndarray) -> None:
    """Equal configurations, the quaternion up to its sign."""
    sign = np.sign(np.dot(a[3:7], b[3:7]))
    np.testing.assert_allclose(np.r_[a[:3], sign * a[3:7], a[7:]], b, rtol=0, atol=TOL)


def test_integrate_and_difference_match_pinocchio(g1_free_flyer):
    tree, model = g1_free_flyer
    q = _configs(tree, 6, seed=3)
    rng = np.random.default_rng(4)
    v = rng.normal(size=(6, tree.nv)) * np.array([[3.0], [1.0], [0.3], [1e-3], [1e-7], [0.0]])
    angle = np.linalg.norm(v[:, 3:6], axis=1, keepdims=True)
    v[:, 3:6] *= np.minimum(1.0, 3.0 / np.maximum(angle, 1e-300))  # below pi: difference(q, q + v) is v
    v = torch.tensor(v)
    q1 = tree.integrate(q, v)
    q_far = _configs(tree, 6, seed=5)
    d = tree.difference(q, q_far)
    for i in range(6):
        _same_configuration(q1[i].numpy(), pin.integrate(model, q[i].numpy(), v[i].numpy()))
        np.testing.assert_allclose(d[i].numpy(), pin.difference(model, q[i].numpy(), q_far[i].numpy()), atol=TOL)
    np.testing.assert_allclose(tree.difference(q, q1).numpy(), v.numpy(), rtol=0, atol=TOL)


def test_manifold_jacobians_match_pinocchio(g1_free_flyer):
    """At angles away from zero: Pinocchio's own small-angle branches are accurate to about 5e-9 only (the tree's
    are checked against central differences in test_tree.py)."""
    tree, model = g1_free_flyer
    q = _configs(tree, 4, seed=6)
    rng = np.random.default_rng(7)
    v = torch.tensor(rng.normal(size=(4, tree.nv)) * np.array([[2.0], [1.0], [0.5], [0.2]]))
    q_far = _configs(tree, 4, seed=8)
    dq, dv = tree.integrate_jacobians(q, v)
    d0, d1 = tree.difference_jacobians(q, q_far)
    for i in range(4):
        qi, vi, fi = q[i].numpy(), v[i].numpy(), q_far[i].numpy()
        np.testing.assert_allclose(dq[i].numpy(), pin.dIntegrate(model, qi, vi, pin.ARG0), atol=1e-9)
        np.testing.assert_allclose(dv[i].numpy(), pin.dIntegrate(model, qi, vi, pin.ARG1), atol=1e-9)
        np.testing.assert_allclose(d0[i].numpy(), pin.dDifference(model, qi, fi, pin.ARG0), atol=1e-9)
        np.testing.assert_allclose(d1[i].numpy(), pin.dDifference(model, qi, fi, pin.ARG1), atol=1e-9)


def test_a_payload_moves_the_com_as_pinocchio_says():
    # 4 kg held 3 cm in front of the G1's right hand: added to the link's inertial here, to Pinocchio's joint
    # inertia (through the frame's placement) there
    from kinematics.model.payload import with_payload
    from kinematics.model.urdf import describe_tree

    text = robot_file(G1).read_text()
    point = np.array([0.03, 0.0, -0.01])
    tree = KinematicTree(with_payload(describe_tree(text), "right_rubber_hand", 4.0, point), True, dtype=torch.float64)
    plain = KinematicTree.from_urdf(text, floating_base=True, dtype=torch.float64)
    assert tree.total_mass == pytest.approx(plain.total_mass + 4.0)
    ref = Reference(robot_file(G1), True, tree)
    frame = ref.model.frames[ref.model.getFrameId("right_rubber_hand", pin.FrameType.BODY)]
    ref.model.inertias[frame.parentJoint] += frame.placement.act(pin.Inertia(4.0, point, np.zeros((3, 3))))
    ref.data = ref.model.createData()
    for q in _configs(tree, N_CONFIGS, seed=11):
        _, _, com, jcom = ref.quantities(q.numpy())
        np.testing.assert_allclose(tree.center_of_mass(q).numpy(), com, atol=TOL)
        np.testing.assert_allclose(tree.com_jacobian(q).numpy(), jcom, atol=TOL)
        assert np.abs(plain.center_of_mass(q).numpy() - com).max() > 1e-3  # the payload does move it
