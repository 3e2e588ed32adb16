"""OpenAI-ES's shared steps (both experiments): centred-rank fitness shaping and the antithetic gradient estimate."""

from __future__ import annotations

import torch


def centred_ranks(values: torch.Tensor) -> torch.Tensor:
    """Ranks of ``values`` (any shape) mapped linearly to ``[-0.5, 0.5]``."""
    flat = values.reshape(-1)
    ranks = torch.empty_like(flat)
    ranks[flat.argsort()] = torch.arange(flat.numel(), dtype=flat.dtype, device=flat.device)
    return (ranks / max(flat.numel() - 1, 1) - 0.5).reshape(values.shape)


def antithetic_estimate(costs: torch.Tensor, noise: torch.Tensor, sigma: float) -> torch.Tensor:
    """The gradient estimate ``(n,)`` from the costs ``(2, pairs)`` of the ``+sigma`` and ``-sigma`` perturbations along
    ``noise`` ``(pairs, n)``, each cost replaced by its centred rank over all ``2 * pairs``."""
    shaped = centred_ranks(costs)
    pairs = noise.shape[0]
    return ((shaped[0] - shaped[1])[:, None] * noise).sum(0) / (2 * pairs * sigma)
