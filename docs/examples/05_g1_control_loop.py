"""A control loop on the G1: the right hand follows a target moving on a 5 cm circle, one whole-body step per tick,
the feet held and the centre of mass kept inside the support polygon. A ``WholeBodyStepper`` holds the targets (each
tick writes the hand's in place) and binds the compiled step once, as a controller's solver does; each step is
``layer.step``'s answer. It prints how long a tick took (median and 99th percentile) and how far the hand trails,
then one step's gradient without an autograd graph (``stepper.vjp``): how the pelvis's height moves with the hand's
target. Run: ``python docs/examples/05_g1_control_loop.py [ticks]``."""

import math
import sys
import time

import torch

import assets
from kinematics import KinematicTree
from kinematics.wholebody import WholeBodyStepper, standing_problem

ticks = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
g1 = KinematicTree.from_urdf(assets.G1.urdf_text(), floating_base=True)  # float32
problem = standing_problem(g1, assets.G1)
hand = assets.G1.frames["right_hand"]
q = problem.q_stand[None].clone()  # one robot: (1, nq)
T_world_start = g1.frame_pose(q, hand)
fixed = {name: target[None] for name, target in problem.fixed_targets.items()}  # feet and posture, one row
stepper = WholeBodyStepper(problem.layer, {**fixed, "right_hand": T_world_start})

seconds, trail = [], []
with torch.no_grad():
    for tick in range(ticks):
        phase = 2 * math.pi * tick / 2000  # one turn every 2 s at 1 kHz
        target = T_world_start.clone()
        target[..., 1, 3] += 0.05 * math.sin(phase)
        target[..., 2, 3] += 0.05 * (math.cos(phase) - 1.0)
        start = time.perf_counter()
        stepper.set_target("right_hand", target)
        q, _ = stepper.step(q)
        seconds.append(time.perf_counter() - start)
        trail.append(float((g1.frame_pose(q, hand)[..., :3, 3] - target[..., :3, 3]).norm()))

seconds.sort()
targets = {name: stepper.target(name) for name in stepper.target_names}  # the last tick's, as the stepper holds them
with torch.no_grad():
    _, last_step = problem.layer.step(q, targets)
    held = problem.layer.evaluate(q, targets, last_step, torch.Size([1]))  # every task's and constraint's at q
median, p99 = seconds[len(seconds) // 2], seconds[int(0.99 * len(seconds))]
print(f"{ticks} ticks: a step took {1e6 * median:.0f} us (median), {1e6 * p99:.0f} us (99th percentile)")
print(f"the hand trails its target by {1000 * sum(trail[-500:]) / len(trail[-500:]):.1f} mm over the last 500 ticks")
feet = max(float(held.violations["left_foot"]), float(held.violations["right_foot"]))
print(f"feet off by {1000 * feet:.3f} mm, CoM outside the polygon's margin by "
      f"{1000 * float(held.violations['com_in_support']):.3f} mm")  # fmt: skip

# The last step's gradient (its vector-Jacobian product, no autograd graph): how the pelvis's height after one more
# step moves with the hand's target position, in m per m.
q_next, _ = stepper.step(q)
pelvis_height = torch.zeros_like(q_next)
pelvis_height[0, 2] = 1.0  # the upstream gradient of the free flyer's z
grad = stepper.vjp(pelvis_height, targets=("right_hand",)).targets["right_hand"]  # (1, 4, 4), like the target
print("d pelvis height / d hand target (x, y, z): " + ", ".join(f"{v:+.3f}" for v in grad[0, :3, 3].tolist()))
