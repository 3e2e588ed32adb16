"""Entry point: ``python -m kinematics.benchmark``."""

import os
import sys

# Passive OpenMP waiting (set before torch loads): spinning intra-op threads on a shared 2-core machine run
# 10-40x slower as soon as anything else computes; every method of the run shares the setting.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from kinematics.benchmark.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
