"""The viewer's settings, parsed from the command line into a frozen dataclass."""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import torch

from learning.common.arguments import positive_int
from learning.counterweight.experiment import checkpoint_path as counterweight_checkpoint_path
from learning.grasp_yaw.config import PRESETS
from learning.grasp_yaw.experiment import checkpoint_path

ROBOTS = ("panda", "g1")  # the Franka's grasp-yaw scene (the default) and the G1's counterweight scene
DEFAULT_PRESETS = {"panda": "smoke", "g1": "full"}  # the G1's smoke preset solves with 8 steps: too few to reach


@dataclass(frozen=True)
class ViewerConfig:
    """Where the viewer serves its page and what it starts from.

    Attributes:
        host: interface to bind; loopback by default, ``0.0.0.0`` to reach it from other machines.
        port: TCP port of the page and its websocket (viser takes the next free one if it is taken).
        checkpoint: a run's IK-trained checkpoint (``<run>/checkpoints/seed<N>/best.pt``); the run's other trained
            methods of that seed are loaded beside it. None trains from scratch.
        device: torch device of the trainer and the inference worker.
        preset: experiment preset (workspace, splits, training settings) when no checkpoint says otherwise.
        train: start the background trainer at launch (without a checkpoint).
        threads: torch threads of the viewer's process (``python -m app`` sets it; the trainer and the inference
            worker get one core each by default).
        robot: ``"panda"`` (the grasp-yaw scene) or ``"g1"`` (the counterweight scene, ``app.counterweight.scene``; its
            ``checkpoint`` is a counterweight run's ``checkpoints/seed<N>/gradient.pt``).
        light: for software WebGL (headless Chromium, a machine without a GPU), where a frame of the full scene takes
            seconds: plain lighting in both scenes (no shadows, no environment reflections), and the G1 scene draws
            its solid robot as a stick figure too, not with its meshes (about 290k faces). The browser tests use it.
    """

    host: str = "127.0.0.1"
    port: int = 8101
    checkpoint: Path | None = None
    device: str = "cpu"
    preset: str = "smoke"
    train: bool = True
    threads: int = 1
    robot: str = "panda"
    light: bool = False

    @classmethod
    def from_argv(cls, argv: Sequence[str] | None = None) -> ViewerConfig:
        """Parse the command line (``sys.argv[1:]`` when ``argv`` is None). A bad value prints one line naming it
        and exits with status 2."""
        defaults = cls()
        parser = _OneLineErrors(
            prog="python -m app",
            description="Grasp-yaw viewer (the Panda) or the counterweight viewer (the G1): the methods' answers, live training.",
        )
        parser.add_argument(
            "--robot", choices=ROBOTS, default=defaults.robot, help="which scene (default: %(default)s)"
        )
        parser.add_argument(
            "--host", type=_host, default=defaults.host, help="interface to bind (default: %(default)s)"
        )
        parser.add_argument("--port", type=_port, default=defaults.port, help="port, 1-65535 (default: %(default)s)")
        source = parser.add_mutually_exclusive_group()
        source.add_argument(
            "--checkpoint", type=Path, default=None, help="a run's checkpoint, e.g. RUN/checkpoints/seed0/best.pt"
        )
        source.add_argument("--run", type=Path, default=None, help="a run folder: every trained method of --seed")
        parser.add_argument("--seed", type=int, default=0, help="with --run: which seed's predictors (default 0)")
        parser.add_argument(
            "--device", type=_device, default=defaults.device, help="torch device (default: %(default)s)"
        )
        parser.add_argument(
            "--preset",
            choices=sorted(PRESETS),
            default=None,
            help="experiment preset (default: smoke for the panda, full for the g1)",
        )
        parser.add_argument("--paused", action="store_true", help="do not start the trainer at launch")
        parser.add_argument(
            "--light",
            action="store_true",
            help="for software WebGL (no GPU, headless Chromium): plain lighting, no shadows or reflections; the g1 "
            "also drawn as a stick figure, not its meshes",
        )
        parser.add_argument(
            "--threads",
            type=positive_int,
            default=defaults.threads,
            help="torch threads of this process (default: %(default)s: the trainer and the page's answers get a "
            "core each)",
        )
        args = parser.parse_args(argv)
        if args.run is not None and args.robot == "g1":
            args.checkpoint = counterweight_checkpoint_path(args.run, args.seed, "gradient")
        elif args.run is not None:
            args.checkpoint = checkpoint_path(args.run, args.seed, "ik_trained")
        return cls(
            host=args.host,
            port=args.port,
            checkpoint=args.checkpoint,
            device=args.device,
            preset=args.preset or DEFAULT_PRESETS[args.robot],
            train=not args.paused,
            threads=args.threads,
            robot=args.robot,
            light=args.light,
        )


class _OneLineErrors(argparse.ArgumentParser):
    """Bad values get one line (``python -m app: error: --port: ...``), not the usage block."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        sys.exit(2)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (1-65535)")
    return port


def _host(text: str) -> str:
    try:
        socket.getaddrinfo(text, None)
    except OSError as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an address or a name this machine resolves ({exc})"
        ) from None
    return text


def _device(text: str) -> str:
    try:
        device = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a torch device (cpu, cuda, cuda:1, ...)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text!r}: this torch build or machine has no CUDA device")
    if device.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"{text!r}: the viewer runs on cpu or cuda")
    return text
