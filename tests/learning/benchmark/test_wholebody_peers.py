"""The whole-body suite's peers: the URDF they load (meshes stripped, the kinematics kept), PlaCo's clockwise
polygon, a missing peer noted (not raised), and, where PlaCo and mink are installed (the ``placo`` extra, an
environment of its own), their steps moving the hand towards its target with the feet held."""

from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch

import assets
from kinematics import KinematicTree
from kinematics.wholebody import standing_problem
from learning.benchmark import wholebody_peers

HAND = "right_hand"


@pytest.fixture(scope="module")
def problem():
    tree = KinematicTree.from_urdf(assets.G1.urdf_text(), floating_base=True, dtype=torch.float64)
    return standing_problem(tree, assets.G1)


def test_the_stripped_urdf_keeps_every_joint_and_inertia_and_no_mesh() -> None:
    text = assets.G1.urdf_text()
    stripped = ET.fromstring(wholebody_peers.stripped_urdf(text))
    original = ET.fromstring(text)
    assert "<mesh" in text and not list(stripped.iter("mesh")) and not list(stripped.iter("visual"))
    assert [j.get("name") for j in stripped.iter("joint")] == [j.get("name") for j in original.iter("joint")]
    assert len(list(stripped.iter("inertial"))) == len(list(original.iter("inertial"))) > 0


def test_placos_polygon_is_clockwise_and_the_hull() -> None:
    square = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.5, 0.5]])
    hull = np.array(wholebody_peers.clockwise_hull(square))
    assert len(hull) == 4
    signed_area = 0.5 * np.sum(hull[:, 0] * np.roll(hull[:, 1], -1) - np.roll(hull[:, 0], -1) * hull[:, 1])
    assert signed_area == pytest.approx(-1.0)  # clockwise


def test_a_missing_peer_is_a_note_and_the_others_run(problem, monkeypatch) -> None:
    real = wholebody_peers._module

    def without_placo(name, install):
        if name == "placo":
            raise wholebody_peers.peers.PeerUnavailableError(f"{name} is not installed: {install}")
        return real(name, install)

    monkeypatch.setattr(wholebody_peers, "_module", without_placo)
    hands = problem.fixed_targets["left_foot"][None].expand(2, 4, 4)  # any pose: nothing is solved here
    found, notes = wholebody_peers.loops(problem, assets.G1, HAND, hands, 0.02, 1e-2)
    assert "placo.loop" not in found and any(n.startswith("placo.loop skipped: placo is not installed") for n in notes)
    assert set(found) | {n.split(" ")[0] for n in notes} == set(wholebody_peers.DIFFERENCES)


@pytest.mark.parametrize("peer", ["placo", "mink"])
def test_a_peers_steps_reach_towards_the_hand_target(problem, peer) -> None:
    if importlib.util.find_spec(peer) is None:
        pytest.skip(f"{peer} is not installed (the 'placo' extra, in an environment of its own)")
    tree = problem.layer.tree
    T_world_hand = tree.frame_pose(problem.q_stand, assets.G1.frames[HAND]).double().numpy()
    T_world_hand[:3, 3] += [0.05, -0.05, 0.05]
    hands = np.repeat(T_world_hand[None], 40, 0)
    loop = {
        "placo": lambda: wholebody_peers.placo_loop(problem, assets.G1, HAND, hands, 0.02, 1e-2),
        "mink": lambda: wholebody_peers.mink_loop(problem, assets.G1, HAND, hands, 1e-2),
    }[peer]()
    loop()
    state = dict(zip(loop.__code__.co_freevars, (c.cell_contents for c in loop.__closure__), strict=True))
    if peer == "placo":
        reached = state["wrapper"].get_T_world_frame(assets.G1.frames[HAND])[:3, 3]
    else:
        reached = state["configuration"].get_transform_frame_to_world(assets.G1.frames[HAND], "body").translation()
    assert np.linalg.norm(reached - T_world_hand[:3, 3]) < 0.02  # from 87 mm away
