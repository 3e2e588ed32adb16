"""The batched, differentiable dense QP: the problem and its statuses, the solve, its kernels, its gradient."""

from kinematics.qp.problem import INFEASIBLE, NOT_CONVERGED, SOLVED, QPSolution
from kinematics.qp.solve import solve_qp

__all__ = [
    "INFEASIBLE",
    "NOT_CONVERGED",
    "SOLVED",
    "QPSolution",
    "solve_qp",
]
