"""Speed and accuracy benchmark of the kinematics library against its peers (pytorch_kinematics, Pinocchio, pink,
proxsuite and its QPLayer, qpsolvers), on the robots of ``assets``.

Run ``python -m learning.benchmark --suite fk|ik|constrained|tree|qp|wholebody|all [--quick] [--out DIR]``. The peers
are the optional ``bench`` extra and are imported only when a suite needs them. It imports neither experiment nor
the viewer; nothing in ``kinematics`` imports it.
"""

from learning.benchmark.cli import main

__all__ = ["main"]
