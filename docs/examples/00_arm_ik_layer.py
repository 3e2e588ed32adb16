"""The arm's differentiable IK layer: solve 64 Panda targets in one batch, then take a loss's gradient through the
16 solver steps back to the targets. Run: ``python docs/examples/00_arm_ik_layer.py``."""

import torch

import assets
from kinematics import DifferentiableIKCfg, DifferentiableIKLayer, KinematicsLayer, SerialChainKinematics

chain = SerialChainKinematics.from_urdf(assets.PANDA.urdf_text(), end_link_name="panda_hand_tcp")
kinematics = KinematicsLayer(chain)  # checked FK and Jacobian, the URDF's joint limits
ik = DifferentiableIKLayer(kinematics, DifferentiableIKCfg(iterations=16))

torch.manual_seed(0)
q_seed = kinematics.default_seed().expand(64, -1)  # (64, 7): every solve starts here
q_goal = (q_seed + 0.3 * torch.randn(64, 7)).clamp(kinematics.lower, kinematics.upper)
T_root_target = kinematics(q_goal).detach().requires_grad_()  # (64, 4, 4): reachable targets

result = ik.solve(T_root_target, q_seed)  # q, success, position / rotation errors, within_limits
print(f"solved {int(result.success.sum())} of 64; median position error {result.position_error_norm.median():.1e} m")

result.q[:, 0].sum().backward()  # any loss of q: here, the base joint's angle
print(f"d q_base / d target position, first target: {T_root_target.grad[0, :3, 3].tolist()}")
