"""Every function the native library exports: its argument types in order and its return type, as ``csrc/kernels.h``
declares them. ``kinematics.native`` sets each function's ctypes ``argtypes`` and ``restype`` from this table when it
loads the library (a call with the wrong number of arguments then raises instead of reading past them);
``tests/kinematics/native/test_native.py`` parses ``kernels.h`` and fails on any difference from it.

The kernels exist once per floating-point type, ``<name>_float`` and ``<name>_double``: ``real`` below is ``float``
or ``double``. Arrays pass as pointers (``data_ptr()``); the index arrays are int64 (``const long long *``, or
``const long *`` where the C code says so: the same on LP64 platforms).
"""

from __future__ import annotations

import ctypes

LONG, REAL = "long", "real"
IN, OUT = "const real *", "real *"  # an array read, an array written
INDEX, LONG_INDEX = "const long long *", "const long *"  # int64 arrays
BYTES = "unsigned char *"  # a bool array written
DOUBLES_IN = "const double *"  # a float64 array read, whatever real is
DOUBLES_OUT = "double *"  # a float64 array written, whatever real is
INT8_IN = "const signed char *"  # an int8 array read
INT8 = "signed char *"  # an int8 array written
POINTERS = "const void * const *"  # an array of addresses
OUT_POINTERS = "void * const *"  # an array of addresses written through
VOID = "void"

_ARGS_THEN = (LONG,) * 5 + (IN,)  # ik_*: (dof, n, threads, iterations, clamp, params)
# wholebody_*'s arguments after (n, threads[, steps]): plan, settings, arrays, targets, strides, q
_WB_READS = (INDEX, DOUBLES_IN, POINTERS, POINTERS, INDEX, IN)

# name: (return type, argument types), in csrc/kernels.h's order
KERNELS: dict[str, tuple[str, tuple[str, ...]]] = {
    # chain.c
    "fk_jacobian": (VOID, (LONG, LONG, IN, IN, IN, IN, IN, IN, OUT, OUT, OUT)),
    "gram": (VOID, (LONG, LONG, IN, IN, OUT, OUT)),
    "jt_x": (VOID, (LONG, LONG, IN, IN, OUT)),
    "pose_error": (VOID, (LONG, IN, IN, IN, IN, OUT, REAL, REAL)),
    "pose_error_vjp": (VOID, (LONG, IN, IN, IN, OUT, OUT, REAL, REAL)),
    "chain_vjp": (VOID, (LONG, LONG, IN, IN, IN, IN, IN, OUT, OUT)),
    # fused_ik.c: 0 (ik_solve_evaluate: its count of rows with invalid inputs), or -1 without scratch
    "ik_solve": (LONG, (*_ARGS_THEN, IN, IN, IN, IN, IN, IN, IN, IN, IN, OUT)),
    "ik_solve_evaluate": (LONG, (*_ARGS_THEN, IN, IN, IN, IN, IN, IN, IN, IN, OUT, OUT, OUT, BYTES, OUT)),
    "ik_solve_vjp": (LONG, (*_ARGS_THEN, IN, IN, IN, IN, IN, IN, IN, IN, IN, IN, OUT, OUT)),
    # tree.c
    "tree_nodes": (VOID, (LONG, LONG, LONG, LONG, IN, IN, IN, IN, IN, INDEX, INDEX, OUT)),
    "tree_frames": (VOID, (LONG, LONG, LONG, LONG, LONG, LONG, IN, IN, INDEX, OUT)),
    "tree_frame_jacobian": (VOID, (LONG, LONG, LONG, LONG, LONG, LONG, LONG, IN, IN, INDEX, INDEX, IN, IN, OUT, OUT)),
    "tree_com": (VOID, (*(LONG,) * 8, IN, IN, IN, IN, IN, IN, INDEX, INDEX, OUT, OUT, OUT)),
    # hull.c
    "support_edges": (VOID, (LONG, LONG, LONG, LONG, IN, IN, LONG_INDEX, LONG_INDEX, LONG_INDEX, OUT, OUT, BYTES)),
    "support_edges_vjp": (LONG, (LONG, LONG, LONG, LONG, IN, IN, LONG_INDEX, LONG_INDEX, LONG_INDEX, IN, IN, OUT)),
    # qp_ipm.c: (nb, threads, n, m_eq, m_in, iterations, P's row stride, params, P, q, A, b, G, h, lb, ub) -> 8 arrays
    "qp_ipm": (VOID, (*(LONG,) * 7, *(IN,) * 9, *(OUT,) * 8)),
    # qp_active_set.c: the polish (..., steps, refinements, P's row stride, params, the problem's 8 arrays and the
    # interior point's 6) -> 4 arrays; the adjoint (..., refinements, P's row stride, params, P, A, G, flags, exact,
    # g) -> 4 arrays, returning 0, or -1 without scratch
    "qp_polish": (VOID, (*(LONG,) * 8, *(IN,) * 15, *(OUT,) * 4)),
    # the polish for a Hessian diag(p) + U U^T: (..., steps, refinements, U's columns r, params, p, U, the problem's
    # other 7 arrays and the interior point's 6) -> the same 4 arrays
    "qp_polish_structured": (VOID, (*(LONG,) * 8, *(IN,) * 16, *(OUT,) * 4)),
    "qp_adjoint": (LONG, (*(LONG,) * 7, *(IN,) * 7, *(OUT,) * 4)),
    # the adjoint for a Hessian diag(p) + U U^T: (..., refinements, U's columns r, params, p, U, A, G, flags, exact, g)
    "qp_adjoint_structured": (LONG, (*(LONG,) * 7, *(IN,) * 8, *(OUT,) * 4)),
    # wholebody_step.c: (n, threads, steps, plan, settings, arrays, targets, strides, q) -> q_next, dq, the levels'
    # statuses, the active inequalities and bounds, the residuals and violations (NULL: none), what the backward
    # reads (NULL: nothing); the backward (n, threads, plan, settings, arrays, targets, strides, q, dq, saved,
    # statuses, the gradients on q_next and dq) -> each wanted target's gradient (an address per target, NULL: not
    # wanted), its sizes, the gradient w.r.t. q (NULL: not wanted)
    "wholebody_step": (LONG, (LONG, LONG, LONG, *_WB_READS, OUT, OUT, INT8, BYTES, INT8, OUT, OUT, DOUBLES_OUT)),
    "wholebody_step_backward": (
        LONG,
        (LONG, LONG, *_WB_READS, IN, DOUBLES_IN, INT8_IN, IN, IN, OUT_POINTERS, INDEX, OUT),
    ),
}
# not per type: identity.c
PLAIN: dict[str, tuple[str, tuple[str, ...]]] = {"kinematics_native_source_hash": ("const char *", ())}
REALS = {"float": ctypes.c_float, "double": ctypes.c_double}
_SCALARS = {"long": ctypes.c_long, "void": None, "const char *": ctypes.c_char_p}


def c_declarations() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Every exported function by its C name (``fk_jacobian_float``, ...), with ``real`` spelled out."""
    out = dict(PLAIN)
    for real in REALS:
        for name, (restype, argtypes) in KERNELS.items():
            out[f"{name}_{real}"] = (restype.replace(REAL, real), tuple(t.replace(REAL, real) for t in argtypes))
    return out


def _ctype(c_type: str, real: str | None) -> type | None:
    if c_type in _SCALARS:
        return _SCALARS[c_type]
    if c_type == real:
        return REALS[real]
    if c_type.endswith("*"):
        return ctypes.c_void_p  # an address: data_ptr(), or None for NULL
    raise ValueError(f"no ctypes type for {c_type!r}")


def ctypes_declarations() -> dict[str, tuple[type | None, list[type]]]:
    """Every exported function by its C name: (``restype``, ``argtypes``) for ctypes."""
    out = {}
    for name, (restype, argtypes) in c_declarations().items():
        real = next((r for r in REALS if name.endswith(f"_{r}")), None)
        out[name] = (_ctype(restype, real), [_ctype(t, real) for t in argtypes])
    return out
