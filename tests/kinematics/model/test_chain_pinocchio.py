"""FK and geometric Jacobian of ``SerialChainKinematics`` against Pinocchio, the independent reference.

Three chains: the Panda (panda_link0 -> panda_hand_tcp, fixed joints folded), the PR2 right arm
(base_link -> r_gripper_tool_frame: a prismatic torso and continuous joints, cut out of a large tree with
mimic joints) and the UR5 (base_link -> tool0). Pinocchio's model is reduced to the chain's joints by locking
every other joint at its neutral value; continuous joints have nq = 2 (cos, sin) there, so q is written by
``joint.idx_q`` and Jacobian columns are read by ``joint.idx_v``. The reference pose is
``oMf[root]^-1 * oMf[end]`` and the reference Jacobian is the LOCAL_WORLD_ALIGNED frame Jacobian with its
axes rotated into the root frame: ``blockdiag(R_root^T, R_root^T) @ J``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
from optional_dependencies import require_module

pin = require_module("pinocchio", "pip install pin, or the dev extra")

N_CONFIGS = 20
FLOAT64_TOL = 1e-9
FLOAT32_TOL = 1e-5  # float32 FK/J against float64 Pinocchio; observed errors are about 3e-7.

CHAINS = {
    "panda": ("panda_description/urdf/panda.urdf", "panda_link0", "panda_hand_tcp", 7),
    "pr2": ("pr2_description/urdf/pr2.urdf", "base_link", "r_gripper_tool_frame", 8),
    "ur5": ("ur_description/urdf/ur5_robot.urdf", "base_link", "tool0", 6),
}


@dataclass
class Reference:
    """Pinocchio's reduced model of one chain and the index maps from our joint order to its q and v."""

    model: object
    data: object
    root_frame: int
    end_frame: int
    idx_q: list[int]
    nq: list[int]
    idx_v: list[int]

    def pose_and_jacobian(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        qp = pin.neutral(self.model)
        for value, iq, nq in zip(q, self.idx_q, self.nq, strict=True):
            if nq == 2:  # continuous joint: (cos, sin)
                qp[iq], qp[iq + 1] = np.cos(value), np.sin(value)
            else:
                qp[iq] = value
        pin.framesForwardKinematics(self.model, self.data, qp)
        pin.computeJointJacobians(self.model, self.data, qp)
        root, end = self.data.oMf[self.root_frame], self.data.oMf[self.end_frame]
        pose = (root.inverse() * end).homogeneous
        jac = pin.getFrameJacobian(self.model, self.data, self.end_frame, pin.LOCAL_WORLD_ALIGNED)[:, self.idx_v]
        rt = root.rotation.T
        return pose, np.block([[rt, np.zeros((3, 3))], [np.zeros((3, 3)), rt]]) @ jac


@pytest.fixture(scope="module", params=sorted(CHAINS))
def case(request, robot_urdf, chain_of):
    """(name, our float64 chain, our float32 chain, Pinocchio reference) of one robot."""
    relative, root, end, dof = CHAINS[request.param]
    text = robot_urdf(relative)
    ours64 = chain_of(text, root, end, torch.float64)
    ours32 = chain_of(text, root, end, torch.float32)
    assert ours64.dof == dof
    full = pin.buildModelFromXML(text)
    keep = set(ours64.joint_names)
    locked = [full.getJointId(name) for name in list(full.names)[1:] if name not in keep]
    model = pin.buildReducedModel(full, locked, pin.neutral(full))
    joints = [model.joints[model.getJointId(name)] for name in ours64.joint_names]
    assert model.nv == dof, "the reduced Pinocchio model must hold exactly the chain's joints"
    ref = Reference(
        model,
        model.createData(),
        model.getFrameId(root),
        model.getFrameId(end),
        [j.idx_q for j in joints],
        [j.nq for j in joints],
        [j.idx_v for j in joints],
    )
    return request.param, ours64, ours32, ref


def _configs(chain, sample_joints, seed: int) -> torch.Tensor:
    """Random configurations inside the limits (unbounded joints in [-pi, pi)), zero and the midpoint."""
    q = sample_joints(chain.lower, chain.upper, N_CONFIGS - 2, seed)
    bounded = torch.isfinite(chain.lower) & torch.isfinite(chain.upper)
    mid = torch.where(bounded, 0.5 * (chain.lower + chain.upper), torch.zeros_like(chain.lower))
    zero = torch.zeros_like(mid).clamp(chain.lower, chain.upper)
    return torch.cat((q, zero[None], mid[None]))


def _reference(ref: Reference, q: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    pairs = [ref.pose_and_jacobian(row) for row in q.to(torch.float64).numpy()]
    return np.stack([p for p, _ in pairs]), np.stack([j for _, j in pairs])


def test_fk_and_jacobian_equal_pinocchio_float64(case, sample_joints):
    name, chain, _, ref = case
    q = _configs(chain, sample_joints, seed=11)
    pose, jac = chain.fk_and_jacobian(q)
    ref_pose, ref_jac = _reference(ref, q)
    assert pose.shape == (N_CONFIGS, 4, 4) and jac.shape == (N_CONFIGS, 6, chain.dof)
    np.testing.assert_allclose(pose.numpy(), ref_pose, rtol=0, atol=FLOAT64_TOL, err_msg=f"{name} FK")
    np.testing.assert_allclose(jac.numpy(), ref_jac, rtol=0, atol=FLOAT64_TOL, err_msg=f"{name} Jacobian")
    # The comparison is not vacuous: the poses differ between configurations and the Jacobian has full rank.
    assert np.ptp(ref_pose[:, :3, 3], axis=0).max() > 0.1
    assert np.linalg.matrix_rank(ref_jac[0]) == min(6, chain.dof)


def test_fk_and_jacobian_equal_pinocchio_float32(case, sample_joints):
    name, chain64, chain32, ref = case
    q = _configs(chain64, sample_joints, seed=12)
    pose, jac = chain32.fk_and_jacobian(q.to(torch.float32))
    assert pose.dtype == jac.dtype == torch.float32
    # Pinocchio evaluated at the float32-rounded joints, so only the arithmetic differs.
    ref_pose, ref_jac = _reference(ref, q.to(torch.float32))
    np.testing.assert_allclose(pose.numpy(), ref_pose, rtol=0, atol=FLOAT32_TOL, err_msg=f"{name} FK")
    np.testing.assert_allclose(jac.numpy(), ref_jac, rtol=0, atol=FLOAT32_TOL, err_msg=f"{name} Jacobian")


def test_forward_kinematics_equals_pose_of_fk_and_jacobian(case, sample_joints):
    _, chain, _, ref = case
    q = _configs(chain, sample_joints, seed=13)
    pose_only = chain.forward_kinematics(q)
    ref_pose, _ = _reference(ref, q)
    np.testing.assert_allclose(pose_only.numpy(), ref_pose, rtol=0, atol=FLOAT64_TOL)
