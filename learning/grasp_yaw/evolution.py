"""The zero-order baseline: an evolution-strategies estimate of the cost gradient, no gradient through IK.

OpenAI-ES with antithetic Gaussian perturbations of all network weights and centred-rank fitness shaping. Each
estimate evaluates ``2 * pairs`` perturbed networks on one batch of goals with forward-only IK, so it spends
``2 * pairs * batch`` IK evaluations; the experiment gives it the same total as the gradient trainer.
"""

from __future__ import annotations

import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from kinematics import DifferentiableIKLayer
from learning.common.ranks import antithetic_estimate
from learning.grasp_yaw.predictors import YawPolicy
from learning.grasp_yaw.splits import GoalSet
from learning.grasp_yaw.task import CostWeights, grasp_pose, smooth_cost


@torch.no_grad()
def es_gradient(
    policy: YawPolicy,
    ik: DifferentiableIKLayer,
    batch: GoalSet,
    weights: CostWeights,
    pairs: int,
    sigma: float,
    generator: torch.Generator,
) -> tuple[torch.Tensor, float, int]:
    """Estimate of d(mean cost)/d(weights) as a flat vector, the population's mean cost, and IK evaluations used."""
    params = list(policy.predictor.parameters())
    centre = parameters_to_vector(params)
    noise = torch.randn(pairs, centre.numel(), generator=generator, dtype=centre.dtype).to(centre.device)
    features = policy.features(batch.p, batch.q0)
    yaws = []
    for sign in (1.0, -1.0):
        for k in range(pairs):
            vector_to_parameters(centre + sign * sigma * noise[k], params)
            yaws.append(policy.predictor(features, batch.p))
    vector_to_parameters(centre, params)
    copies = 2 * pairs
    p, q0 = batch.p.repeat(copies, 1), batch.q0.repeat(copies, 1)
    result = ik.solve(grasp_pose(p, torch.cat(yaws)), q0)
    cost = smooth_cost(result, q0, weights).reshape(2, pairs, len(batch)).mean(-1)
    gradient = antithetic_estimate(cost, noise, sigma)
    return gradient, float(cost.mean()), copies * len(batch)
