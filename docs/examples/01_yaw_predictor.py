"""A grasp-yaw predictor trained through the IK layer: a small network maps a grasp point on the table and the
arm's start joints to the hand's yaw about the vertical (a correction of the radial rule's). The loss is
what the arm does with that yaw, the joint displacement from the start and the IK residuals, so its gradient
flows through the 16-step solve into the network. Compared at the end, on new grasps, with two rules: keep the
hand's heading, and face away from the base (radial).
Run: ``python docs/examples/01_yaw_predictor.py [STEPS]``."""

import sys

import torch
from torch import nn

import assets
from kinematics import DifferentiableIKCfg, DifferentiableIKLayer, KinematicsLayer, SerialChainKinematics
from learning.grasp_yaw.task import CostWeights, current_heading, grasp_pose, radial_angle, smooth_cost, yaw_vector

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
torch.manual_seed(0)
chain = SerialChainKinematics.from_urdf(assets.PANDA.urdf_text(), end_link_name="panda_hand_tcp")
kinematics = KinematicsLayer(chain)
ik = DifferentiableIKLayer(kinematics, DifferentiableIKCfg(iterations=16))
ready = torch.tensor(assets.PANDA.reference_posture)
weights = CostWeights()


def grasps(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` grasp points on the table in front of the arm (root frame, metres) and start joints near ready."""
    low, high = torch.tensor([0.3, -0.4, 0.05]), torch.tensor([0.7, 0.4, 0.3])
    q0 = (ready + 0.5 * torch.randn(n, 7)).clamp(kinematics.lower, kinematics.upper)
    return low + (high - low) * torch.rand(n, 3), q0


def cost(p: torch.Tensor, q0: torch.Tensor, yaw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per grasp: the smooth cost of grasping ``p`` at ``yaw`` (unit 2-vectors) from ``q0``, and success."""
    result = ik.solve(grasp_pose(p, yaw), q0)
    return smooth_cost(result, q0, weights), result.success


def predict(p: torch.Tensor, q0: torch.Tensor) -> torch.Tensor:
    """``(n, 2)``: the yaw as (cos, sin), the radial rule's turned by the network's correction."""
    radial, heading = radial_angle(p), current_heading(kinematics, q0)
    features = torch.cat((p, q0.sin(), q0.cos(), yaw_vector(radial), yaw_vector(heading)), -1)
    raw = predictor(features)  # a correction as a 2-vector: its angle is added to the radial yaw
    return yaw_vector(radial + torch.atan2(raw[:, 1], raw[:, 0]))


predictor = nn.Sequential(nn.Linear(21, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(), nn.Linear(128, 2))
nn.init.normal_(predictor[-1].weight, std=1e-3)
with torch.no_grad():
    predictor[-1].bias.copy_(torch.tensor([1.0, 0.0]))  # it starts as the radial rule (correction angle 0)
optimiser = torch.optim.Adam(predictor.parameters(), lr=2e-3)
for step in range(steps):
    p, q0 = grasps(128)
    loss = cost(p, q0, predict(p, q0))[0].mean()
    optimiser.zero_grad()
    loss.backward()  # through 16 DLS steps, into the network
    nn.utils.clip_grad_norm_(predictor.parameters(), 1.0)
    optimiser.step()
    if step % 50 == 0 or step == steps - 1:
        print(f"step {step:4d}  loss {loss.item():.3f}")

with torch.no_grad():
    p, q0 = grasps(512)
    for name, yaw in (("learned", predict(p, q0)), ("heading", yaw_vector(current_heading(kinematics, q0))),
                      ("radial", yaw_vector(radial_angle(p)))):  # fmt: skip
        total, solved = cost(p, q0, yaw)
        print(f"{name:8s} cost {total.mean():.3f}, success {solved.float().mean():.0%}")
