"""Assembles the viewer: a viser server, the TCP readout and the posable Panda."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import viser

from app.config import ViewerConfig
from app.robot_view import RobotView
from app.tcp_readout import TcpReadout
from learning.robot import franka_kinematics


@dataclass(frozen=True)
class Viewer:
    """The running viewer's parts."""

    server: viser.ViserServer
    robot: RobotView
    readout: TcpReadout

    @property
    def url(self) -> str:
        return f"http://{self.server.get_host()}:{self.server.get_port()}"


def launch(config: ViewerConfig) -> Viewer:
    """Serve the page with the Panda at the ready pose; returns at once (viser serves from its threads)."""
    server = viser.ViserServer(host=config.host, port=config.port)
    _set_stage(server)
    readout = TcpReadout(server, franka_kinematics(dtype=torch.float64))
    robot = RobotView(server, on_change=readout.update)
    return Viewer(server=server, robot=robot, readout=readout)


def _set_stage(server: viser.ViserServer) -> None:
    """Z up, a floor grid (10 cm cells) and a camera that frames the arm's reach."""
    server.scene.set_up_direction("+z")
    server.scene.add_grid("/ground", width=2.0, height=2.0, cell_size=0.1, section_size=0.5)
    server.initial_camera.position = (1.1, 0.9, 0.75)
    server.initial_camera.look_at = (0.25, 0.0, 0.35)
