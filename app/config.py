"""The viewer's settings, parsed from the command line into a frozen dataclass."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ViewerConfig:
    """Where the viewer serves its page.

    Attributes:
        host: interface to bind; loopback by default, ``0.0.0.0`` to reach it from other machines.
        port: TCP port of the page and its websocket.
    """

    host: str = "127.0.0.1"
    port: int = 8101

    @classmethod
    def from_argv(cls, argv: Sequence[str] | None = None) -> ViewerConfig:
        """Parse ``--host`` and ``--port`` (``sys.argv[1:]`` when ``argv`` is None)."""
        defaults = cls()
        parser = argparse.ArgumentParser(prog="python -m app", description="The Franka Panda in the browser.")
        parser.add_argument("--host", default=defaults.host, help="interface to bind (default: %(default)s)")
        parser.add_argument("--port", type=int, default=defaults.port, help="port (default: %(default)s)")
        args = parser.parse_args(argv)
        return cls(host=args.host, port=args.port)
