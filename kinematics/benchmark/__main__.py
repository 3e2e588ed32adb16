"""Entry point: ``python -m kinematics.benchmark``."""

import sys

from kinematics.benchmark.cli import main

if __name__ == "__main__":
    sys.exit(main())
