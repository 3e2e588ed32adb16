/* The whole-body layer's cascade step (kinematics.wholebody.step_kernel): `steps` strict-cascade steps in one call,
   each the tree's pass, every task's and constraint's rows, each level's QP (active-set steps first, the interior
   point and the polish on the rows they leave), the hand-over between levels and the integration, the same arithmetic
   as the torch composition in kinematics.wholebody.cascade (its reference). The tree's pass and the task errors run in
   REAL (the layer's dtype), the QPs in double, as there. ISO rounding (no contraction).

   The batch goes in chunks of WB_CHUNK rows to `threads` OpenMP threads, each taking the next chunk when done and
   running every step of it in its own scratch: one parallel region per call, whatever the numbers of steps and
   levels. What the layer is made of comes as a plan built once per
   layer (kinematics.wholebody.step_plan): int64 `plan` (a header, the frames read, the rows per level, a record per
   block), double `settings` (the QP's settings, then each block's costs, gains, margins and limits), and `arrays`, the
   tree's buffers and each frame's chain. Each target is read through `targets[i]`, the row b's at targets[i] + b *
   strides[i] (0 for a target shared by the batch). */
#ifndef REAL
#define KINEMATICS_UNIT "wholebody_step.c"
#include "per_type.h"
#else

#include "wholebody_shared.h"

/* One row's configuration moved by dq (free_flyer.integrate on the base, a sum on the joints), in double. */
static void KERNEL(wb_integrate)(long nq, long floating, const REAL *restrict q, const REAL *restrict dq,
                                 REAL *restrict out) {
    long joints = floating ? 7 : 0, tangent = floating ? 6 : 0;
    if (floating) {
        double qx = q[3], qy = q[4], qz = q[5], qw = q[6], wx = dq[3], wy = dq[4], wz = dq[5];
        double vx = dq[0], vy = dq[1], vz = dq[2];
        double b, c, hs, hc;
        KERNEL(wb_exp_coefficients)(wx * wx + wy * wy + wz * wz, &b, &c, &hs, &hc);
        double ax = wy * vz - wz * vy, ay = wz * vx - wx * vz, az = wx * vy - wy * vx; /* w x v */
        double sx = vx + b * ax + c * (wy * az - wz * ay), sy = vy + b * ay + c * (wz * ax - wx * az);
        double sz = vz + b * az + c * (wx * ay - wy * ax);
        double s = 2.0 / (qx * qx + qy * qy + qz * qz + qw * qw);
        double xs = qx * s, ys = qy * s, zs = qz * s, wxs = qw * xs, wys = qw * ys, wzs = qw * zs;
        double xx = qx * xs, xy = qx * ys, xz = qx * zs, yy = qy * ys, yz = qy * zs, zz = qz * zs;
        out[0] = (REAL)(q[0] + ((1.0 - (yy + zz)) * sx + (xy - wzs) * sy + (xz + wys) * sz));
        out[1] = (REAL)(q[1] + ((xy + wzs) * sx + (1.0 - (xx + zz)) * sy + (yz - wxs) * sz));
        out[2] = (REAL)(q[2] + ((xz - wys) * sx + (yz + wxs) * sy + (1.0 - (xx + yy)) * sz));
        double px = hs * wx, py = hs * wy, pz = hs * wz, pw = hc; /* q * exp(w) */
        double nx = qw * px + qx * pw + qy * pz - qz * py, ny = qw * py - qx * pz + qy * pw + qz * px;
        double nz = qw * pz + qx * py - qy * px + qz * pw, nw = qw * pw - qx * px - qy * py - qz * pz;
        double norm = sqrt(nx * nx + ny * ny + nz * nz + nw * nw);
        out[3] = (REAL)(nx / norm), out[4] = (REAL)(ny / norm), out[5] = (REAL)(nz / norm), out[6] = (REAL)(nw / norm);
    }
    for (long j = 0; j < nq - joints; j++) out[joints + j] = (REAL)(q[joints + j] + (double)dq[tangent + j]);
}

/* The active-set steps of rows [0, n) of a level's QP: through qp_polish_structured where the level's Hessian is
   given as diag(p) + U U^T (rank >= 0: U's columns), else qp_polish with P. */
static void KERNEL(wb_polish)(long n, const long long *plan, const double *params, long me, long steps, long rank,
                              const double *P, const double *p, const double *U, const double *const *problem,
                              const double *const *guess, double *sol, double *w, double *flags, double *rows) {
    long nv = plan[WB_NV], mi = plan[WB_MI], refinements = plan[WB_REFINEMENTS];
    if (rank >= 0)
        qp_polish_structured_double(n, 1, nv, me, mi, steps, refinements, rank, params, p, U, problem[0],
                                    problem[1], problem[2], problem[3], problem[4], problem[5], problem[6], guess[0],
                                    guess[1], guess[2], guess[3], guess[4], guess[5], sol, w, flags, rows);
    else
        qp_polish_double(n, 1, nv, me, mi, steps, refinements, nv * nv, params, P, problem[0], problem[1], problem[2],
                         problem[3], problem[4], problem[5], problem[6], guess[0], guess[1], guess[2], guess[3],
                         guess[4], guess[5], sol, w, flags, rows);
}

/* A level's QP for rows [0, n): the active-set steps from `guess` (z, s, zu, su, zl, sl: 2 mi + 4 nv per row, or
   none), then on the rows they leave the interior point and the polish, as kinematics.qp.kernels._qp_solve_cpu. The
   Hessian: S->P, or with rank >= 0 diag(S->p) + S->U S->U^T (U: nv x rank per row; P built for the interior point's
   rows only). */
static void KERNEL(wb_level_qp)(long n, const long long *plan, const double *settings, long me, long rank,
                                KERNEL(wb_scratch) *S) {
    long nv = plan[WB_NV], mi = plan[WB_MI], N = nv + me + mi, F = mi + 2 * nv;
    const double polish_params[3] = {settings[WB_ELASTIC], settings[WB_TOLERANCE], settings[WB_INFEASIBILITY_TOLERANCE]};
    const double ipm_params[2] = {settings[WB_ELASTIC], settings[WB_PROX]};
    long steps = plan[WB_ACTIVE_SET_STEPS], retries = 0;
    if (steps > 0) {
        double *g = S->guess;
        const double *problem[7] = {S->c, S->Ak, S->bk, S->G, S->h, S->lb, S->ub};
        const double *guess[6] = {g, g + n * mi, g + 2 * n * mi, g + 2 * n * mi + n * nv, g + 2 * n * mi + 2 * n * nv,
                                  g + 2 * n * mi + 3 * n * nv};
        KERNEL(wb_polish)(n, plan, polish_params, me, steps, rank, S->P, S->p, S->U, problem, guess, S->sol, S->w,
                          S->flags, S->rows);
        for (long i = 0; i < n; i++)
            if (S->rows[4 * i] != 0) S->retry[retries++] = i;
    } else {
        for (long i = 0; i < n; i++) S->retry[retries++] = i;
    }
    if (retries == 0) return;
    /* the rows left, gathered: P, c, A, b, G, h, lb, ub, p, U */
    long u = rank > 0 ? rank : 0, sizes[10] = {nv * nv, nv, me * nv, me, mi * nv, mi, nv, nv, nv, nv * u};
    const double *from[10] = {S->P, S->c, S->Ak, S->bk, S->G, S->h, S->lb, S->ub, S->p, S->U};
    double *part[10], *at = S->retry_problem;
    for (int k = rank >= 0 ? 1 : 0; k < (rank >= 0 ? 10 : 8); k++) {
        part[k] = at;
        for (long i = 0; i < retries; i++)
            for (long e = 0; e < sizes[k]; e++) at[i * sizes[k] + e] = from[k][S->retry[i] * sizes[k] + e];
        at += retries * sizes[k];
    }
    if (rank >= 0) { /* P = diag(p) + U U^T of those rows, for the interior point */
        part[0] = at;
        for (long i = 0; i < retries; i++) {
            const double *p = part[8] + i * nv, *U = part[9] + i * nv * u;
            double *P = part[0] + i * nv * nv;
            for (long a = 0; a < nv; a++)
                for (long b = 0; b < nv; b++) {
                    double entry = a == b ? p[a] : 0;
                    for (long e = 0; e < u; e++) entry += U[a * u + e] * U[b * u + e];
                    P[a * nv + b] = entry;
                }
        }
    }
    long ipm_sizes[8] = {nv, me, mi, mi, nv, nv, nv, nv};
    double *ipm[8];
    at = S->interior;
    for (int k = 0; k < 8; k++) ipm[k] = at, at += retries * ipm_sizes[k];
    qp_ipm_double(retries, 1, nv, me, mi, plan[WB_QP_ITERATIONS], nv * nv, ipm_params, part[0], part[1], part[2],
                  part[3], part[4], part[5], part[6], part[7], ipm[0], ipm[1], ipm[2], ipm[3], ipm[4], ipm[5], ipm[6],
                  ipm[7]);
    double *sol = S->retry_out, *w = sol + retries * N, *flags = w + retries * nv, *rows = flags + retries * F;
    KERNEL(wb_polish)(retries, plan, polish_params, me, plan[WB_POLISH_STEPS], rank, part[0], part[8], part[9],
                      (const double *const *)part + 1, (const double *const *)ipm + 2, sol, w, flags, rows);
    for (long i = 0; i < retries; i++) {
        long r = S->retry[i];
        for (long e = 0; e < N; e++) S->sol[r * N + e] = sol[i * N + e];
        for (long e = 0; e < nv; e++) S->w[r * nv + e] = w[i * nv + e];
        for (long e = 0; e < F; e++) S->flags[r * F + e] = flags[i * F + e];
        for (long e = 0; e < 4; e++) S->rows[r * 4 + e] = rows[i * 4 + e];
    }
}

/* Row i's task residuals (each task's error, every row of it, in block order) and constraint violations (0 where it
   holds) at the configuration of S->q, whose frames and centre of mass S holds: what the layer's evaluation reports. */
static void KERNEL(wb_evaluate)(long i, long g, long n, const long long *plan, const double *settings,
                                const void *const *arrays, const void *const *targets, const long long *strides,
                                const KERNEL(wb_scratch) *S, REAL *restrict residual, REAL *restrict violation) {
    long nq = plan[WB_NQ], base_nq = plan[WB_FLOATING] ? 7 : 0, blocks = plan[WB_BLOCKS];
    long frames = plan[WB_FRAMES], levels = plan[WB_LEVELS], joints = nq - base_nq;
    const long long *record = plan + WB_HEADER + 2 * frames + levels;
    const REAL *q = S->q + i * nq, *com = S->com + i * 3;
    for (long k = 0; k < blocks; k++, record += WB_RECORD) {
        long type = record[WB_TYPE], f = record[WB_FRAME], t = record[WB_TARGET];
        const REAL *target = t >= 0 ? (const REAL *)targets[t] + g * strides[t] : 0;
        const REAL *pose = f >= 0 ? S->poses + (f * n + i) * 16 : 0;
        REAL error[6], relative_pose[16];
        if (type == WB_RELATIVE_FRAME_TASK) {
            KERNEL(wb_relative)(0, S->poses + (record[WB_ROOT] * n + i) * 16, pose, 0, 0, relative_pose, 0);
            pose = relative_pose;
        }
        if (WB_IS_POSE_TASK(type) || type == WB_CONTACT) KERNEL(wb_pose_error)(target, pose, settings, error);
        if (WB_IS_POSE_TASK(type)) {
            for (long j = 0; j < record[WB_COUNT]; j++) *residual++ = error[record[WB_FIRST] + j];
        } else if (type == WB_COM_TASK) {
            for (int a = 0; a < 3; a++) *residual++ = target[a] - com[a];
        } else if (type == WB_POSTURE_TASK) {
            for (long j = 0; j < joints; j++) *residual++ = target[j] - q[base_nq + j];
        } else if (type == WB_CONTACT) {
            REAL p = SQRT(error[0] * error[0] + error[1] * error[1] + error[2] * error[2]);
            REAL r = SQRT(error[3] * error[3] + error[4] * error[4] + error[5] * error[5]);
            *violation++ = p > r ? p : r;
        } else if (type == WB_SUPPORT_POLYGON) {
            const REAL *normal = (const REAL *)targets[t] + g * strides[t];
            const REAL *offset = (const REAL *)targets[t + 1] + g * strides[t + 1];
            const unsigned char *edge = (const unsigned char *)targets[t + 2] + g * strides[t + 2];
            REAL outside = (REAL)-WB_INACTIVE;
            for (long j = 0; j < record[WB_ROWS]; j++) {
                REAL v = edge[j] ? (normal[2 * j] * com[0] + normal[2 * j + 1] * com[1]) - (offset[j] -
                         (REAL)settings[record[WB_PARAM]]) : (REAL)-WB_INACTIVE;
                outside = v > outside ? v : outside;
            }
            *violation++ = outside > 0 ? outside : 0;
        } else if (type == WB_CONFIGURATION_LIMIT) {
            const REAL *lower = arrays[WB_LOWER], *upper = arrays[WB_UPPER];
            REAL worst = 0;
            for (long j = 0; j < joints; j++) {
                REAL below = lower[j] - q[base_nq + j], above = q[base_nq + j] - upper[j];
                REAL v = below > above ? below : above;
                worst = v > worst ? v : worst;
            }
            *violation++ = worst;
        } else if (type == WB_STEP_LIMIT) {
            *violation++ = 0;
        }
    }
}

/* `steps` cascade steps of rows [lo, hi), in the scratch wb_sizes counts for hi - lo rows (or more). */
static void KERNEL(wb_chunk)(long lo, long hi, long steps, const long long *plan, const double *settings,
                             const void *const *arrays, const void *const *targets, const long long *strides,
                             const REAL *q0, REAL *q_out, REAL *dq_out, signed char *status,
                             unsigned char *active_in, signed char *active_bounds, REAL *residuals, REAL *violations,
                             double *saved, REAL *real_block, double *block, long *longs) {
    long n = hi - lo, nq = plan[WB_NQ], nv = plan[WB_NV];
    long floating = plan[WB_FLOATING], levels = plan[WB_LEVELS], frames = plan[WB_FRAMES], me = plan[WB_ME];
    long mi = plan[WB_MI], F = mi + 2 * nv;
    const long long *level_rows = plan + WB_HEADER + 2 * frames;
    long total_rows = 0;
    for (long k = 0; k < levels; k++) total_rows += level_rows[k];
    KERNEL(wb_scratch) S;
    KERNEL(wb_layout)(n, plan, real_block, block, longs, &S);
    KERNEL(wb_row_columns)(plan, settings, S.column);
    signed char *status_here = status + lo * levels, *bounds_here = active_bounds + lo * nv;
    unsigned char *in_here = active_in + lo * mi;
    for (long e = 0; e < n * nq; e++) S.q[e] = q0[lo * nq + e];

    for (long step = 0; step < steps; step++) {
        KERNEL(wb_tree_pass)(n, plan, arrays, &S, 1);
        for (long i = 0; i < n; i++)
            KERNEL(wb_assemble)(i, lo + i, n, plan, settings, arrays, targets, strides, &S, total_rows, 1);
        /* the levels */
        double damping_sq = settings[WB_DAMPING] * settings[WB_DAMPING];
        for (long k = 0, start = 0, kept = 0; k < levels; start += level_rows[k], k++) {
            long mk = level_rows[k], me_k = me + kept;
            /* the Hessian also as diag(p) + U U^T (the posture's rows and the damping; the other rows), through
               qp_polish_structured where its Schur complement, at most rank + me_k + mi square, is no larger than P */
            long rank = KERNEL(wb_low_rank)(plan, k);
            rank = rank + me_k + mi <= nv ? rank : -1;
            for (long i = 0; i < n; i++) {
                KERNEL(wb_level_hessian)(nv, mk, S.J + (i * total_rows + start) * nv, S.r + i * total_rows + start,
                                         S.column + start, damping_sq, rank, &S, i);
                double *Ak = S.Ak + i * me_k * nv, *bk = S.bk + i * me_k;
                for (long e = 0; e < me * nv; e++) Ak[e] = S.A[i * me * nv + e];
                for (long e = 0; e < me; e++) bk[e] = S.b[i * me + e];
                /* what the levels above achieved: their rows at the step each of them handed over */
                for (long j = 0; j < kept; j++) {
                    const double *row = S.J + (i * total_rows + j) * nv;
                    for (long e = 0; e < nv; e++) Ak[(me + j) * nv + e] = row[e];
                    bk[me + j] = S.kept[i * total_rows + j];
                }
                /* the active-set steps' start: the level above's active set, or the empty one */
                double *g = S.guess;
                for (long e = 0; e < mi; e++) {
                    g[i * mi + e] = k ? S.previous[i * F + e] : 0;
                    g[n * mi + i * mi + e] = 0.5;
                }
                for (long e = 0; e < nv; e++) {
                    double bound = k ? S.previous[i * F + mi + e] - S.previous[i * F + mi + nv + e] : 0;
                    g[2 * n * mi + i * nv + e] = bound > 0, g[2 * n * mi + n * nv + i * nv + e] = 0.5;
                    g[2 * n * mi + 2 * n * nv + i * nv + e] = bound < 0, g[2 * n * mi + 3 * n * nv + i * nv + e] = 0.5;
                }
            }
            KERNEL(wb_level_qp)(n, plan, settings, me_k, rank, &S);
            long Nk = nv + me_k + mi;
            for (long i = 0; i < n; i++) {
                const double *x = S.sol + i * Nk, *flags = S.flags + i * F, *lb = S.lb + i * nv, *ub = S.ub + i * nv;
                double *dq = S.dq + i * nv, code = S.rows[4 * i];
                int solved = code == 0;
                if (k == 0 || solved) {
                    for (long e = 0; e < nv; e++) {
                        double v = x[e];
                        if (k == 0 && !solved) { /* the least-violation step, inside the step's bounds */
                            v = v > lb[e] ? v : lb[e];
                            v = v < ub[e] ? v : ub[e];
                        }
                        dq[e] = v;
                    }
                    for (long e = 0; e < mi; e++) in_here[i * mi + e] = flags[e] > 0;
                    for (long e = 0; e < nv; e++)
                        bounds_here[i * nv + e] = (signed char)(flags[mi + e] - flags[mi + nv + e]);
                }
                status_here[i * levels + k] = (signed char)code;
                for (long e = 0; e < F; e++) S.previous[i * F + e] = flags[e];
                for (long j = start; j < start + mk && k + 1 < levels; j++) { /* what this level achieved */
                    const double *row = S.J + (i * total_rows + j) * nv;
                    double value = 0;
                    for (long e = 0; e < nv; e++) value += row[e] * dq[e];
                    S.kept[i * total_rows + j] = value;
                }
                if (saved) { /* what the backward reads of this level: its solution, active set and system */
                    long most_eq = me + total_rows, L = WB_SOLUTION_DOUBLES(nv, most_eq, mi);
                    double *keep = saved + (lo + i) * WB_SAVED_DOUBLES(nv, most_eq, mi, levels), *solution = keep + k * L;
                    unsigned char *bytes = (unsigned char *)(keep + levels * L) + k * (F + 1);
                    for (long e = 0; e < F; e++) bytes[e] = flags[e] > 0;
                    bytes[F] = S.rows[4 * i + 3] > 0;
                    for (long e = 0; e < nv + me_k; e++) solution[e] = x[e];
                    for (long e = 0; e < mi; e++) solution[nv + most_eq + e] = x[nv + me_k + e];
                }
            }
            kept += mk;
        }
        for (long i = 0; i < n; i++) {
            REAL *next = q_out + (lo + i) * nq, *step_dq = dq_out + (lo + i) * nv;
            for (long e = 0; e < nv; e++) step_dq[e] = (REAL)S.dq[i * nv + e];
            KERNEL(wb_integrate)(nq, floating, S.q + i * nq, step_dq, next);
            for (long e = 0; e < nq; e++) S.q[i * nq + e] = next[e];
        }
    }
    if (residuals) { /* the evaluation at the last configuration */
        long width = plan[WB_RESIDUALS], count = plan[WB_CONSTRAINTS];
        KERNEL(wb_tree_pass)(n, plan, arrays, &S, 0);
        for (long i = 0; i < n; i++)
            KERNEL(wb_evaluate)(i, lo + i, n, plan, settings, arrays, targets, strides, &S,
                                residuals + (lo + i) * width, violations + (lo + i) * count);
    }
}

/* The forward's work on a chunk (wb_in_chunks' runner). */
static long KERNEL(wb_forward_runner)(long lo, long hi, const KERNEL(wb_job) *job, REAL *real_block, double *block,
                                      long *long_block) {
    KERNEL(wb_chunk)(lo, hi, job->steps, job->plan, job->settings, job->arrays, job->targets, job->strides, job->q,
                     job->q_next, job->dq, job->status, job->active_in, job->active_bounds, job->residuals,
                     job->violations, job->saved, real_block, block, long_block);
    return 0;
}

/* `steps` steps from q; with `saved` not NULL, what the last step's backward reads (WB_SAVED_DOUBLES values per row
   and level). */
DISPATCH long KERNEL(wholebody_step)(long n, long threads, long steps, const long long *restrict plan,
                                     const double *restrict settings, const void *const *arrays,
                                     const void *const *targets, const long long *restrict strides,
                                     const REAL *restrict q, REAL *restrict q_next, REAL *restrict dq,
                                     signed char *restrict status, unsigned char *restrict active_in,
                                     signed char *restrict active_bounds, REAL *restrict residuals,
                                     REAL *restrict violations, double *restrict saved) {
    KERNEL(wb_job) job = {steps, plan, settings, arrays, targets, strides, q, q_next, dq, residuals, violations, status,
                          active_bounds, active_in, saved, 0, 0, 0, 0, 0, 0, 0, 0};
    return KERNEL(wb_in_chunks)(n, threads, &job, 0, KERNEL(wb_forward_runner));
}


#endif /* REAL */
