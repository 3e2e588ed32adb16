"""The whole-body layer's peers on the same G1 standing problem, each one step per configuration in a loop (they
solve one robot at a time): pink (``pink.solve_ik``), PlaCo (``placo.KinematicsSolver.solve``, C++) and mink
(``mink.solve_ik`` on MuJoCo's model of the same URDF).

Each is built on the G1 URDF the layer reads (PlaCo and MuJoCo load it with its meshes stripped: both would load every
mesh), at the layer's standing configuration, with the layer's hand targets, and with what of the layer's problem
it can state (``DIFFERENCES`` says what differs). All three are optional (the ``bench`` extra has pink; PlaCo and
mink are the ``placo`` extra, which pins Pinocchio to PlaCo's build): a missing one is a row skipped with a note.
"""

from __future__ import annotations

import importlib
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from learning.benchmark import peers

DIFFERENCES = {
    "pink.loop": "pink.solve_ik (daqp) on a configuration whose kinematics pink computed once, before the loop: the "
    "feet as frame tasks of cost 100 (pink has no equality contacts), a CoM task, the hand's position, the "
    "posture, configuration limits; no support-polygon constraint, one weighted QP",
    "placo.loop": "PlaCo's KinematicsSolver.solve(True) then update_kinematics(): the feet as hard frame tasks, the "
    "CoM in the support polygon with the layer's margin as a hard constraint, the hand's position and the posture "
    "as soft tasks (the layer's costs), joint limits; one weighted QP with hard constraints (the layer: a strict "
    "cascade of two levels), the full step applied (the layer's gains: 0.5), no step limit",
    "mink.loop": "mink.solve_ik (daqp) then integrate on MuJoCo's model of the URDF (a free joint at the pelvis): the "
    "feet as frame tasks of cost 100 (no equality contacts), the hand's position, the posture, configuration "
    "limits; no support polygon, one weighted QP",
}


def _module(name: str, install: str):
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise peers.PeerUnavailableError(f"{name} is not installed ({exc}): {install}") from exc


def stripped_urdf(urdf_text: str) -> str:
    """The URDF without its ``<visual>`` and ``<collision>`` elements (the kinematics and inertias only)."""
    root = ET.fromstring(urdf_text)
    for link in root.iter("link"):
        for child in [c for c in link if c.tag in ("visual", "collision")]:
            link.remove(child)
    return ET.tostring(root, encoding="unicode")


def clockwise_hull(points_xy: np.ndarray) -> list[np.ndarray]:
    """The convex hull of ``points_xy`` ``(n, 2)``, clockwise (PlaCo's order: counter-clockwise is infeasible)."""
    import scipy.spatial

    hull = points_xy[scipy.spatial.ConvexHull(points_xy).vertices]  # counter-clockwise
    return [np.array(p, dtype=float) for p in hull[::-1]]


def pink_loop(problem, robot, hand: str, hands: np.ndarray) -> Callable[[], None]:
    """One ``pink.solve_ik`` per row of ``hands`` ``(n, 4, 4)``."""
    pin = peers.load("pin")
    pink = _module("pink", "pip install pin-pink (the 'bench' extra)")
    from pink.tasks import ComTask, FrameTask, PostureTask

    model = pin.buildModelFromUrdf(str(robot.urdf_path()), pin.JointModelFreeFlyer())
    q = problem.q_stand.double().numpy()
    tasks = [FrameTask(robot.frames[hand], position_cost=1.0, orientation_cost=0.0), ComTask(cost=1.0)]
    tasks += [FrameTask(c.link, position_cost=100.0, orientation_cost=100.0) for c in robot.contacts.values()]
    tasks.append(PostureTask(cost=1e-2))
    configuration = pink.Configuration(model, model.createData(), q)
    for task in tasks[1:]:
        task.set_target_from_configuration(configuration)

    def loop():
        for T in hands:
            tasks[0].set_target(pin.SE3(T))
            pink.solve_ik(configuration, tasks, 1.0, solver="daqp", damping=0.05**2)

    return loop


def placo_loop(problem, robot, hand: str, hands: np.ndarray, margin: float, posture_cost: float):
    """One PlaCo step (``solve(True)``, ``update_kinematics()``) per row of ``hands``."""
    placo = _module("placo", "pip install -e '.[placo]' (in its own environment: PlaCo pins pin==3.8.0)")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "g1.urdf"
        path.write_text(stripped_urdf(robot.urdf_text()))
        wrapper = placo.RobotWrapper(str(path), placo.Flags.ignore_collisions)
    names = list(wrapper.joint_names())
    if names != list(robot.joints):  # the layer's q is base xyz, quaternion xyzw, then the joints in this order
        raise RuntimeError(f"PlaCo's joints {names[:3]}... are not in the description's order {robot.joints[:3]}...")
    wrapper.state.q = problem.q_stand.double().numpy().copy()
    wrapper.update_kinematics()
    solver = placo.KinematicsSolver(wrapper)
    solver.mask_fbase(False)
    solver.enable_joint_limits(True)
    corners = []
    for role, contact in robot.contacts.items():
        T = wrapper.get_T_world_frame(contact.link)
        task = solver.add_frame_task(contact.link, T)
        task.configure(role, "hard", 1.0, 1.0)
        sole = np.asarray(contact.corners, dtype=float)
        corners.append((T[:3, :3] @ sole.T).T[:, :2] + T[:2, 3])
    solver.add_com_polygon_constraint(clockwise_hull(np.concatenate(corners)), margin)
    reach = solver.add_position_task(robot.frames[hand], hands[0][:3, 3])
    reach.configure(hand, "soft", 1.0)
    posture = solver.add_joints_task()
    posture.set_joints(dict(robot.posture))
    posture.configure("posture", "soft", posture_cost)

    def loop():
        for T in hands:
            reach.target_world = T[:3, 3]
            solver.solve(True)
            wrapper.update_kinematics()

    return loop


def mink_loop(problem, robot, hand: str, hands: np.ndarray, posture_cost: float):
    """One ``mink.solve_ik`` step and integration per row of ``hands``."""
    mujoco = _module("mujoco", "pip install -e '.[placo]' (mink and MuJoCo)")
    mink = _module("mink", "pip install -e '.[placo]' (mink and MuJoCo)")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "g1.urdf"
        path.write_text(stripped_urdf(robot.urdf_text()))
        spec = mujoco.MjSpec.from_file(str(path))
    spec.compiler.fusestatic = False  # else the fixed hand bodies are merged away
    spec.worldbody.first_body().add_freejoint()
    model = spec.compile()
    q = problem.q_stand.double().numpy()
    qpos = np.concatenate([q[:3], q[[6, 3, 4, 5]], q[7:]])  # MuJoCo's quaternion is wxyz
    if model.nq != qpos.shape[0]:
        raise RuntimeError(f"MuJoCo's G1 has nq {model.nq}, the layer's {qpos.shape[0]}")
    configuration = mink.Configuration(model, qpos)
    reach = mink.FrameTask(robot.frames[hand], "body", position_cost=1.0, orientation_cost=0.0)
    feet = [
        mink.FrameTask(c.link, "body", position_cost=100.0, orientation_cost=100.0) for c in robot.contacts.values()
    ]
    posture = mink.PostureTask(model, cost=posture_cost)
    for task in feet:
        task.set_target_from_configuration(configuration)
    posture.set_target_from_configuration(configuration)
    tasks, limits = [reach, *feet, posture], [mink.ConfigurationLimit(model)]
    targets = [mink.SE3.from_matrix(T) for T in hands]

    def loop():
        for target in targets:
            reach.set_target(target)
            velocity = mink.solve_ik(configuration, tasks, 1.0, "daqp", damping=0.05**2, limits=limits)
            configuration.integrate_inplace(velocity, 1.0)

    return loop


def loops(problem, robot, hand: str, targets: torch.Tensor, margin: float, posture_cost: float):
    """The peers' loops over ``targets`` ``(n, 4, 4)`` by method name, and a note for each one that is missing."""
    hands = targets.double().numpy()
    builders = {
        "pink.loop": lambda: pink_loop(problem, robot, hand, hands),
        "placo.loop": lambda: placo_loop(problem, robot, hand, hands, margin, posture_cost),
        "mink.loop": lambda: mink_loop(problem, robot, hand, hands, posture_cost),
    }
    found, notes = {}, []
    for name, build in builders.items():
        try:
            found[name] = build()
        except peers.PeerUnavailableError as exc:
            notes.append(f"{name} skipped: {exc}")
    return found, notes
