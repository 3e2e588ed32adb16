"""The drawn arm's TCP pose by this project's FK: a frame in the scene and a read-only "TCP pose" panel."""

from __future__ import annotations

import numpy as np
import torch
import viser
import viser.transforms as vtf

from kinematics import KinematicsLayer


def format_pose(T_root_tcp: np.ndarray) -> dict[str, str]:
    """Position (m), quaternion wxyz (w >= 0) and roll/pitch/yaw (deg) of a ``(4, 4)`` pose, as text."""
    so3 = vtf.SO3.from_matrix(T_root_tcp[:3, :3])
    wxyz = so3.wxyz if so3.wxyz[0] >= 0 else -so3.wxyz
    rpy = np.degrees([so3.compute_roll_radians(), so3.compute_pitch_radians(), so3.compute_yaw_radians()])
    return {
        "position (m)": _join(T_root_tcp[:3, 3], 4),
        "wxyz": _join(wxyz, 4),
        "rpy (deg)": _join(rpy, 1),
    }


def _join(values: np.ndarray, decimals: int) -> str:
    # Adding 0.0 turns the -0.0 that rounding leaves into 0.0, so the panel never shows "-0.0000".
    return ", ".join(f"{v:.{decimals}f}" for v in np.round(values, decimals) + 0.0)


class TcpReadout:
    """Shows ``T_root_tcp = FK(q)`` for the arm joints it is given.

    Args:
        server: the viser server to draw in.
        kinematics: the arm's FK (``(7,)`` joints in radians to a ``(4, 4)`` root-frame pose).
    """

    def __init__(self, server: viser.ViserServer, kinematics: KinematicsLayer) -> None:
        self._kinematics = kinematics
        self._frame = server.scene.add_frame("/tcp", axes_length=0.08, axes_radius=0.004)
        with server.gui.add_folder("TCP pose"):
            self._fields = {
                label: server.gui.add_text(label, initial_value="", disabled=True)
                for label in format_pose(np.eye(4))
            }

    def update(self, q: np.ndarray) -> None:
        """Recompute FK at ``q`` ``(7,)`` and show it."""
        with torch.no_grad():
            q_t = torch.as_tensor(q, dtype=self._kinematics.dtype, device=self._kinematics.device)
            T_root_tcp = self._kinematics(q_t).cpu().numpy()
        self._frame.position = T_root_tcp[:3, 3]
        self._frame.wxyz = vtf.SO3.from_matrix(T_root_tcp[:3, :3]).wxyz
        for label, text in format_pose(T_root_tcp).items():
            self._fields[label].value = text
