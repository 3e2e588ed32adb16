"""The G1 reaching with its right hand while it stands: both feet held where they stand, the centre of mass kept
2 cm inside the support polygon of the soles, joint limits kept; the rest of the body near its posture. The
farther the hand reaches, the farther back the pelvis goes, holding the centre of mass on the margin's front edge.
Run: ``python docs/examples/03_g1_reach.py``."""

import torch

import assets
from kinematics import KinematicTree
from kinematics.wholebody import WholeBodyIKCfg, standing_problem

g1 = KinematicTree.from_urdf(assets.G1.urdf_text(), floating_base=True, dtype=torch.float64)
problem = standing_problem(g1, assets.G1, margin=0.02, cfg=WholeBodyIKCfg(iterations=32))
hand = assets.G1.frames["right_hand"]
T_world_hand = g1.frame_pose(problem.q_stand, hand)  # q = [pelvis x, y, z, quaternion xyzw, 29 joints]

for forward in (0.1, 0.2, 0.3, 0.4):
    target = T_world_hand.clone()
    target[:3, 3] += torch.tensor([forward, 0.0, -0.1], dtype=torch.float64)
    result = problem.layer.solve({**problem.fixed_targets, "right_hand": target}, problem.q_stand)
    reached = g1.frame_pose(result.q, hand)[:3, 3]
    com = g1.center_of_mass(result.q)
    pelvis_x = float(result.q[0] - problem.q_stand[0])
    feet = max(float(result.violations["left_foot"]), float(result.violations["right_foot"]))
    print(
        f"goal {forward:.1f} m ahead: hand {1000 * float((reached - target[:3, 3]).norm()):5.1f} mm from it, "
        f"pelvis x {100 * pelvis_x:+5.1f} cm, CoM x {100 * float(com[0]):+5.1f} cm, feet {1000 * feet:.3f} mm off, "
        f"CoM outside the polygon's margin by {1000 * float(result.violations['com_in_support']):.3f} mm"
    )
