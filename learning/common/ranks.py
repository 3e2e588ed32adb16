"""Centred-rank fitness shaping, the evolution strategies' shared step (OpenAI-ES in both experiments)."""

from __future__ import annotations

import torch


def centred_ranks(values: torch.Tensor) -> torch.Tensor:
    """Ranks of ``values`` (any shape) mapped linearly to ``[-0.5, 0.5]``."""
    flat = values.reshape(-1)
    ranks = torch.empty_like(flat)
    ranks[flat.argsort()] = torch.arange(flat.numel(), dtype=flat.dtype, device=flat.device)
    return (ranks / max(flat.numel() - 1, 1) - 0.5).reshape(values.shape)
