"""``python -m app [--robot panda|g1] [--host HOST] [--port PORT] [--run RUN] [--seed N] [--checkpoint PATH]
[--device DEV] [--preset NAME] [--paused] [--light] [--threads N]``: serve the viewer (``--help`` says what each does).

Bad command-line values and a port that cannot be bound end with one line on stderr and exit status 2. The
process's torch thread count is set here (``--threads``, 1 by default: the trainer and the page's answers run on
threads of their own, a core each on a 2-core machine), and the interpreter's thread switch interval
(``SWITCH_INTERVAL_S``).
"""

from __future__ import annotations

import errno
import socket
import sys

import torch

from app.config import ViewerConfig
from app.counterweight.scene import launch_g1
from app.grasp_yaw.scene import launch
from app.shell.server import exposure_notice
from assets import MissingAssetError
from kinematics.errors import ProjectError

# How long a thread holds the GIL while another waits for it (Python's default: 5 ms). The trainer's step is Python
# between thousands of small torch ops; each op the page's answer thread runs gives the GIL up and waits this long to
# take it back. The G1 scene's answers at this setting, the trainer running: `python -m app.counterweight.latency`
# (docs/results/viewer/g1_latency.md).
SWITCH_INTERVAL_S = 1e-3


def bind_error(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be served (None if it can; a port in use is fine: viser takes the next free one)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"cannot resolve {host!r}: {exc}"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return None
            return f"cannot serve on {host}:{port}: {exc.strerror or exc}"
    return None


def main() -> int:
    config = ViewerConfig.from_argv()
    problem = bind_error(config.host, config.port)
    if problem is not None:
        print(f"python -m app: error: {problem}", file=sys.stderr)
        return 2
    torch.set_num_threads(config.threads)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        viewer = launch_g1(config) if config.robot == "g1" else launch(config)
    except (ProjectError, MissingAssetError, RuntimeError) as exc:
        print(f"python -m app: error: {exc}", file=sys.stderr)
        return 2
    exposure = exposure_notice(config.host)
    if exposure is not None:
        print(f"warning: {exposure}", file=sys.stderr, flush=True)
    print(f"Viewer running at {viewer.url} (Ctrl-C to stop)", flush=True)
    try:
        viewer.server.sleep_forever()
    except KeyboardInterrupt:
        viewer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
