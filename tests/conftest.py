"""Shared fixtures of every test folder: robot descriptions, parsed chains and Panda layers.

Parsing a URDF costs tens of milliseconds, so chains and layers are built once per session and shared. Treat
the shared ones as read-only; a test that moves or reloads a module builds its own with ``make_panda_layer``.
"""

from __future__ import annotations

import os

# Passive OpenMP waiting: with spinning threads a 2-core machine shared with the viewer, the browser or another
# process slows torch by an order of magnitude. Must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import math
from collections.abc import Callable

import pytest
import torch

import assets
from kinematics import KinematicsLayer, SerialChainKinematics

ROBOTS = "example-robot-data/robots"
PANDA_ROOT, PANDA_TCP = assets.PANDA.root_link, assets.PANDA.frames["tcp"]


@pytest.fixture(scope="session")
def panda_urdf() -> str:
    """Text of the Panda URDF shipped by example-robot-data (arm, hand, fingers, panda_hand_tcp)."""
    return assets.PANDA.urdf_text()


@pytest.fixture(scope="session")
def robot_urdf() -> Callable[[str], str]:
    """Factory: URDF text of any example-robot-data robot by its path under ``robots/`` (read once)."""
    cache: dict[str, str] = {}

    def get(relative: str) -> str:
        if relative not in cache:
            cache[relative] = assets.robot_file(f"{ROBOTS}/{relative}").read_text()
        return cache[relative]

    return get


@pytest.fixture(scope="session")
def pr2_urdf(robot_urdf) -> str:
    return robot_urdf("pr2_description/urdf/pr2.urdf")


@pytest.fixture(scope="session")
def ur5_urdf(robot_urdf) -> str:
    return robot_urdf("ur_description/urdf/ur5_robot.urdf")


@pytest.fixture(scope="session")
def chain_of() -> Callable[..., SerialChainKinematics]:
    """Factory: ``chain_of(urdf_text, root, end, dtype)``, cached per arguments (shared: do not mutate)."""
    cache: dict[tuple, SerialChainKinematics] = {}

    def get(urdf_text: str, root: str, end: str, dtype: torch.dtype = torch.float64) -> SerialChainKinematics:
        key = (hash(urdf_text), root, end, dtype)
        if key not in cache:
            cache[key] = SerialChainKinematics.from_urdf(urdf_text, end_link_name=end, root_link_name=root, dtype=dtype)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def panda_layer(panda_urdf, chain_of) -> Callable[[torch.dtype], KinematicsLayer]:
    """Factory: the shared Panda ``KinematicsLayer`` (link0 -> hand TCP, URDF limits) per dtype."""
    cache: dict[torch.dtype, KinematicsLayer] = {}

    def get(dtype: torch.dtype = torch.float64) -> KinematicsLayer:
        if dtype not in cache:
            cache[dtype] = KinematicsLayer(chain_of(panda_urdf, PANDA_ROOT, PANDA_TCP, dtype))
        return cache[dtype]

    return get


@pytest.fixture(scope="session")
def panda64(panda_layer) -> KinematicsLayer:
    """The shared float64 Panda layer."""
    return panda_layer(torch.float64)


@pytest.fixture
def make_panda_layer(panda_urdf) -> Callable[..., KinematicsLayer]:
    """Factory of private Panda layers (freshly parsed chain) for tests that move, reload or mutate them."""

    def make(dtype: torch.dtype = torch.float64, end: str = PANDA_TCP, **kwargs) -> KinematicsLayer:
        chain = SerialChainKinematics.from_urdf(panda_urdf, end_link_name=end, root_link_name=PANDA_ROOT, dtype=dtype)
        return KinematicsLayer(chain, **kwargs)

    return make


@pytest.fixture(scope="session")
def ready_pose() -> Callable[[torch.dtype], torch.Tensor]:
    """Factory: the Panda ready configuration ``(7,)`` in a dtype."""
    return lambda dtype=torch.float64: torch.tensor(assets.PANDA.reference_posture, dtype=dtype)


@pytest.fixture(scope="session")
def sample_joints() -> Callable[..., torch.Tensor]:
    """Factory: ``sample_joints(lower, upper, n, seed, margin=0.0)`` uniform configurations ``(n, dof)``.

    Bounded joints are drawn inside ``[lower + margin, upper - margin]``, unbounded ones in ``[-pi, pi)``.
    """

    def sample(lower: torch.Tensor, upper: torch.Tensor, n: int, seed: int, margin: float = 0.0) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        u = torch.rand(n, lower.shape[-1], generator=gen, dtype=torch.float64)
        lo, hi = lower.to(torch.float64), upper.to(torch.float64)
        bounded = torch.isfinite(lo) & torch.isfinite(hi)
        lo = torch.where(bounded, lo + margin, -math.pi)
        hi = torch.where(bounded, hi - margin, math.pi)
        return (lo + u * (hi - lo)).to(lower.dtype)

    return sample


@pytest.fixture
def start_viewer():
    """Factory: ``start_viewer(**ViewerConfig fields)`` launches an in-process viewer on a free port; every one
    started is closed at teardown."""
    from viewer_support import free_port

    from app.config import ViewerConfig
    from app.grasp_yaw.scene import launch

    viewers = []

    def start(**kwargs):
        viewer = launch(ViewerConfig(port=free_port(), **kwargs))
        viewers.append(viewer)
        return viewer

    yield start
    for viewer in viewers:
        viewer.close()
