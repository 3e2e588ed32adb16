"""The batched, differentiable dense QP: the problem and its statuses, the solve, its kernels, its gradient."""
