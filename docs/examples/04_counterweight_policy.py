"""A counterweight policy trained through the whole-body layer. The G1 holds 8 kg in its right hand and reaches
for goals in front of it that it cannot reach with the body held at rest: the payload would carry the centre of
mass past its toes. A small network maps the goal to targets for the pelvis, the torso and the free hand (an
offset of their rest targets); the whole-body solve (feet held, centre of mass inside the support polygon) then
reaches. The loss is the hand's final error, so its gradient flows back through the 16-step QP cascade into the
network, and the policy learns to move the body to counterbalance.
Run: ``python docs/examples/04_counterweight_policy.py [STEPS]``."""

import sys

import torch

import assets
from learning.counterweight.config import CounterweightCfg
from learning.counterweight.goals import goal_points, needs_counterweight
from learning.counterweight.policy import CounterweightPolicy
from learning.counterweight.problem import CounterweightProblem
from learning.counterweight.training import reach_loss

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
torch.manual_seed(0)
problem = CounterweightProblem(assets.G1, CounterweightCfg(payload_kg=8.0, margin=0.01, tolerance=0.01))


def goals_needing_a_counterweight(n: int) -> torch.Tensor:
    """``(n, 3)`` world goals 0.34-0.41 m from the right shoulder, ahead of it, that reach only cannot solve."""
    kept = []
    while sum(len(g) for g in kept) < n:
        m = 256
        distance, azimuth = 0.34 + 0.07 * torch.rand(m), -0.7 + 1.3 * torch.rand(m)
        elevation = -0.6 + 0.8 * torch.rand(m)
        candidates = goal_points(problem.shoulder, distance, azimuth, elevation).to(torch.float32)
        kept.append(candidates[needs_counterweight(problem, candidates)])
    return torch.cat(kept)[:n]


def success(goals: torch.Tensor, outputs: torch.Tensor | None) -> float:
    """The share of goals reached within the tolerance, feet held, limits and balance kept."""
    with torch.no_grad():
        return float(problem.outcome(problem.solve(goals, outputs)).success.float().mean())


train, test = goals_needing_a_counterweight(256), goals_needing_a_counterweight(64)
policy = CounterweightPolicy(problem.shoulder, hidden=64)  # starts at zero offset: the body at rest
optimiser = torch.optim.Adam(policy.parameters(), lr=1e-3)
print(f"reach only (body at rest) solves {success(test, None):.0%} of the test goals")
for step in range(steps):
    goals = train[torch.randint(len(train), (32,))]
    loss = reach_loss(problem, goals, policy(goals), "r9", penalty=1e-4).mean()
    optimiser.zero_grad()
    loss.backward()  # through the whole-body solve, into the policy
    optimiser.step()
    if step % 10 == 0 or step == steps - 1:
        print(f"step {step:3d}  hand error^2 {loss.item():.2e} m^2")

with torch.no_grad():
    print(f"the trained policy solves {success(test, policy(test)):.0%} of the test goals")
