"""Training a counterweight policy without gradients through the layer: forward solves only.

Four optimisers of a policy's flat weight vector, each asking for a population of candidate weights and told
their losses on one shared batch of goals (``batch_size`` per candidate, common to the population):

- ``OpenAIES``: antithetic Gaussian perturbations, centred ranks, Adam on the estimate (as the grasp-yaw
  experiment's ES);
- ``LibraryCMA``: CMA-ES from the ``cmaes`` library, separable (``SepCMA``, for the network's thousands of
  weights) or full (``CMA``, for ``LinearPolicy``'s 72);
- ``PGPE``: PGPE with ClipUp from EvoTorch.

``ZeroOrderTrainer`` runs one generation a step; ``train_zero_order`` spends a budget of layer evaluations or of
seconds on its steps, checking the distribution's centre at the checkpoints of ``learning.counterweight.selection``,
as the gradient trainer does.
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


class ZeroOrderTrainer:
    """A policy trained without gradients by ``optimiser`` on ``train_goals`` ``(n, 3)``: ``step()`` runs one
    generation (ask; score every candidate on one shared batch of ``batch_size`` goals in one solve; tell; the
    distribution's centre, ES's weights, CMA's mean, PGPE's centre, left in ``policy``) and returns the population's
    mean loss. ``evaluations`` and ``seconds`` count what its steps spent (``train_zero_order`` and the G1 scene's
    live race share it)."""

    def __init__(
        self,
        problem: CounterweightProblem,
        policy: nn.Module,
        optimiser: OpenAIES | LibraryCMA | PGPE,
        train_goals: torch.Tensor,
        batch_size: int,
        penalty: float,
        seed: int,
    ) -> None:
        self.problem, self.policy, self.optimiser = problem, policy, optimiser
        self.batch_size, self.penalty = batch_size, penalty
        self._params = list(policy.parameters())
        self._dtype = problem.tree.joint_lower.dtype
        self.goals = train_goals.to(self._dtype)
        self.generator = torch.Generator().manual_seed(20_000 + seed)
        self.evaluations, self.seconds = 0, 0.0

    @property
    def evaluations_per_step(self) -> int:
        return self.optimiser.population_size * self.batch_size

    @torch.no_grad()
    def step(self) -> float:
        start = time.perf_counter()
        goals = self.goals[torch.randint(len(self.goals), (self.batch_size,), generator=self.generator)]
        candidates = self.optimiser.ask()
        outputs = []
        for weights in candidates:
            vector_to_parameters(weights.to(self._dtype), self._params)
            outputs.append(self.policy(goals))
        population = candidates.shape[0]
        per_goal = reach_loss(
            self.problem, goals.repeat(population, 1), torch.cat(outputs), self.policy.parameterisation, self.penalty
        )
        losses = per_goal.reshape(population, self.batch_size).mean(-1)
        self.optimiser.tell(losses)
        vector_to_parameters(self.optimiser.centre().to(self._dtype), self._params)
        self.seconds += time.perf_counter() - start
        self.evaluations += population * self.batch_size
        return float(losses.mean())


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
    """``ZeroOrderTrainer``'s generations until ``max_evaluations`` layer evaluations (selection included) or
    ``max_seconds`` are spent (give exactly one), the distribution's centre checked at the checkpoints."""
    trainer = ZeroOrderTrainer(problem, policy, optimiser, train_goals, batch_size, penalty, seed)
    return train_with_checkpoints(
        policy,
        trainer.step,
        trainer.evaluations_per_step,
        checkpoints,
        max_evaluations,
        max_seconds,
        log,
        f"zero-order seed {seed}",
    )


def flat_weights(policy: nn.Module) -> torch.Tensor:
    return parameters_to_vector(list(policy.parameters())).detach()
