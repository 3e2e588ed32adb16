"""The one URDF reader of the library: parsing, the joint kinds, the name hints of its errors, the serial chain's
walk (``chain_joints``, behind ``SerialChainKinematics``) and the tree's walk (``describe_tree``, behind
``KinematicTree``), which gives every link and movable joint of a URDF tree as constant arrays.

The tree's walk is depth first from the root link, children in the URDF's joint order. Fixed joints are folded into
constant offsets (a fixed joint that carries a ``<mimic>`` tag is still fixed, as in Pinocchio). Every movable
joint (revolute, continuous, prismatic) becomes a *node*; a mimic joint is a node without a degree of freedom of
its own, ``q = multiplier * q_source + offset``. Each node's frame is re-expressed by a constant rotation that takes
z to its axis (``rotation_taking_z_to``, as the chain does), so that every node moves along or
about its local z. Nothing robot-specific lives here.
"""

from __future__ import annotations

import difflib
import io
from dataclasses import dataclass

import numpy as np
import yourdfpy

from kinematics.errors import LinkNotFoundError, NotAChainError, URDFError

REVOLUTE, PRISMATIC = 0, 1
MOVABLE = {"revolute": REVOLUTE, "continuous": REVOLUTE, "prismatic": PRISMATIC}


def close_names(name: str, names) -> list[str]:
    """Up to five names of ``names`` that look like ``name`` (for error hints)."""
    names = list(names)
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    tail = name.split("_")[-1]
    close += [n for n in names if tail and tail in n and n not in close]
    return close[:5]


def parse_urdf(urdf_text: str) -> yourdfpy.URDF:
    """The URDFs kinematic description (no meshes, no scene graph); a ``URDFError`` when it does not parse."""
    try:
        return yourdfpy.URDF.load(
            io.BytesIO(urdf_text.encode()),
            build_scene_graph=False,
            load_meshes=False,
            build_collision_scene_graph=False,
            load_collision_meshes=False,
        )
    except Exception as exc:  # yourdfpy raises lxml / assertion errors of several kinds.
        raise URDFError(f"could not parse the URDF text: {exc}") from exc


def chain_joints(urdf: yourdfpy.URDF, root_link: str, end_link: str) -> list:
    """The joints on the path from ``root_link`` down to ``end_link``, root first: the serial chain's walk."""
    links = {link.name for link in urdf.robot.links}
    for role, name in (("root_link_name", root_link), ("end_link_name", end_link)):
        if name not in links:
            close = close_names(name, sorted(links))
            hint = f"; similar names: {close}" if close else ""
            raise LinkNotFoundError(f"{role}={name!r} is not a link of this URDF{hint}")
    parent_joint = {joint.child: joint for joint in urdf.robot.joints}
    path, link = [], end_link
    while link != root_link:
        if link not in parent_joint:
            raise NotAChainError(f"{root_link!r} is not an ancestor of {end_link!r}: no serial chain between them")
        joint = parent_joint[link]
        path.append(joint)
        link = joint.parent
    return path[::-1]


def rotation_taking_z_to(axis: np.ndarray) -> np.ndarray:
    """A rotation whose third column is the unit ``axis`` (the identity for the z axis itself)."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(axis[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = helper - helper.dot(axis) * axis
    x = x / np.linalg.norm(x)
    return np.stack((x, np.cross(axis, x), axis), 1)


@dataclass(frozen=True)
class TreeDescription:
    """Constant arrays of a URDF tree, in the walk's depth-first order.

    Nodes are the movable joints (``n`` of them); node ``-1`` stands for the root. ``node_origin[i]`` is the
    transform from node ``parent[i]``'s aligned frame (the root link's frame for ``-1``) to node ``i``'s aligned
    frame at ``q = 0``; node ``i``'s aligned frame is then moved by ``R_z(q_i)`` (revolute) or ``q_i e_z``
    (prismatic). ``frame_offset[f]`` takes the aligned frame of ``frame_node[f]`` to link ``f``'s frame.
    """

    root_link: str
    node_names: tuple[str, ...]
    parent: np.ndarray  # (n,) int, -1 for the root
    kind: np.ndarray  # (n,) REVOLUTE / PRISMATIC
    node_origin: np.ndarray  # (n, 4, 4)
    dof: np.ndarray  # (n,) index of the independent joint that drives the node
    multiplier: np.ndarray  # (n,) 1 for independent joints
    offset: np.ndarray  # (n,) 0 for independent joints
    joint_names: tuple[str, ...]  # independent joints, depth-first
    lower: np.ndarray  # (n_joints,) -inf when unbounded
    upper: np.ndarray
    frame_names: tuple[str, ...]  # links, depth-first
    frame_node: np.ndarray  # (n_frames,) int, -1 for links rigidly attached to the root
    frame_offset: np.ndarray  # (n_frames, 4, 4)
    mass: np.ndarray  # (n_frames,) 0 for links without an inertial
    com_local: np.ndarray  # (n_frames, 3) inertial origin in the link frame

    @property
    def mimic_names(self) -> tuple[str, ...]:
        return tuple(n for n, m in zip(self.node_names, self.is_mimic, strict=True) if m)

    @property
    def is_mimic(self) -> np.ndarray:
        independent = {name: i for i, name in enumerate(self.joint_names)}
        return np.array([independent.get(name, -1) != d for name, d in zip(self.node_names, self.dof, strict=True)])


def _origin(joint) -> np.ndarray:
    return np.eye(4) if joint.origin is None else np.asarray(joint.origin, dtype=np.float64)


def describe_tree(urdf_text: str) -> TreeDescription:
    """Walk the URDF text; raises ``URDFError`` for a forest, an unsupported joint type, a zero axis, or a mimic
    joint whose source is not a movable joint."""
    urdf: yourdfpy.URDF = parse_urdf(urdf_text)
    robot = urdf.robot
    children: dict[str, list] = {link.name: [] for link in robot.links}
    child_links = set()
    for joint in robot.joints:
        if joint.parent not in children or joint.child not in children:
            raise URDFError(f"joint {joint.name!r} connects unknown links {joint.parent!r} -> {joint.child!r}")
        children[joint.parent].append(joint)
        child_links.add(joint.child)
    roots = [link.name for link in robot.links if link.name not in child_links]
    if len(roots) != 1:
        raise URDFError(f"the URDF must describe one tree with one root link, found roots {roots}")
    links = {link.name: link for link in robot.links}

    node_names, parent, kind, node_origin, mimic_of = [], [], [], [], []
    limits: dict[str, tuple[float, float]] = {}
    frame_names, frame_node, frame_offset, mass, com_local = [], [], [], [], []
    # Depth-first, children in the URDF's joint order: (link, owner node, owner aligned frame -> the link's parent
    # frame at its joint, the movable joint into the link or None). A node is created when its link is reached, so
    # nodes (and the joints) are in depth-first order too, as in Pinocchio.
    stack = [(roots[0], -1, np.eye(4), None)]
    while stack:
        link_name, owner, offset, joint = stack.pop()
        if joint is not None:
            axis = np.array([1.0, 0.0, 0.0]) if joint.axis is None else np.asarray(joint.axis, dtype=np.float64)
            if np.linalg.norm(axis) < 1e-12:
                raise URDFError(f"joint {joint.name!r} has a zero axis")
            align = np.eye(4)
            align[:3, :3] = rotation_taking_z_to(axis / np.linalg.norm(axis))
            node_names.append(joint.name)
            parent.append(owner)
            kind.append(MOVABLE[joint.type])
            node_origin.append(offset @ align)
            mimic_of.append(joint.mimic)
            bounded = joint.type != "continuous" and joint.limit is not None and joint.limit.lower is not None
            lower = float(joint.limit.lower) if bounded else -np.inf
            upper = float(joint.limit.upper) if bounded and joint.limit.upper is not None else np.inf
            limits[joint.name] = (lower, upper)
            owner, offset = len(node_names) - 1, align.T
        frame_names.append(link_name)
        frame_node.append(owner)
        frame_offset.append(offset)
        inertial = links[link_name].inertial
        has_mass = inertial is not None and inertial.mass is not None
        mass.append(float(inertial.mass) if has_mass else 0.0)
        origin = np.eye(4) if not has_mass or inertial.origin is None else np.asarray(inertial.origin, float)
        com_local.append(origin[:3, 3])
        pushed = []
        for child in children[link_name]:
            to_joint = offset @ _origin(child)
            if child.type == "fixed":
                pushed.append((child.child, owner, to_joint, None))
            elif child.type in MOVABLE:
                pushed.append((child.child, owner, to_joint, child))
            else:
                raise URDFError(f"joint {child.name!r} has unsupported type {child.type!r}")
        stack.extend(reversed(pushed))

    index = {name: i for i, name in enumerate(node_names)}
    joint_names = tuple(name for name, mimic in zip(node_names, mimic_of, strict=True) if mimic is None)
    dof_of = {name: i for i, name in enumerate(joint_names)}
    dof, multiplier, offset_q = [], [], []
    for name, mimic in zip(node_names, mimic_of, strict=True):
        if mimic is None:
            dof.append(dof_of[name])
            multiplier.append(1.0)
            offset_q.append(0.0)
            continue
        if mimic.joint not in index:
            raise URDFError(f"joint {name!r} mimics {mimic.joint!r}, which is not a movable joint of this URDF")
        if mimic.joint not in dof_of:
            raise URDFError(f"joint {name!r} mimics {mimic.joint!r}, itself a mimic joint (chains are unsupported)")
        dof.append(dof_of[mimic.joint])
        multiplier.append(1.0 if mimic.multiplier is None else float(mimic.multiplier))
        offset_q.append(0.0 if mimic.offset is None else float(mimic.offset))
    n = len(node_names)
    return TreeDescription(
        root_link=roots[0],
        node_names=tuple(node_names),
        parent=np.array(parent, dtype=np.int64),
        kind=np.array(kind, dtype=np.int64),
        node_origin=np.stack(node_origin) if n else np.zeros((0, 4, 4)),
        dof=np.array(dof, dtype=np.int64),
        multiplier=np.array(multiplier),
        offset=np.array(offset_q),
        joint_names=joint_names,
        lower=np.array([limits[name][0] for name in joint_names]),
        upper=np.array([limits[name][1] for name in joint_names]),
        frame_names=tuple(frame_names),
        frame_node=np.array(frame_node, dtype=np.int64),
        frame_offset=np.stack(frame_offset),
        mass=np.array(mass),
        com_local=np.array(com_local),
    )
