"""The Franka Panda as the lab uses it (the grasp experiment, the benchmark, the viewer): a ``KinematicsLayer`` from
the root link to the TCP with its URDF joint limits, and its ready pose."""

from __future__ import annotations

import torch

import assets
from assets import MissingAssetError
from kinematics import KinematicsLayer, SerialChainKinematics


def franka_kinematics(device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> KinematicsLayer:
    """The 7-DoF Panda arm with its URDF joint limits; FK gives ``T_root_tcp``."""
    chain = SerialChainKinematics.from_urdf(
        assets.PANDA.urdf_text(),
        end_link_name=assets.PANDA.frames["tcp"],
        root_link_name=assets.PANDA.root_link,
        device=device,
        dtype=dtype,
    )
    if chain.joint_names != assets.PANDA.joints:
        raise MissingAssetError(
            f"the installed Panda URDF has arm joints {chain.joint_names}, expected {assets.PANDA.joints}; "
            "reinstall example-robot-data"
        )
    return KinematicsLayer(chain)


def ready_pose(device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``(7,)`` the Panda's ready configuration."""
    return torch.tensor(assets.PANDA.reference_posture, device=device, dtype=dtype)
