"""Entry point: ``python -m learning.benchmark``.

torch (and its OpenMP runtime) is already loaded once this module runs, so the OpenMP wait policy is whatever
the environment held at start; the report records it.
"""

import sys

from learning.benchmark.cli import main

if __name__ == "__main__":
    sys.exit(main())
