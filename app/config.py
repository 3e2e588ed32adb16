"""The viewer's settings, parsed from the command line into a frozen dataclass."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from learning.config import PRESETS


@dataclass(frozen=True)
class ViewerConfig:
    """Where the viewer serves its page and what it starts from.

    Attributes:
        host: interface to bind; loopback by default, ``0.0.0.0`` to reach it from other machines.
        port: TCP port of the page and its websocket (viser takes the next free one if it is taken).
        checkpoint: a run's first-seed checkpoint (``<run>/checkpoints/seed0/best.pt``); None trains from scratch.
        device: torch device of the trainer and the inference worker.
        preset: experiment preset (workspace, splits, training settings) when no checkpoint says otherwise.
        train: start the background trainer at launch (without a checkpoint).
    """

    host: str = "127.0.0.1"
    port: int = 8101
    checkpoint: Path | None = None
    device: str = "cpu"
    preset: str = "smoke"
    train: bool = True

    @classmethod
    def from_argv(cls, argv: Sequence[str] | None = None) -> ViewerConfig:
        """Parse the command line (``sys.argv[1:]`` when ``argv`` is None)."""
        defaults = cls()
        parser = argparse.ArgumentParser(
            prog="python -m app", description="Grasp-yaw viewer: the Panda, the methods' choices, live training."
        )
        parser.add_argument("--host", default=defaults.host, help="interface to bind (default: %(default)s)")
        parser.add_argument("--port", type=int, default=defaults.port, help="port (default: %(default)s)")
        parser.add_argument(
            "--checkpoint", type=Path, default=None, help="a run's checkpoint, e.g. RUN/checkpoints/seed0/best.pt"
        )
        parser.add_argument("--device", default=defaults.device, help="torch device (default: %(default)s)")
        parser.add_argument(
            "--preset",
            choices=sorted(PRESETS),
            default=defaults.preset,
            help="experiment preset (default: %(default)s)",
        )
        parser.add_argument("--paused", action="store_true", help="do not start the trainer at launch")
        args = parser.parse_args(argv)
        return cls(
            host=args.host,
            port=args.port,
            checkpoint=args.checkpoint,
            device=args.device,
            preset=args.preset,
            train=not args.paused,
        )
