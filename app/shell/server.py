"""The page's server, the same for both scenes: viser on the configured host and port with the stage and its camera,
the status line at the top of the panel, the supervisor that shows background failures there, the count of connected
browsers, and a warning when the page is reachable from other machines."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

import viser

from app.shell.stage import Camera, set_stage
from app.shell.status import ClientCount, StatusLine
from app.shell.supervision import Supervisor


@dataclass
class Page:
    server: viser.ViserServer
    status: StatusLine
    supervisor: Supervisor
    clients: ClientCount

    @property
    def url(self) -> str:
        return f"http://{self.server.get_host()}:{self.server.get_port()}"


def serve_page(host: str, port: int, camera: Camera, light: bool = False) -> Page:
    """Start serving (viser takes the next free port if ``port`` is taken) and build the page's shell; ``light``:
    plain lighting (``app.shell.stage.set_stage``)."""
    server = viser.ViserServer(host=host, port=port)
    server.gui.configure_theme(control_width="large", show_share_button=False)
    set_stage(server, camera, light)
    status = StatusLine(server)
    page = Page(server, status, Supervisor(status.set), ClientCount(server, status))
    exposure = exposure_notice(host)
    if exposure is not None:
        status.set("exposure", f"⚠ {exposure}")
    return page


def exposure_notice(host: str) -> str | None:
    """A warning when ``host`` is reachable from other machines (anything but loopback), else None."""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        addresses = {host}
    try:
        if addresses and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
            return None
    except ValueError:
        pass
    return (
        f"served on {host}, not only on this machine: anyone who can reach this port can start, pause and "
        "reset the trainer, move the target and run evaluations."
    )
