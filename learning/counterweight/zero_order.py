"""Training a counterweight policy without gradients through the layer: forward solves only.

Four optimisers of a policy's flat weight vector, each asking for a population of candidate weights and told
their losses on one shared batch of goals (``batch_size`` per candidate, common to the population):

- ``OpenAIES``: antithetic Gaussian perturbations, centred ranks, Adam on the estimate (as the grasp-yaw
  experiment's ES);
- ``LibraryCMA``: CMA-ES from the ``cmaes`` library, separable (``SepCMA``, for the network's thousands of
  weights) or full (``CMA``, for ``LinearPolicy``'s 72);
- ``PGPE``: PGPE with ClipUp from EvoTorch.

``train_zero_order`` spends a budget of layer evaluations or of seconds, checking the distribution's centre at the
checkpoints of ``learning.counterweight.selection``, as the gradient trainer does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from cmaes import CMA, SepCMA
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from learning.common.ranks import antithetic_estimate
from learning.counterweight.problem import CounterweightProblem
from learning.counterweight.selection import Checkpoints, Trained, train_with_checkpoints
from learning.counterweight.training import reach_loss


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


class PGPE:
    """PGPE with the ClipUp optimiser from EvoTorch (``evotorch.algorithms.functional.pgpe``): symmetric sampling
    of ``population`` candidates (even) around the centre with per-weight ``stdev``, centred ranks; the centre moves
    by ClipUp at ``learning_rate`` (maximum speed twice that, ClipUp's rule), the standard deviation by PGPE's own
    update (learning rate ``stdev_learning_rate``, each step within ``stdev_max_change`` of its value). Sampling
    draws from torch's global generator (seeded by the trainer)."""

    def __init__(
        self,
        centre: torch.Tensor,
        population: int,
        stdev: float,
        learning_rate: float,
        stdev_learning_rate: float = 0.1,
        stdev_max_change: float = 0.2,
    ) -> None:
        from evotorch.algorithms.functional import pgpe  # here: EvoTorch takes a second to import (it pulls Ray)

        if population < 2 or population % 2:
            raise ValueError(f"PGPE's symmetric sampling needs an even population of at least 2, got {population}")
        self.population_size, self.dtype = population, centre.dtype
        self.state = pgpe(
            center_init=centre.detach().clone().double(),
            center_learning_rate=learning_rate,
            stdev_learning_rate=stdev_learning_rate,
            stdev_max_change=stdev_max_change,
            stdev_init=stdev,
            objective_sense="min",
            ranking_method="centered",
            optimizer="clipup",
            symmetric=True,
        )
        self._asked: torch.Tensor | None = None

    def centre(self) -> torch.Tensor:
        return self.state.optimizer_state.center.to(self.dtype)

    def ask(self) -> torch.Tensor:
        from evotorch.algorithms.functional import pgpe_ask

        self._asked = pgpe_ask(self.state, popsize=self.population_size)
        return self._asked.to(self.dtype)

    def tell(self, losses: torch.Tensor) -> None:
        from evotorch.algorithms.functional import pgpe_tell

        self.state = pgpe_tell(self.state, self._asked, losses.double())


def train_zero_order(
    problem: CounterweightProblem,
    policy: nn.Module,
    optimiser: OpenAIES | LibraryCMA | PGPE,
    train_goals: torch.Tensor,
    checkpoints: Checkpoints,
    batch_size: int,
    penalty: float,
    seed: int,
    max_evaluations: int | None = None,
    max_seconds: float | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> Trained:
    """Ask, score every candidate on one batch of ``batch_size`` goals in one solve, tell, and leave the
    distribution's centre (ES's weights, CMA's mean, PGPE's centre) in ``policy``; until ``max_evaluations``
    layer evaluations (selection included) or ``max_seconds`` are spent (give exactly one)."""
    params = list(policy.parameters())
    dtype = problem.tree.joint_lower.dtype
    goals_pool = train_goals.to(dtype)
    generator = torch.Generator().manual_seed(20_000 + seed)

    @torch.no_grad()
    def generation() -> float:
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
        losses = per_goal.reshape(population, batch_size).mean(-1)
        optimiser.tell(losses)
        vector_to_parameters(optimiser.centre().to(dtype), params)
        return float(losses.mean())

    return train_with_checkpoints(
        policy,
        generation,
        optimiser.population_size * batch_size,
        checkpoints,
        max_evaluations,
        max_seconds,
        log,
        f"zero-order seed {seed}",
    )


def flat_weights(policy: nn.Module) -> torch.Tensor:
    return parameters_to_vector(list(policy.parameters())).detach()
