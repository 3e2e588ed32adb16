"""The Franka Panda assets: URDF and meshes resolve from example-robot-data, the TCP sits where it
should at the ready pose, and a missing distribution is a typed, actionable error."""

from __future__ import annotations

import importlib.metadata
import math
import re
from pathlib import Path

import pytest
import torch

import assets
import assets.example_robot_data
from assets import MissingAssetError
from kinematics import ProjectError


def test_panda_urdf_resolves():
    path = assets.PANDA.urdf_path()
    assert isinstance(path, Path) and path.is_file()
    assert path.as_posix().endswith("example-robot-data/robots/panda_description/urdf/panda.urdf")
    text = assets.PANDA.urdf_text()
    assert text == path.read_text()
    for name in (assets.PANDA.root_link, assets.PANDA.frames["tcp"], *assets.PANDA.joints, *assets.PANDA.held_joints):
        assert f'name="{name}"' in text, name


def test_every_mesh_uri_resolves_to_an_existing_file(panda_urdf):
    uris = re.findall(r'<mesh\s+filename="([^"]+)"', panda_urdf)
    assert len(uris) >= 20
    assert any(u.endswith(".dae") for u in uris) and any(u.endswith(".stl") for u in uris)
    for uri in uris:
        assert uri.startswith("package://example-robot-data/robots/panda_description/meshes/"), uri
        resolved = Path(assets.resolve_package_uri(uri))
        assert resolved.is_absolute() and resolved.is_file() and resolved.stat().st_size > 0, uri
        assert resolved.name == uri.rsplit("/", 1)[-1]


def test_missing_mesh_and_missing_file_raise_missing_asset():
    with pytest.raises(MissingAssetError, match="nope.dae"):
        assets.resolve_package_uri("package://example-robot-data/robots/panda_description/meshes/visual/nope.dae")
    with pytest.raises(MissingAssetError, match="reinstall"):
        assets.robot_file("example-robot-data/robots/no_such_robot/robot.urdf")
    assert issubclass(MissingAssetError, FileNotFoundError) and not issubclass(MissingAssetError, ProjectError)


def test_tcp_at_the_ready_pose(panda64, ready_pose):
    pose = panda64(ready_pose())
    torch.testing.assert_close(pose[:3, 3], torch.tensor([0.307, 0.0, 0.487], dtype=torch.float64), rtol=0, atol=2e-3)
    # Pointing down: the TCP z axis is the root's -z.
    torch.testing.assert_close(pose[:3, 2], torch.tensor([0.0, 0.0, -1.0], dtype=torch.float64), rtol=0, atol=1e-9)
    assert assets.PANDA.reference_posture == pytest.approx(
        (0, -math.pi / 4, 0, -3 * math.pi / 4, 0, math.pi / 2, math.pi / 4)
    )


def test_the_labs_panda_layer_is_the_same_panda(panda64, ready_pose):
    from learning.common.panda import franka_kinematics
    from learning.common.panda import ready_pose as learning_ready_pose

    layer = franka_kinematics(dtype=torch.float64)
    assert layer.joint_names == assets.PANDA.joints
    assert layer.model.fingerprint == panda64.model.fingerprint
    torch.testing.assert_close(layer(learning_ready_pose(dtype=torch.float64)), panda64(ready_pose()))
    assert franka_kinematics().dtype == torch.float32


@pytest.fixture
def without_distribution(monkeypatch):
    """example-robot-data looks uninstalled; the cached share folder is forgotten before and after."""

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    assets.example_robot_data.share_dir.cache_clear()
    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    yield
    assets.example_robot_data.share_dir.cache_clear()


def test_missing_distribution_raises_missing_asset(without_distribution):
    for call in (assets.PANDA.urdf_path, assets.G1.urdf_text, assets.example_robot_data.share_dir):
        with pytest.raises(MissingAssetError, match="pip install example-robot-data") as info:
            call()
        assert isinstance(info.value.__cause__, importlib.metadata.PackageNotFoundError)
    with pytest.raises(MissingAssetError):
        assets.resolve_package_uri("package://example-robot-data/robots/panda_description/meshes/visual/hand.dae")


def test_a_named_share_folder_stands_in_for_the_distribution(without_distribution, tmp_path, monkeypatch):
    """``EXAMPLE_ROBOT_DATA_SHARE`` names a ``share`` folder (a conda install, or a copy of the files a run reads):
    its files are found without the distribution, a file it lacks is a ``MissingAssetError`` naming it, and a folder
    without ``example-robot-data/robots`` is refused by name."""
    urdf = tmp_path / assets.G1.urdf_file
    urdf.parent.mkdir(parents=True)
    urdf.write_text("<robot name='g1'/>")
    monkeypatch.setenv("EXAMPLE_ROBOT_DATA_SHARE", str(tmp_path))
    assert assets.example_robot_data.share_dir() == tmp_path and assets.G1.urdf_text() == "<robot name='g1'/>"
    with pytest.raises(MissingAssetError, match="panda.urdf is not installed"):
        assets.PANDA.urdf_path()
    assets.example_robot_data.share_dir.cache_clear()
    monkeypatch.setenv("EXAMPLE_ROBOT_DATA_SHARE", str(tmp_path / "elsewhere"))
    with pytest.raises(
        MissingAssetError, match="EXAMPLE_ROBOT_DATA_SHARE is .*elsewhere.*no example-robot-data/robots"
    ):
        assets.example_robot_data.share_dir()


def test_share_dir_recovers_after_the_distribution_returns():
    """The fixture above must not leave a poisoned cache behind."""
    assets.example_robot_data.share_dir.cache_clear()
    assert (assets.example_robot_data.share_dir() / assets.PANDA.urdf_file).is_file()
