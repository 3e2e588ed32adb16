"""Training a counterweight policy without gradients through the layer: forward solves only.

Three optimisers of a policy's flat weight vector, each asking for a population of candidate weights and told
their losses on one shared batch of goals (``batch_size`` per candidate, common to the population):

- ``OpenAIES``: antithetic Gaussian perturbations, centred ranks, Adam on the estimate (as the grasp-yaw
  experiment's ES);
- ``LibraryCMA``: CMA-ES from the ``cmaes`` library, separable (``SepCMA``, for the network's thousands of
  weights) or full (``CMA``, for ``LinearPolicy``'s 72).

``train_zero_order`` spends a budget of layer evaluations or of seconds, validating the distribution's centre
(ES's weights, CMA's mean) every ``validate_each`` evaluations, as the gradient trainer does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch
from cmaes import CMA, SepCMA
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from learning.common.ranks import antithetic_estimate
from learning.counterweight.problem import CounterweightProblem
from learning.counterweight.training import Curve, Trained, Validator, reach_loss


class OpenAIES:
    """``2 * pairs`` candidates ``centre +- sigma * noise``; ``tell`` takes an Adam step on the rank estimate."""

    def __init__(self, centre: torch.Tensor, pairs: int, sigma: float, learning_rate: float, seed: int) -> None:
        self.weights = nn.Parameter(centre.detach().clone())
        self.optimizer = torch.optim.Adam([self.weights], lr=learning_rate)
        self.pairs, self.sigma = pairs, sigma
        self.generator = torch.Generator().manual_seed(10_000 + seed)
        self._noise: torch.Tensor | None = None

    @property
    def population_size(self) -> int:
        return 2 * self.pairs

    def centre(self) -> torch.Tensor:
        return self.weights.detach()

    def ask(self) -> torch.Tensor:
        self._noise = torch.randn(self.pairs, self.weights.numel(), generator=self.generator, dtype=self.weights.dtype)
        centre = self.weights.detach()
        return torch.cat((centre + self.sigma * self._noise, centre - self.sigma * self._noise))

    def tell(self, losses: torch.Tensor) -> None:
        estimate = antithetic_estimate(losses.reshape(2, self.pairs), self._noise, self.sigma)
        self.weights.grad = estimate.to(self.weights.dtype)  # the estimate of d(loss)/d(weights), for Adam
        self.optimizer.step()


class LibraryCMA:
    """``cmaes.SepCMA`` (``separable=True``) or ``cmaes.CMA`` from ``centre`` with step size ``sigma``."""

    def __init__(self, centre: torch.Tensor, sigma: float, population: int | None, separable: bool, seed: int) -> None:
        kind = SepCMA if separable else CMA
        self.optimizer = kind(mean=centre.detach().double().numpy(), sigma=sigma, seed=seed, population_size=population)
        self.dtype = centre.dtype
        self._asked: list[np.ndarray] = []

    @property
    def population_size(self) -> int:
        return self.optimizer.population_size

    def centre(self) -> torch.Tensor:
        return torch.from_numpy(np.array(self.optimizer.mean)).to(self.dtype)

    def ask(self) -> torch.Tensor:
        self._asked = [self.optimizer.ask() for _ in range(self.optimizer.population_size)]
        return torch.from_numpy(np.stack(self._asked)).to(self.dtype)

    def tell(self, losses: torch.Tensor) -> None:
        self.optimizer.tell([(x, float(v)) for x, v in zip(self._asked, losses.tolist(), strict=True)])


def train_zero_order(
    problem: CounterweightProblem,
    policy: nn.Module,
    optimiser: OpenAIES | LibraryCMA,
    train_goals: torch.Tensor,
    validation_goals: torch.Tensor,
    batch_size: int,
    penalty: float,
    validate_each: int,
    seed: int,
    max_evaluations: int | None = None,
    max_seconds: float | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> Trained:
    """Ask, score every candidate on one batch of ``batch_size`` goals in one solve, tell; until
    ``max_evaluations`` layer evaluations or ``max_seconds`` of training are spent (give exactly one)."""
    if (max_evaluations is None) == (max_seconds is None):
        raise ValueError("give exactly one budget: max_evaluations or max_seconds")
    params = list(policy.parameters())
    dtype = problem.tree.joint_lower.dtype
    goals_pool = train_goals.to(dtype)
    generator = torch.Generator().manual_seed(20_000 + seed)
    validation, curve = Validator(problem, validation_goals), Curve()
    validation(policy, curve, 0, 0.0, float("nan"))
    per_generation = optimiser.population_size * batch_size
    evaluations, seconds, next_validation = 0, 0.0, validate_each

    def spent() -> bool:
        if max_evaluations is not None:
            return evaluations + per_generation > max_evaluations
        return seconds >= max_seconds

    loss = torch.tensor(float("nan"))
    while not spent():
        start = time.perf_counter()
        with torch.no_grad():
            goals = goals_pool[torch.randint(len(goals_pool), (batch_size,), generator=generator)]
            candidates = optimiser.ask()
            outputs = []
            for weights in candidates:
                vector_to_parameters(weights.to(dtype), params)
                outputs.append(policy(goals))
            population = candidates.shape[0]
            per_goal = reach_loss(
                problem, goals.repeat(population, 1), torch.cat(outputs), policy.parameterisation, penalty
            )
            loss = per_goal.reshape(population, batch_size).mean(-1)
        optimiser.tell(loss)
        vector_to_parameters(optimiser.centre().to(dtype), params)
        seconds += time.perf_counter() - start
        evaluations += population * batch_size
        if evaluations >= next_validation or spent():
            next_validation += validate_each
            validation(policy, curve, evaluations, seconds, float(loss.mean()))
            log(f"zero-order seed {seed} evaluations {evaluations}: validation {curve.validation_success[-1]:.2f}")
    if curve.evaluations[-1] != evaluations:
        validation(policy, curve, evaluations, seconds, float(loss.mean()))
    return Trained(validation.best, curve, evaluations, seconds, validation.best_success)


def flat_weights(policy: nn.Module) -> torch.Tensor:
    return parameters_to_vector(list(policy.parameters())).detach()
