"""Compiled CPU kernels for the chain pass (FK + Jacobian, batch-last), the DLS step's products, the pose error and
the closed-form backward passes, the fused DLS solve, the kinematic tree, the support polygon's hull, solve_qp and the whole-body layer's cascade steps:
the C library built from ``csrc/`` (one unit per domain; ``csrc/kernels.h`` declares what it exports and
``signatures.py`` the same to ctypes).

The torch pass in ``kinematics.model.chain`` is about 90 small torch calls per evaluation; at batch 1024 most of its
time is dispatch. This kernel does the same arithmetic in one call: one loop over the joints and, inside, a loop
over the batch that the compiler vectorises (an x86-64-v3 clone, AVX2 and FMA, is dispatched at load time where the
CPU has it; the QP units let the compiler fuse a product and a sum, the others keep ISO rounding).
It computes the same quantities from the same buffers; the tests compare the two paths and Pinocchio.

The package: ``loader`` finds or builds the library (the installed one, a first-use build, or none: the torch
ops) and decides, per call, whether a kernel may serve its tensors (``loader.compiled``); ``chain``, ``fused_ik``,
``tree``, ``hull``, ``qp`` and ``wholebody`` bind each domain's kernels (one C unit each under ``csrc/``); ``kernel`` holds
``Kernel``, the one dispatch point where the library's computations choose between these and their torch references;
``build`` compiles ``csrc/`` (at install, from ``setup.py``, and at first use).

Each binding is a CPU implementation of a ``Kernel`` and returns ``None`` (the kernel then runs its torch reference)
unless ``loader.compiled`` accepts every tensor: plain CPU strided tensors of one float32/float64 dtype with exactly
the shapes the C code reads, no autograd graph recorded through them, no forward-mode AD level, ``torch.func``
transform or dispatch mode active.
"""

from kinematics.native import loader
from kinematics.native.chain import chain_vjp, fk_jacobian, gram, jt_x, pose_error, pose_error_vjp
from kinematics.native.fused_ik import ik_solve, ik_solve_evaluate, ik_solve_vjp
from kinematics.native.hull import support_edges, support_edges_vjp
from kinematics.native.loader import ENVIRONMENT, INSTALLED, disabled, library, library_file, library_path
from kinematics.native.qp import qp_adjoint, qp_ipm, qp_polish
from kinematics.native.tree import tree_com, tree_frame_jacobian, tree_frames, tree_nodes
from kinematics.native.wholebody import (
    BoundStep,
    StepPlan,
    TargetBinding,
    bind_targets,
    saved_size,
    step_outputs,
    wholebody_step,
    wholebody_step_backward,
)

__all__ = [
    "ENVIRONMENT",
    "BoundStep",
    "INSTALLED",
    "StepPlan",
    "TargetBinding",
    "bind_targets",
    "chain_vjp",
    "disabled",
    "fk_jacobian",
    "gram",
    "ik_solve",
    "ik_solve_evaluate",
    "ik_solve_vjp",
    "jt_x",
    "library",
    "library_file",
    "library_path",
    "loader",
    "pose_error",
    "pose_error_vjp",
    "qp_adjoint",
    "qp_ipm",
    "qp_polish",
    "saved_size",
    "step_outputs",
    "support_edges",
    "support_edges_vjp",
    "tree_com",
    "tree_frame_jacobian",
    "tree_frames",
    "tree_nodes",
    "wholebody_step",
    "wholebody_step_backward",
]
