"""A minimal viser app: drag the gizmo and the Panda follows through the differentiable IK layer, each solve warm
started from the arm's current joints. Run: ``python docs/examples/02_viser_drag_target.py [PORT]`` and open
http://127.0.0.1:8080 (``--seconds S`` serves for S seconds, then exits)."""

import argparse
import threading
import time

import numpy as np
import torch
import viser
import yourdfpy
from viser.extras import ViserUrdf

import assets
from kinematics import DifferentiableIKCfg, DifferentiableIKLayer, KinematicsLayer, SerialChainKinematics

chain = SerialChainKinematics.from_urdf(assets.PANDA.urdf_text(), end_link_name="panda_hand_tcp")
kinematics = KinematicsLayer(chain)
ik = DifferentiableIKLayer(kinematics, DifferentiableIKCfg(iterations=32))
q_current = torch.tensor(assets.PANDA.reference_posture)
lock = threading.Lock()  # viser runs callbacks on its own threads


def follow(T_root_target: torch.Tensor) -> torch.Tensor:
    """Solve for ``T_root_target`` ``(4, 4)`` from the current joints, keep the answer if it is within the limits."""
    global q_current
    with lock, torch.no_grad():
        result = ik.solve(T_root_target, q_current)
        if bool(result.within_limits):
            q_current = result.q
        return q_current


def pose_matrix(position: np.ndarray, wxyz: np.ndarray) -> torch.Tensor:
    """A gizmo's position and quaternion as a ``(4, 4)`` transform."""
    T = torch.eye(4)
    T[:3, :3] = torch.tensor(viser.transforms.SO3(np.asarray(wxyz)).as_matrix(), dtype=torch.float32)
    T[:3, 3] = torch.tensor(np.asarray(position), dtype=torch.float32)
    return T


def main(port: int, seconds: float | None) -> None:
    server = viser.ViserServer(port=port)
    urdf = yourdfpy.URDF.load(
        str(assets.PANDA.urdf_path()), filename_handler=lambda fname: assets.resolve_package_uri(fname)
    )
    robot = ViserUrdf(server, urdf, root_node_name="/panda")

    def show(q: torch.Tensor) -> None:  # the arm's joints, and the fingers held open
        joints = dict(zip(assets.PANDA.joints, q.tolist(), strict=True)) | dict(assets.PANDA.held_joints)
        robot.update_cfg(np.array([joints[name] for name in robot.get_actuated_joint_names()]))

    show(q_current)

    T_root_tcp = kinematics(q_current)
    start_wxyz = viser.transforms.SO3.from_matrix(T_root_tcp[:3, :3].numpy()).wxyz
    gizmo = server.scene.add_transform_controls(
        "/target", scale=0.2, position=T_root_tcp[:3, 3].numpy(), wxyz=start_wxyz
    )
    status = server.gui.add_markdown("Drag the gizmo.")

    @gizmo.on_update
    def _(_event) -> None:
        q = follow(pose_matrix(gizmo.position, gizmo.wxyz))
        show(q)
        error = (kinematics(q)[:3, 3] - torch.tensor(gizmo.position)).norm()
        status.content = f"TCP {1000 * float(error):.1f} mm from the target"

    print(f"serving on http://127.0.0.1:{server.get_port()}", flush=True)
    deadline = None if seconds is None else time.monotonic() + seconds
    while deadline is None or time.monotonic() < deadline:
        time.sleep(0.1)
    server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("port", type=int, nargs="?", default=8080)
    parser.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args()
    main(args.port, args.seconds)
