"""Speed benchmark of the kinematics package against pytorch_kinematics and Pinocchio.

Run ``python -m learning.benchmark --suite fk|ik|all [--quick] [--out DIR]``. The peers are the optional
``bench`` extra and are imported only when a suite needs them. This package never imports ``learning`` or
``app``.
"""

from learning.benchmark.cli import main

__all__ = ["main"]
