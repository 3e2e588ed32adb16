"""Command line of both experiments (``--task grasp-yaw``, the default, or ``--task counterweight``).

python -m learning train --preset smoke|full [--run DIR]   # splits, teacher labels, training, evaluation
    [--resume] [--executor local|ray] [--workers N] [--address RAY_ADDRESS]  # the job grid (docs/cluster.md)
python -m learning evaluate --run DIR                       # re-evaluate a trained run
python -m learning report --run DIR                         # print the split table of a run's report
python -m learning analyse --run DIR [--out FILE]           # where the predictors lose to the teacher, per goal
python -m learning check-distribution [--out FILE]          # radial, heading, a 72-yaw grid on 256 goals
python -m learning throughput-profile [--batch N] [--rounds N] [--out FILE]  # what bounds the predictor's speed

--task counterweight (train, check-distribution) runs the whole-body counterweight experiment instead of the
grasp-yaw one (its reach-only / no-balance fractions before any training); evaluate and report read the task
from the run folder.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from assets import MissingAssetError
from kinematics.errors import ProjectError
from learning.common.arguments import positive_int
from learning.common.executors import EXECUTORS
from learning.counterweight import cli as counterweight
from learning.counterweight.config import PRESETS as COUNTERWEIGHT_PRESETS
from learning.grasp_yaw import cli as grasp_yaw
from learning.grasp_yaw.config import PRESETS as GRASP_YAW_PRESETS

TASKS = ("grasp-yaw", "counterweight")
PRESETS = sorted(set(GRASP_YAW_PRESETS) | set(COUNTERWEIGHT_PRESETS))  # each task refuses a preset it lacks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m learning", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="make splits, train every seed, evaluate, write the report")
    train.add_argument("--preset", choices=PRESETS, default="smoke")
    train.add_argument("--run", type=Path, default=None, help="run folder (default runs/<preset>-<time>)")
    train.add_argument("--device", default=None, help="torch device (default: the preset's, cpu)")
    train.add_argument("--task", choices=TASKS, default="grasp-yaw")
    train.add_argument("--resume", action="store_true", help="continue the run in --run: only unfinished jobs run")
    grid = train.add_argument_group("the grid of training jobs (docs/cluster.md)")
    grid.add_argument("--executor", choices=EXECUTORS, default="local", help="local (a process pool) or ray")
    grid.add_argument("--workers", type=int, default=None, help="processes (local) or CPUs of an embedded Ray")
    grid.add_argument("--address", default=None, help="a Ray cluster to join (default: $RAY_ADDRESS, else embedded)")
    grid.add_argument("--retries", type=int, default=3, help="ray: retries of a job whose worker died (default 3)")
    grid.add_argument("--gpus-per-job", type=float, default=1.0, help="ray: GPUs a job on a CUDA device asks for")
    for name, text in (("evaluate", "evaluate a trained run"), ("report", "print a run's split table")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--run", type=Path, required=True)
    analyse = commands.add_parser("analyse", help="per-goal gaps to the teacher and learning curves per split")
    analyse.add_argument("--run", type=Path, required=True)
    analyse.add_argument("--out", type=Path, default=None, help="write FILE.json and FILE.md (default: in the run)")
    check = commands.add_parser("check-distribution", help="the radial rule, heading and a 72-yaw grid on 256 goals")
    check.add_argument("--preset", choices=PRESETS, default="full")
    check.add_argument("--task", choices=TASKS, default="grasp-yaw")
    check.add_argument(
        "--out", type=Path, default=None, help="also write FILE.json (with provenance) and FILE.md (the table)"
    )
    profile = commands.add_parser("throughput-profile", help="what bounds the grasp predictor's throughput")
    profile.add_argument("--preset", choices=PRESETS, default="full")
    profile.add_argument("--batch", type=positive_int, default=256, help="goals per call (default: %(default)s)")
    profile.add_argument(
        "--rounds", type=positive_int, default=15, help="rounds that time every row in turn (default: %(default)s)"
    )
    profile.add_argument("--out", type=Path, default=None, help="also write FILE.json (with provenance) and FILE.md")
    args = parser.parse_args(argv)
    if args.command == "train" and args.resume and args.run is None:
        parser.error("--resume needs the --run folder to continue")
    command = shlex.join(["python", "-m", "learning", *(sys.argv[1:] if argv is None else argv)])
    try:
        if getattr(args, "task", None) == "counterweight" or (
            args.command in ("evaluate", "report") and counterweight.is_run(args.run)
        ):
            return counterweight.main(args, command)
        return grasp_yaw.main(args, command)
    except (ProjectError, MissingAssetError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
