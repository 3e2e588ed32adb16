"""The benchmarked robot and its inputs: the Panda chain from ``assets``, seeded configurations and targets.

Every method of one run sees the same inputs: configurations are drawn uniformly inside the joint limits in
float64 from a fixed seed, then cast to the dtype and device under test.
"""

from __future__ import annotations

import math

import torch

import assets
from kinematics import KinematicsLayer, SerialChainKinematics

# Standard deviation (rad) of the per-joint perturbation that turns a target's configuration into a "local" seed.
LOCAL_PERTURBATION = 0.05
TARGET_KINDS = ("local", "distant")


def panda_layer(device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> KinematicsLayer:
    """The Panda arm from ``assets.ROOT_LINK`` to ``assets.TCP_LINK`` with its URDF joint limits."""
    chain = SerialChainKinematics.from_urdf(
        assets.urdf_text(),
        end_link_name=assets.TCP_LINK,
        root_link_name=assets.ROOT_LINK,
        device=device,
        dtype=dtype,
    )
    return KinematicsLayer(chain)


def sampling_limits(layer: KinematicsLayer) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 CPU ``(dof,)`` bounds to sample from: the joint limits, ``[-pi, pi]`` where unbounded."""
    lower = layer.lower.detach().to("cpu", torch.float64)
    upper = layer.upper.detach().to("cpu", torch.float64)
    return torch.where(torch.isfinite(lower), lower, -math.pi), torch.where(torch.isfinite(upper), upper, math.pi)


def random_configs(layer: KinematicsLayer, n: int, seed: int) -> torch.Tensor:
    """``(n, dof)`` float64 CPU configurations, uniform inside the limits, reproducible from ``seed``."""
    lower, upper = sampling_limits(layer)
    gen = torch.Generator().manual_seed(seed)
    return lower + torch.rand(n, layer.dof, generator=gen, dtype=torch.float64) * (upper - lower)


def ik_problem(layer64: KinematicsLayer, batch: int, kind: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeds ``(batch, dof)`` and targets ``(batch, 4, 4)``, float64 on the CPU.

    The targets are FK of configurations uniform inside the limits, the same for both kinds. ``local``: each
    seed is its target's configuration perturbed by N(0, 0.05 rad) per joint, clamped into the limits.
    ``distant``: independent uniform seeds.
    """
    goal = random_configs(layer64, batch, seed)
    if kind == "local":
        gen = torch.Generator().manual_seed(seed + 1)
        noise = torch.randn(batch, layer64.dof, generator=gen, dtype=torch.float64)
        seeds = layer64.clamp(goal + LOCAL_PERTURBATION * noise)
    elif kind == "distant":
        seeds = random_configs(layer64, batch, seed + 2)
    else:
        raise ValueError(f"target kind must be one of {TARGET_KINDS}, got {kind!r}")
    with torch.no_grad():
        return seeds, layer64(goal)
