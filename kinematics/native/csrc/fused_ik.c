/* The fused DLS solve of kinematics.ik.layer (kinematics.ik.fused_solve): ik_solve, ik_solve_evaluate and the backward
   ik_solve_vjp, built on chain.c's kernels. ISO rounding (no contraction). */
#ifndef REAL
#define KINEMATICS_UNIT "fused_ik.c"
#include "per_type.h"
#else

/* ---- The fused DLS solve (kinematics.ik.layer, step "clamp"): every iteration of the solve for a tile of IK_TILE rows
   in one call, from chain.c's chain pass and pose error (run on the tile's rows), the damped 6x6 system
   J J^T + C by an in-lane Cholesky, the update q + step J^T x and the projection onto [lower, upper]. The batch is
   walked in tiles (each tile's rows copied into batch-last scratch of IK_TILE columns and computed there, in L1);
   the caller splits the rows across threads. A singular system gives non-finite values, as solve_ex with
   check_errors=False does (no error). */
#ifndef IK_TILE
#define IK_TILE 64
#endif

typedef struct {
    REAL *sine, *versine, *q, *rot, *pos, *jac, *err, *gram, *x, *u, *tr, *tp;
} KERNEL(ik_tile);

static long KERNEL(ik_tile_size)(long dof) { return (3 * dof + 9 + 3 + 6 * dof + 6 + 21 + 6 + dof + 9 + 3) * IK_TILE; }

static void KERNEL(ik_tile_init)(KERNEL(ik_tile) *t, REAL *base, long dof) {
    t->sine = base; t->versine = t->sine + dof * IK_TILE; t->q = t->versine + dof * IK_TILE;
    t->rot = t->q + dof * IK_TILE; t->pos = t->rot + 9 * IK_TILE; t->jac = t->pos + 3 * IK_TILE;
    t->err = t->jac + 6 * dof * IK_TILE; t->gram = t->err + 6 * IK_TILE; t->x = t->gram + 21 * IK_TILE;
    t->u = t->x + 6 * IK_TILE; t->tr = t->u + dof * IK_TILE; t->tp = t->tr + 9 * IK_TILE;
}

/* rows [lo, lo + T) of the batch-last (K, n) array src -> the (K, T) tile dst, and back */
static QP_INLINE void KERNEL(ik_gather)(long K, long n, long lo, long T, const REAL *restrict src, REAL *restrict dst) {
    for (long k = 0; k < K; k++) {
        for (long b = 0; b < T; b++) dst[k * T + b] = src[k * n + lo + b];
    }
}

static QP_INLINE void KERNEL(ik_scatter)(long K, long n, long lo, long T, const REAL *restrict src, REAL *restrict dst) {
    for (long k = 0; k < K; k++) {
        for (long b = 0; b < T; b++) dst[k * n + lo + b] = src[k * T + b];
    }
}

static const int KERNEL(ik_slot)[6][6] = {{0, 1, 2, 3, 4, 5},     {1, 6, 7, 8, 9, 10},     {2, 7, 11, 12, 13, 14},
                                          {3, 8, 12, 15, 16, 17}, {4, 9, 13, 16, 18, 19}, {5, 10, 14, 17, 19, 20}};

/* The 21 packed entries (r <= c, row by row) of J J^T + C -> its Cholesky factor L in place (entry (c, r) of L
   at the slot of (r, c)), all lanes at once. */
/* rows [lo, lo + T) of the batch-first (n, K) array src -> the (K, T) tile dst, and back */
static QP_INLINE void KERNEL(ik_gather_rows)(long K, long lo, long T, const REAL *restrict src, REAL *restrict dst) {
    for (long b = 0; b < T; b++) {
        for (long k = 0; k < K; k++) dst[k * T + b] = src[(lo + b) * K + k];
    }
}

static QP_INLINE void KERNEL(ik_scatter_rows)(long K, long lo, long T, const REAL *restrict src, REAL *restrict dst) {
    for (long b = 0; b < T; b++) {
        for (long k = 0; k < K; k++) dst[(lo + b) * K + k] = src[k * T + b];
    }
}

/* the rotation (9, T) and position (3, T) tiles of rows [lo, lo + T) of the batch-first targets (n, 4, 4) */
static QP_INLINE void KERNEL(ik_load_targets)(long lo, long T, const REAL *restrict target, REAL *restrict tr,
                                              REAL *restrict tp) {
    for (long b = 0; b < T; b++) {
        const REAL *restrict m = target + 16 * (lo + b);
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 3; j++) tr[(3 * i + j) * T + b] = m[4 * i + j];
            tp[i * T + b] = m[4 * i + 3];
        }
    }
}

static QP_INLINE void KERNEL(ik_cholesky)(long T, REAL *restrict A) {
    for (int j = 0; j < 6; j++) {
        REAL *restrict d = A + KERNEL(ik_slot)[j][j] * T;
        for (int k = 0; k < j; k++) {
            const REAL *restrict l = A + KERNEL(ik_slot)[j][k] * T;
            IVDEP for (long b = 0; b < T; b++) d[b] -= l[b] * l[b];
        }
        IVDEP for (long b = 0; b < T; b++) d[b] = SQRT(d[b]);
        for (int i = j + 1; i < 6; i++) {
            REAL *restrict e = A + KERNEL(ik_slot)[i][j] * T;
            for (int k = 0; k < j; k++) {
                const REAL *restrict li = A + KERNEL(ik_slot)[i][k] * T, *restrict lj = A + KERNEL(ik_slot)[j][k] * T;
                IVDEP for (long b = 0; b < T; b++) e[b] -= li[b] * lj[b];
            }
            IVDEP for (long b = 0; b < T; b++) e[b] /= d[b];
        }
    }
}

/* x = (L L^T)^-1 rhs for the factor of ik_cholesky, all lanes at once. */
static QP_INLINE void KERNEL(ik_cholesky_solve)(long T, const REAL *restrict L, const REAL *restrict rhs, REAL *restrict x) {
    for (int i = 0; i < 6; i++) { /* L v = rhs */
        REAL *restrict xi = x + i * T;
        IVDEP for (long b = 0; b < T; b++) xi[b] = rhs[i * T + b];
        for (int k = 0; k < i; k++) {
            const REAL *restrict l = L + KERNEL(ik_slot)[i][k] * T, *restrict xk = x + k * T;
            IVDEP for (long b = 0; b < T; b++) xi[b] -= l[b] * xk[b];
        }
        const REAL *restrict d = L + KERNEL(ik_slot)[i][i] * T;
        IVDEP for (long b = 0; b < T; b++) xi[b] /= d[b];
    }
    for (int i = 5; i >= 0; i--) { /* L^T x = v */
        REAL *restrict xi = x + i * T;
        for (int k = i + 1; k < 6; k++) {
            const REAL *restrict l = L + KERNEL(ik_slot)[k][i] * T, *restrict xk = x + k * T;
            IVDEP for (long b = 0; b < T; b++) xi[b] -= l[b] * xk[b];
        }
        const REAL *restrict d = L + KERNEL(ik_slot)[i][i] * T;
        IVDEP for (long b = 0; b < T; b++) xi[b] /= d[b];
    }
}

/* sin(q) and 1 - cos(q) for count values, vectorised: the argument reduced by pi/2 in double (a two-part pi/2: exact
   to |q| < 1e5; rounding by adding and subtracting 1.5 * 2^52, which needs no floor, a call the compiler does not
   vectorise), then fdlibm's kernel polynomials on [-pi/4, pi/4] and the quadrant's signs, all without branches;
   within about an ulp of the C library's (which runs instead where some |q| is 1e5 or more, or not finite). */
static QP_INLINE void KERNEL(ik_sin_versine)(long count, const REAL *restrict q, REAL *restrict sine, REAL *restrict versine) {
    int big = 0;
    for (long k = 0; k < count; k++) big |= !(FABS(q[k]) < (REAL)1e5);
    if (big) {
        for (long k = 0; k < count; k++) {
            sine[k] = SIN(q[k]);
            versine[k] = 1 - COS(q[k]);
        }
        return;
    }
    const double round = 6755399441055744.0; /* 1.5 * 2^52: (v + round) - round is v rounded to an integer */
    IVDEP for (long k = 0; k < count; k++) {
        double x = (double)q[k], n = (x * 6.36619772367581382433e-01 + round) - round;
        double r = (x - n * 1.57079632673412561417e+00) - n * 6.07710050650619224932e-11, z = r * r;
        double sr = r + r * z * (-1.66666666666666324348e-01 + z * (8.33333333332248946124e-03
                    + z * (-1.98412698298579493134e-04 + z * (2.75573137070700676789e-06
                    + z * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)))));
        double cr = 1.0 - 0.5 * z + z * z * (4.16666666666666019037e-02 + z * (-1.38888888888741095749e-03
                    + z * (2.48015872894767294178e-05 + z * (-2.75573143513906633035e-07
                    + z * (2.08757232129817482790e-09 + z * -1.13596475577881948265e-11)))));
        double quadrant = n - 4.0 * ((0.25 * n + round) - round); /* -2 .. 2: the quadrant modulo 4 */
        double a = FABS_DOUBLE(quadrant);
        int odd = a == 1.0, half_turn = a == 2.0;
        double s = odd ? cr : sr, c = odd ? sr : cr;
        s = (half_turn | (quadrant == -1.0)) ? -s : s;
        c = (half_turn | (quadrant == 1.0)) ? -c : c;
        sine[k] = (REAL)s;
        versine[k] = (REAL)(1.0 - c);
    }
}

/* At the tile's q: the chain pass, the pose error, J J^T + C (left factored in t->gram), x = (J J^T + C)^-1 e and
   u = J^T x. */
/* The damped system at the tile's J and e: J J^T + C, plus (opt-in) the residual damping c |e|_w^2 W^-1 of each
   row (params[6] = c, params[8..13] = the error weights w), left factored in t->gram; x = (J J^T + ...)^-1 e and
   u = J^T x. */
static QP_INLINE void KERNEL(ik_system)(long dof, long T, KERNEL(ik_tile) *t, const REAL *restrict C,
                                        const REAL *restrict params) {
    long entry = 0;
    for (int r = 0; r < 6; r++) {
        for (int c = r; c < 6; c++, entry++) {
            REAL *restrict w = t->gram + entry * T, k = C[6 * r + c];
            IVDEP for (long b = 0; b < T; b++) w[b] = k;
            for (long i = 0; i < dof; i++) {
                const REAL *restrict x = t->jac + (6 * i + r) * T, *restrict y = t->jac + (6 * i + c) * T;
                IVDEP for (long b = 0; b < T; b++) w[b] += x[b] * y[b];
            }
        }
    }
    const REAL growth = params[6], *restrict weight = params + 8;
    if (growth > 0) {
        IVDEP for (long b = 0; b < T; b++) {
            REAL e2 = 0;
            for (int k = 0; k < 6; k++) e2 += weight[k] * t->err[k * T + b] * t->err[k * T + b];
            for (int k = 0; k < 6; k++) t->gram[KERNEL(ik_slot)[k][k] * T + b] += growth * e2 / weight[k];
        }
    }
    KERNEL(ik_cholesky)(T, t->gram);
    KERNEL(ik_cholesky_solve)(T, t->gram, t->err, t->x);
    for (long i = 0; i < dof; i++) {
        const REAL *restrict j = t->jac + 6 * i * T;
        REAL *restrict o = t->u + i * T;
        IVDEP for (long b = 0; b < T; b++) {
            REAL s = 0;
            for (int k = 0; k < 6; k++) s += j[k * T + b] * t->x[k * T + b];
            o[b] = s;
        }
    }
}

/* At the tile's q: the chain pass, the pose error and the damped system (ik_system). With params[7] (opt-in,
   the joint box held): a joint whose step q + step u would leave [lower, upper] is held for this step (its
   Jacobian column zeroed) and the system solved again over the others. */
static QP_INLINE void KERNEL(ik_linearise)(long dof, long T, KERNEL(ik_tile) *t, const REAL *restrict local,
                                           const REAL *restrict revolute, const REAL *restrict end,
                                           const REAL *restrict C, const REAL *restrict params,
                                           const REAL *restrict lower, const REAL *restrict upper) {
    KERNEL(ik_sin_versine)(dof * T, t->q, t->sine, t->versine);
    KERNEL(fk_jacobian)(dof, T, t->sine, t->versine, t->q, local, revolute, end, t->rot, t->pos, t->jac);
    KERNEL(pose_error)(T, t->tr, t->tp, t->rot, t->pos, t->err, params[1], params[2]);
    KERNEL(ik_system)(dof, T, t, C, params);
    if (params[7] != 0) {
        int blocked_any = 0;
        for (long i = 0; i < dof; i++) {
            const REAL l = lower[i], h = upper[i];
            for (long b = 0; b < T; b++) {
                REAL v = t->q[i * T + b] + params[0] * t->u[i * T + b];
                if (v < l || v > h) {
                    for (int k = 0; k < 6; k++) t->jac[(6 * i + k) * T + b] = 0;
                    blocked_any = 1;
                }
            }
        }
        if (blocked_any) KERNEL(ik_system)(dof, T, t, C, params);
    }
}

/* q <- q + step u, projected onto [lower, upper] when clamp (torch.clamp's order: NaN stays NaN). */
static QP_INLINE void KERNEL(ik_update)(long dof, long T, REAL *restrict q, const REAL *restrict u, REAL step,
                                        long clamp, const REAL *restrict lower, const REAL *restrict upper) {
    for (long i = 0; i < dof; i++) {
        const REAL l = lower[i], h = upper[i];
        IVDEP for (long b = 0; b < T; b++) {
            REAL v = q[i * T + b] + step * u[i * T + b];
            q[i * T + b] = clamp ? (v < l ? l : (v > h ? h : v)) : v;
        }
    }
}

/* q (dof, n) the projected seed, target rotation (3, 3, n) and position (3, n); local (dof, 4, 3, 4), revolute
   (dof), end (3, 4) as fk_jacobian reads them; C (6, 6) the damping; lower, upper (dof) the limits (clamp: 1 to
   project after each step); params as kinematics.ik.fused_solve writes them (step size, small_sin_sq, near_pi_cos,
   the two tolerances, the input tolerance, the residual damping, the joint-box flag, six error weights); rows
   [begin, end_row) of the n are
   solved (one thread's share). out (dof, n) the final iterate. Returns 0, or -1 without scratch. */
static QP_INLINE long KERNEL(ik_solve_rows)(long dof, long n, long begin, long end_row, long iterations, long clamp, const REAL *restrict params,
                               const REAL *restrict q0, const REAL *restrict target_rot,
                               const REAL *restrict target_pos, const REAL *restrict local,
                               const REAL *restrict revolute, const REAL *restrict end, const REAL *restrict C,
                               const REAL *restrict lower, const REAL *restrict upper, REAL *restrict out) {
    REAL *scratch = malloc(sizeof(REAL) * KERNEL(ik_tile_size)(dof));
    if (scratch == NULL) return -1;
    KERNEL(ik_tile) t;
    KERNEL(ik_tile_init)(&t, scratch, dof);
    const REAL step = params[0];
    for (long lo = begin; lo < end_row; lo += IK_TILE) {
        long T = end_row - lo < IK_TILE ? end_row - lo : IK_TILE;
        KERNEL(ik_gather)(dof, n, lo, T, q0, t.q);
        KERNEL(ik_gather)(9, n, lo, T, target_rot, t.tr);
        KERNEL(ik_gather)(3, n, lo, T, target_pos, t.tp);
        for (long it = 0; it < iterations; it++) {
            KERNEL(ik_linearise)(dof, T, &t, local, revolute, end, C, params, lower, upper);
            KERNEL(ik_update)(dof, T, t.q, t.u, step, clamp, lower, upper);
        }
        KERNEL(ik_scatter)(dof, n, lo, T, t.q, out);
    }
    free(scratch);
    return 0;
}

DISPATCH long KERNEL(ik_solve)(long dof, long n, long threads, long iterations, long clamp, const REAL *restrict params,
                               const REAL *restrict q0, const REAL *restrict target_rot,
                               const REAL *restrict target_pos, const REAL *restrict local,
                               const REAL *restrict revolute, const REAL *restrict end, const REAL *restrict C,
                               const REAL *restrict lower, const REAL *restrict upper, REAL *restrict out) {
    long result; /* rows in shares of at least IK_TILE */
    COUNTED_ROWS_IN_PARALLEL(result, n, threads, IK_TILE, KERNEL(ik_solve_rows)(dof, n, lo, hi, iterations, clamp,
                                                                                params, q0, target_rot, target_pos,
                                                                                local, revolute, end, C, lower, upper,
                                                                                out));
    return result;
}

/* The whole solve of kinematics.ik.layer in batch-first layout: ik_solve's iterations from the seeds (n, dof) (projected
   first when clamp) towards the targets (n, 4, 4), then the evaluation at the final iterate; params as ik_solve's.
   Outputs, batch-first: q (n,
   dof), position and rotation error (n, 6), their norms (n, 2), within the limits and success (n, 2) as bytes
   0 / 1; iterates (iterations + 1, dof, n) batch-last, every iterate from the projected seed to the final one,
   or NULL (what ik_solve_vjp reads). Rows [begin, end_row). Returns the number of rows whose inputs fail the
   checks of validate_inputs (a non-finite entry of target or seed, a last row off [0 0 0 1] or R^T R off I by
   more than the input tolerance, det R <= 0), or -1 without scratch. */
static QP_INLINE long KERNEL(ik_solve_evaluate_rows)(long dof, long n, long begin, long end_row, long iterations, long clamp,
                                        const REAL *restrict params, const REAL *restrict target,
                                        const REAL *restrict seed, const REAL *restrict local,
                                        const REAL *restrict revolute, const REAL *restrict end,
                                        const REAL *restrict C, const REAL *restrict lower, const REAL *restrict upper,
                                        REAL *restrict q_out, REAL *restrict errors, REAL *restrict norms,
                                        unsigned char *restrict flags, REAL *restrict iterates) {
    REAL *scratch = malloc(sizeof(REAL) * KERNEL(ik_tile_size)(dof));
    if (scratch == NULL) return -1;
    KERNEL(ik_tile) t;
    KERNEL(ik_tile_init)(&t, scratch, dof);
    const REAL step = params[0], tol = params[5];
    long invalid = 0;
    for (long lo = begin; lo < end_row; lo += IK_TILE) {
        long T = end_row - lo < IK_TILE ? end_row - lo : IK_TILE;
        for (long b = 0; b < T; b++) {
            const REAL *restrict m = target + 16 * (lo + b), *restrict s = seed + dof * (lo + b);
            int ok = 1;
            for (int k = 0; k < 16; k++) ok &= isfinite(m[k]) != 0;
            for (int k = 0; k < 4; k++) ok &= FABS(m[12 + k] - (k == 3)) <= tol;
            for (int i = 0; i < 3; i++) {
                for (int j = 0; j < 3; j++) {
                    ok &= FABS(m[i] * m[j] + m[4 + i] * m[4 + j] + m[8 + i] * m[8 + j] - (i == j)) <= tol;
                }
            }
            ok &= m[0] * (m[5] * m[10] - m[6] * m[9]) - m[1] * (m[4] * m[10] - m[6] * m[8])
                + m[2] * (m[4] * m[9] - m[5] * m[8]) > 0;
            for (long i = 0; i < dof; i++) {
                REAL v = s[i];
                ok &= isfinite(v) != 0;
                t.q[i * T + b] = clamp ? (v < lower[i] ? lower[i] : (v > upper[i] ? upper[i] : v)) : v;
            }
            invalid += !ok;
        }
        KERNEL(ik_load_targets)(lo, T, target, t.tr, t.tp);
        for (long it = 0; it < iterations; it++) {
            if (iterates != NULL) KERNEL(ik_scatter)(dof, n, lo, T, t.q, iterates + it * dof * n);
            KERNEL(ik_linearise)(dof, T, &t, local, revolute, end, C, params, lower, upper);
            KERNEL(ik_update)(dof, T, t.q, t.u, step, clamp, lower, upper);
        }
        if (iterates != NULL) KERNEL(ik_scatter)(dof, n, lo, T, t.q, iterates + iterations * dof * n);
        KERNEL(ik_sin_versine)(dof * T, t.q, t.sine, t.versine);
        KERNEL(fk_jacobian)(dof, T, t.sine, t.versine, t.q, local, revolute, end, t.rot, t.pos, t.jac);
        KERNEL(pose_error)(T, t.tr, t.tp, t.rot, t.pos, t.err, params[1], params[2]);
        for (long b = 0; b < T; b++) {
            long row = lo + b;
            int inside = 1;
            for (long i = 0; i < dof; i++) {
                REAL v = t.q[i * T + b];
                q_out[row * dof + i] = v;
                inside &= v >= lower[i] && v <= upper[i];
            }
            REAL sp = 0, sr = 0;
            for (int k = 0; k < 3; k++) {
                REAL ep = t.err[k * T + b], er = t.err[(3 + k) * T + b];
                errors[6 * row + k] = ep;
                errors[6 * row + 3 + k] = er;
                sp += ep * ep;
                sr += er * er;
            }
            REAL pn = SQRT(sp), rn = SQRT(sr);
            norms[2 * row] = pn;
            norms[2 * row + 1] = rn;
            flags[2 * row] = (unsigned char)inside;
            flags[2 * row + 1] = (unsigned char)(inside && pn <= params[3] && rn <= params[4]);
        }
    }
    free(scratch);
    return invalid;
}

DISPATCH long KERNEL(ik_solve_evaluate)(long dof, long n, long threads, long iterations, long clamp,
                                        const REAL *restrict params, const REAL *restrict target,
                                        const REAL *restrict seed, const REAL *restrict local,
                                        const REAL *restrict revolute, const REAL *restrict end,
                                        const REAL *restrict C, const REAL *restrict lower, const REAL *restrict upper,
                                        REAL *restrict q_out, REAL *restrict errors, REAL *restrict norms,
                                        unsigned char *restrict flags, REAL *restrict iterates) {
    long result; /* rows in shares of at least IK_TILE */
    COUNTED_ROWS_IN_PARALLEL(result, n, threads, IK_TILE, KERNEL(ik_solve_evaluate_rows)(dof, n, lo, hi, iterations,
                                                                                         clamp, params, target, seed,
                                                                                         local, revolute, end, C,
                                                                                         lower, upper, q_out, errors,
                                                                                         norms, flags, iterates));
    return result;
}

/* The backward of ik_solve_evaluate: iterates (iterations + 1, dof, n) as it stored them, the target (n, 4, 4),
   grad (n, dof) on the final iterate and grad_err (n, 6) on the final errors (position, rotation) -> grad_q0 (n,
   dof) on the projected seed and grad_target (n, 4, 4) (its last row 0), batch-first. First the final evaluation's closed forms, then step by
   step backwards, each recomputed at its stored iterate: the projection's mask (1 inside [lower, upper], the
   bounds included, as torch.clamp), the DLS step's closed form (y = (J J^T + C)^-1 J g, w = J^T y, dJ^T = x (g -
   w)^T - y u^T, de = y), the pose error's and the revolute chain's closed forms above. An all-revolute chain
   only (the caller checks). Returns 0, or -1 without scratch. */
static QP_INLINE long KERNEL(ik_solve_vjp_rows)(long dof, long n, long begin, long end_row, long iterations, long clamp, const REAL *restrict params,
                                   const REAL *restrict iterates, const REAL *restrict target,
                                   const REAL *restrict local,
                                   const REAL *restrict revolute, const REAL *restrict end, const REAL *restrict C,
                                   const REAL *restrict lower, const REAL *restrict upper, const REAL *restrict grad,
                                   const REAL *restrict grad_err, REAL *restrict grad_q0,
                                   REAL *restrict grad_target) {
    long extra = (dof + 6 + 6 + 3 + 9 + 9 + 6 * dof + 12 + dof + 9 + 3) * IK_TILE;
    REAL *scratch = malloc(sizeof(REAL) * (KERNEL(ik_tile_size)(dof) + extra));
    if (scratch == NULL) return -1;
    KERNEL(ik_tile) t;
    KERNEL(ik_tile_init)(&t, scratch, dof);
    REAL *g = scratch + KERNEL(ik_tile_size)(dof), *jg = g + dof * IK_TILE, *y = jg + 6 * IK_TILE;
    REAL *gp = y + 6 * IK_TILE, *gr = gp + 3 * IK_TILE, *gtr = gr + 9 * IK_TILE, *gjac = gtr + 9 * IK_TILE;
    REAL *work = gjac + 6 * dof * IK_TILE, *gq = work + 12 * IK_TILE, *acc_tr = gq + dof * IK_TILE;
    REAL *acc_tp = acc_tr + 9 * IK_TILE;
    const REAL step = params[0];
    for (long lo = begin; lo < end_row; lo += IK_TILE) {
        long T = end_row - lo < IK_TILE ? end_row - lo : IK_TILE;
        KERNEL(ik_gather_rows)(dof, lo, T, grad, g);
        KERNEL(ik_load_targets)(lo, T, target, t.tr, t.tp);
        /* the final evaluation: e = pose_error(target, FK(q_K)), grad_err on it */
        KERNEL(ik_gather)(dof, n, lo, T, iterates + iterations * dof * n, t.q);
        KERNEL(ik_sin_versine)(dof * T, t.q, t.sine, t.versine);
        KERNEL(fk_jacobian)(dof, T, t.sine, t.versine, t.q, local, revolute, end, t.rot, t.pos, t.jac);
        KERNEL(ik_gather_rows)(6, lo, T, grad_err, y);
        for (long k = 0; k < 3 * T; k++) {
            acc_tp[k] = y[k];
            gp[k] = -y[k];
        }
        KERNEL(pose_error_vjp)(T, t.tr, t.rot, y + 3 * T, acc_tr, gr, params[1], params[2]);
        for (long k = 0; k < 6 * dof * T; k++) gjac[k] = 0;
        KERNEL(chain_vjp)(dof, T, t.rot, t.jac, gr, gp, gjac, work, gq);
        for (long k = 0; k < dof * T; k++) g[k] += gq[k];
        for (long it = iterations - 1; it >= 0; it--) {
            KERNEL(ik_gather)(dof, n, lo, T, iterates + it * dof * n, t.q);
            KERNEL(ik_linearise)(dof, T, &t, local, revolute, end, C, params, lower, upper);
            for (long i = 0; i < dof; i++) { /* through the projection: g <- mask g; the step's gradient s g */
                const REAL *restrict q = t.q + i * T, *restrict u = t.u + i * T;
                REAL *restrict gi = g + i * T;
                const REAL l = lower[i], h = upper[i];
                IVDEP for (long b = 0; b < T; b++) {
                    REAL v = q[b] + step * u[b];
                    gi[b] = (!clamp || (v >= l && v <= h)) ? gi[b] : 0;
                }
            }
            for (int k = 0; k < 6; k++) { /* J g_u, g_u = step g */
                REAL *restrict o = jg + k * T;
                IVDEP for (long b = 0; b < T; b++) o[b] = 0;
                for (long i = 0; i < dof; i++) {
                    const REAL *restrict j = t.jac + (6 * i + k) * T, *restrict gi = g + i * T;
                    IVDEP for (long b = 0; b < T; b++) o[b] += j[b] * step * gi[b];
                }
            }
            KERNEL(ik_cholesky_solve)(T, t.gram, jg, y);
            for (long i = 0; i < dof; i++) {
                const REAL *restrict j = t.jac + 6 * i * T, *restrict gi = g + i * T, *restrict u = t.u + i * T;
                REAL *restrict o = gjac + 6 * i * T;
                IVDEP for (long b = 0; b < T; b++) {
                    REAL w = 0;
                    for (int k = 0; k < 6; k++) w += j[k * T + b] * y[k * T + b];
                    REAL gu = step * gi[b];
                    for (int k = 0; k < 6; k++) o[k * T + b] = t.x[k * T + b] * (gu - w) - y[k * T + b] * u[b];
                }
            }
            for (long k = 0; k < 3 * T; k++) {
                acc_tp[k] += y[k];
                gp[k] = -y[k];
            }
            KERNEL(pose_error_vjp)(T, t.tr, t.rot, y + 3 * T, gtr, gr, params[1], params[2]);
            for (long k = 0; k < 9 * T; k++) acc_tr[k] += gtr[k];
            KERNEL(chain_vjp)(dof, T, t.rot, t.jac, gr, gp, gjac, work, gq);
            for (long k = 0; k < dof * T; k++) g[k] += gq[k];
        }
        KERNEL(ik_scatter_rows)(dof, lo, T, g, grad_q0);
        for (long b = 0; b < T; b++) {
            REAL *restrict o = grad_target + 16 * (lo + b);
            for (int i = 0; i < 3; i++) {
                for (int j = 0; j < 3; j++) o[4 * i + j] = acc_tr[(3 * i + j) * T + b];
                o[4 * i + 3] = acc_tp[i * T + b];
            }
            for (int k = 12; k < 16; k++) o[k] = 0;
        }
    }
    free(scratch);
    return 0;
}

DISPATCH long KERNEL(ik_solve_vjp)(long dof, long n, long threads, long iterations, long clamp, const REAL *restrict params,
                                   const REAL *restrict iterates, const REAL *restrict target,
                                   const REAL *restrict local,
                                   const REAL *restrict revolute, const REAL *restrict end, const REAL *restrict C,
                                   const REAL *restrict lower, const REAL *restrict upper, const REAL *restrict grad,
                                   const REAL *restrict grad_err, REAL *restrict grad_q0,
                                   REAL *restrict grad_target) {
    long result; /* rows in shares of at least IK_TILE */
    COUNTED_ROWS_IN_PARALLEL(result, n, threads, IK_TILE, KERNEL(ik_solve_vjp_rows)(dof, n, lo, hi, iterations, clamp,
                                                                                    params, iterates, target, local,
                                                                                    revolute, end, C, lower, upper,
                                                                                    grad, grad_err, grad_q0,
                                                                                    grad_target));
    return result;
}

#endif /* REAL */
