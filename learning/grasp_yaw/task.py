"""The top-down grasp task: grasp poses ``T(p, psi)``, the radial rule, the current heading, and the cost of a yaw.

A grasp points the TCP z-axis straight down with its origin at the grasp point ``p`` (root frame, metres); the
yaw ``psi`` (radians) rotates the hand about the vertical. ``psi`` and ``psi + pi`` grasp the same with a
parallel gripper but are different IK targets, so every method chooses on the full circle.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kinematics import IKResult, KinematicsLayer


def yaw_vector(psi: torch.Tensor) -> torch.Tensor:
    """``(...) -> (..., 2)`` the unit vector ``(cos psi, sin psi)``."""
    return torch.stack((torch.cos(psi), torch.sin(psi)), -1)


def grasp_pose(p: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    """Top-down grasp ``T_root_tcp`` ``(..., 4, 4)`` at ``p`` ``(..., 3)`` with yaw given as a unit 2-vector ``(..., 2)``.

    The rotation is ``Rz(psi) @ diag(1, -1, -1)``: hand x-axis at angle ``psi`` in the table plane, z-axis down.
    Taking the yaw as ``(cos, sin)`` keeps the map continuous on the whole circle.
    """
    c, s = yaw.unbind(-1)
    zero, one = torch.zeros_like(c), torch.ones_like(c)
    rows = (c, s, zero, p[..., 0], s, -c, zero, p[..., 1], zero, zero, -one, p[..., 2], zero, zero, zero, one)
    return torch.stack(torch.broadcast_tensors(*rows), -1).reshape(*c.shape, 4, 4)


def radial_angle(p: torch.Tensor) -> torch.Tensor:
    """``(..., 3) -> (...)`` the geometric rule ``psi = atan2(p_y, p_x)``: face away from the robot's base."""
    return torch.atan2(p[..., 1], p[..., 0])


def current_heading(kinematics: KinematicsLayer, q0: torch.Tensor) -> torch.Tensor:
    """``(..., dof) -> (...)`` the current TCP heading: the hand's x-axis projected on the table plane.

    Keeping it is the rule the seed's system calls *heading*."""
    pose = kinematics(q0)
    return torch.atan2(pose[..., 1, 0], pose[..., 0, 0])


@dataclass(frozen=True)
class CostWeights:
    """Weights of the yaw cost: ``|q_ik - q0|^2 + position * |e_p|^2 + rotation * |e_r|^2 (+ failure)``.

    ``position`` is per square metre and ``rotation`` per square radian. The failure penalty added to every
    failed row is the squared diagonal of the joint-limit box, the largest displacement any success can have, so
    a yaw whose solve fails always costs more than one that succeeds.
    """

    position: float = 1000.0
    rotation: float = 100.0


def smooth_cost(result: IKResult, q0: torch.Tensor, weights: CostWeights) -> torch.Tensor:
    """``(...)`` the differentiable part of the cost, used as the training loss."""
    displacement = (result.q - q0).square().sum(-1)
    residual = weights.position * result.position_error.square().sum(-1)
    return displacement + residual + weights.rotation * result.rotation_error.square().sum(-1)


def failure_penalty(kinematics: KinematicsLayer) -> float:
    """The squared diagonal of the joint-limit box: no successful solve moves the joints farther."""
    span = torch.where(torch.isfinite(kinematics.upper - kinematics.lower), kinematics.upper - kinematics.lower, 0.0)
    return float(span.square().sum())


def yaw_cost(result: IKResult, q0: torch.Tensor, weights: CostWeights, penalty: float) -> torch.Tensor:
    """``(...)`` the full cost of a solved yaw: the smooth part plus ``penalty`` on failed rows."""
    return smooth_cost(result, q0, weights) + penalty * (~result.success).to(q0.dtype)
