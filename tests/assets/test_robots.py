"""Robots as data: every description in assets agrees with its URDF (links, driven joints in the URDF's depth-first
order, limits, meshes), the G1's sole corners are its URDF's sole spheres and it stands on them in the reference
posture with its centre of mass over its feet, and the packages import each other only the way the layout says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yourdfpy

import assets
from kinematics import KinematicTree

ROOT = Path(__file__).resolve().parents[2]
DESCRIPTIONS = list(assets.ROBOTS.values())


def _urdf(robot: assets.RobotDescription) -> yourdfpy.URDF:
    return yourdfpy.URDF.load(str(robot.urdf_path()), build_scene_graph=False, load_meshes=False)


def _depth_first(urdf: yourdfpy.URDF, root: str) -> list[str]:
    children: dict[str, list] = {}
    for joint in urdf.robot.joints:
        children.setdefault(joint.parent, []).append(joint)
    order: list[str] = []

    def visit(link: str) -> None:
        for joint in children.get(link, []):
            if joint.type != "fixed" and joint.mimic is None:
                order.append(joint.name)
            visit(joint.child)

    visit(root)
    return order


@pytest.mark.parametrize("robot", DESCRIPTIONS, ids=lambda r: r.name)
def test_the_description_agrees_with_its_urdf(robot: assets.RobotDescription) -> None:
    urdf = _urdf(robot)
    links = {link.name for link in urdf.robot.links}
    joints = {joint.name: joint for joint in urdf.robot.joints}
    assert robot.root_link in links and robot.root_link not in {j.child for j in joints.values()}
    for role, link in {**robot.frames, **{r: c.link for r, c in robot.contacts.items()}}.items():
        assert link in links, f"{robot.name}: frame {role!r} -> {link!r} is not a link"
    if robot.floating_base:
        assert list(robot.joints) == _depth_first(urdf, robot.root_link), "driven joints: the URDF's movable joints"
    else:
        driven = _depth_first(urdf, robot.root_link)
        assert list(robot.joints) == [j for j in driven if j not in robot.held_joints]
    for name, value in zip(robot.joints, robot.reference_posture, strict=True):
        limit = joints[name].limit
        assert limit.lower <= value <= limit.upper, f"{robot.name}: reference posture {name}={value} off its limits"
    for name, value in robot.held_joints.items():
        assert joints[name].limit.lower <= value <= joints[name].limit.upper
    for link in urdf.robot.links:
        for geometry in [v.geometry for v in link.visuals] + [c.geometry for c in link.collisions]:
            if geometry.mesh is not None:
                assert Path(assets.resolve_package_uri(geometry.mesh.filename)).is_file()


def test_the_g1_is_the_29_joint_floating_humanoid() -> None:
    g1 = KinematicTree.from_urdf(assets.G1.urdf_text(), floating_base=True, dtype=torch.float64)
    assert (g1.nq, g1.nv) == (36, 35) and g1.joint_names == assets.G1.joints and not g1.mimic_names
    assert g1.root_link_name == assets.G1.root_link


def test_the_g1_sole_corners_are_its_urdf_sole_spheres() -> None:
    urdf = _urdf(assets.G1)
    for contact in assets.G1.contacts.values():
        link = urdf.link_map[contact.link]
        lowest = sorted(tuple(c.origin[:3, 3] - [0.0, 0.0, c.geometry.sphere.radius]) for c in link.collisions)
        np.testing.assert_allclose(sorted(contact.corners), lowest, rtol=0, atol=1e-12)


def test_the_g1_stands_on_its_soles_with_its_centre_of_mass_over_them() -> None:
    robot = assets.G1
    g1 = KinematicTree.from_urdf(robot.urdf_text(), floating_base=True, dtype=torch.float64)
    q = g1.neutral()
    q[2] = robot.standing_base_height
    q[7:] = torch.tensor(robot.reference_posture, dtype=torch.float64)
    state = g1.forward_kinematics(q)
    corners_xy = []
    for contact in robot.contacts.values():
        T_world_foot = g1.frame_pose(state, contact.link)
        local = torch.tensor(contact.corners, dtype=torch.float64)
        world = local @ T_world_foot[:3, :3].T + T_world_foot[:3, 3]
        torch.testing.assert_close(world[:, 2], torch.zeros(4, dtype=torch.float64), atol=1e-4, rtol=0)
        corners_xy.append(world[:, :2])
    com = g1.center_of_mass(state)
    xy = torch.cat(corners_xy)
    assert xy[:, 0].min() + 0.03 < com[0] < xy[:, 0].max() - 0.03, "CoM over the feet, front to back"
    assert xy[:, 1].min() + 0.03 < com[1] < xy[:, 1].max() - 0.03, "and side to side"
