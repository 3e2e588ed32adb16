"""Entry point: ``python -m learning.benchmark``.

The ``learning`` package set OpenMP's passive wait before torch was loaded (``learning.common.threads``) unless the
environment held another policy; the report records it.
"""

import sys

from learning.benchmark.cli import main

if __name__ == "__main__":
    sys.exit(main())
