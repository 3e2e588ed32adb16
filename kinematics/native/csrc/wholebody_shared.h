/* What the whole-body step's two units share (wholebody_step.c, the forward; wholebody_backward.c, its backward),
   included by each in its REAL section: the plan's layout, the free flyer's integration, the levels' Hessians, the
   tree's pass, a row's assembly of every level's rows, the scratch's size and layout, and the dispatch of the batch in
   chunks to OpenMP threads. */

#ifndef WHOLEBODY_STEP_LAYOUT
#define WHOLEBODY_STEP_LAYOUT
/* the plan's header */
enum { WB_M, WB_NQ, WB_NV, WB_BASE_NV, WB_FLOATING, WB_LEVELS, WB_BLOCKS, WB_FRAMES, WB_ME, WB_MI, WB_QP_ITERATIONS,
       WB_ACTIVE_SET_STEPS, WB_REFINEMENTS, WB_POLISH_STEPS, WB_COM, WB_RESIDUALS, WB_CONSTRAINTS, WB_HEADER = 18 };
/* then per frame read (slot, chain length), then the rows of each level, then per block 9 entries (WB_ROOT: a relative
   frame task's root frame, else -1): */
enum { WB_TYPE, WB_LEVEL, WB_FRAME, WB_TARGET, WB_ROWS, WB_PARAM, WB_FIRST, WB_COUNT, WB_ROOT, WB_RECORD };
enum { WB_FRAME_TASK, WB_COM_TASK, WB_POSTURE_TASK, WB_CONTACT, WB_SUPPORT_POLYGON, WB_CONFIGURATION_LIMIT,
       WB_STEP_LIMIT, WB_RELATIVE_FRAME_TASK };
/* a block of weighted rows in a level (the others: constraints); a block whose rows are a frame's pose error */
#define WB_IS_TASK(type) ((type) == WB_FRAME_TASK || (type) == WB_COM_TASK || (type) == WB_POSTURE_TASK || \
                          (type) == WB_RELATIVE_FRAME_TASK)
#define WB_IS_POSE_TASK(type) ((type) == WB_FRAME_TASK || (type) == WB_RELATIVE_FRAME_TASK)
/* settings */
enum { WB_DAMPING, WB_ELASTIC, WB_TOLERANCE, WB_INFEASIBILITY_TOLERANCE, WB_PROX, WB_SMALL_SIN_SQ, WB_NEAR_PI_COS,
       WB_SETTINGS = 8 };
/* arrays: the tree's buffers, then 5 per frame read (offset, ancestors, dofs, weights, revolute) */
enum { WB_ORIGIN, WB_REVOLUTE, WB_MULTIPLIER, WB_OFFSET, WB_COLUMN, WB_PARENT, WB_MOMENT, WB_SUBTREE_MASS, WB_TOTAL,
       WB_DOF, WB_LOWER, WB_UPPER, WB_ARRAYS };
#define WB_TREE_TILE 32 /* TREE_TILE in tree.c: the Jacobian kernels' scratch per row */
#define WB_INACTIVE 1e3 /* kinematics.wholebody.constraints.support_polygon.INACTIVE */
#define WB_CHUNK 32     /* rows per chunk of a thread's share (wb_rows) */
#define WB_MAX_BOUND_BLOCKS 8 /* the bounds' blocks (limits) the backward reads: step_plan.MAX_BOUND_BLOCKS */
/* what a step saves per row for its backward, in doubles: per level its solution [x; y; z] (x: nv, y: the level's
   equalities' multipliers, at most `most_eq`, z: mi), then per level, as bytes, its final active set's flags (mi + 2
   nv) and whether the original system's point was kept (1) */
#define WB_SOLUTION_DOUBLES(nv, most_eq, mi) ((nv) + (most_eq) + (mi))
#define WB_SAVED_DOUBLES(nv, most_eq, mi, levels) \
    ((levels) * WB_SOLUTION_DOUBLES(nv, most_eq, mi) + ((levels) * ((mi) + 2 * (nv) + 1) + 7) / 8)
#endif

/* free_flyer.integrate's coefficients of the rotation vector w at t2 = |w|^2: b = (1 - cos t) / t^2, c = (t - sin t) /
   t^3, hs = sin(t / 2) / t, hc = cos(t / 2), their series below the dtype's threshold. */
static void KERNEL(wb_exp_coefficients)(double t2, double *b, double *c, double *hs, double *hc) {
    double t = sqrt(t2);
    if (t < (sizeof(REAL) == 4 ? 0.2 : 1e-2)) {
        *b = 0.5 - t2 / 24.0 + t2 * t2 / 720.0;
        *c = 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0;
        *hs = 0.5 - t2 / 48.0 + t2 * t2 / 3840.0;
        *hc = 1.0 - t2 / 8.0 + t2 * t2 / 384.0;
    } else {
        *b = (1.0 - cos(t)) / (t * t);
        *c = (t - sin(t)) / (t * t * t);
        *hs = sin(0.5 * t) / t;
        *hc = cos(0.5 * t);
    }
}

/* P += v v^T (where P is given) over v's nonzero entries (a posture row touches one), c -= v r; returns the count
   of those entries, their indices in nz. */
static long KERNEL(wb_gram_row)(long nv, const double *restrict v, double r, long *restrict nz, double *restrict P,
                                double *restrict c) {
    long k = 0;
    for (long i = 0; i < nv; i++) nz[k] = i, k += v[i] != 0; /* no branch: a posture row's one entry is anywhere */
    for (long a = 0; a < k; a++) {
        double va = v[nz[a]];
        c[nz[a]] -= va * r;
        for (long e = 0; P && e < k; e++) P[nz[a] * nv + nz[e]] += va * v[nz[e]];
    }
    return k;
}

/* The rows of level k that are not a posture's (a frame's, the centre of mass's): the most columns its Hessian's
   low-rank part U can have (a posture row touches one variable: the diagonal part). */
static long KERNEL(wb_low_rank)(const long long *plan, long k) {
    long frames = plan[WB_FRAMES], levels = plan[WB_LEVELS], rank = 0;
    const long long *record = plan + WB_HEADER + 2 * frames + levels;
    for (long b = 0; b < plan[WB_BLOCKS]; b++, record += WB_RECORD)
        if (WB_IS_TASK(record[WB_TYPE]) && record[WB_TYPE] != WB_POSTURE_TASK && record[WB_LEVEL] == k)
            rank += record[WB_ROWS];
    return rank;
}

/* the most columns of U over the levels: what the scratch holds */
static long KERNEL(wb_most_rank)(const long long *plan) {
    long most = 0;
    for (long k = 0; k < plan[WB_LEVELS]; k++)
        most = KERNEL(wb_low_rank)(plan, k) > most ? KERNEL(wb_low_rank)(plan, k) : most;
    return most;
}

/* The pose error (position, then log(R_target R^T)) of a reached pose (4 x 4, row-major) to a target one. */
static void KERNEL(wb_pose_error)(const REAL *restrict target, const REAL *restrict pose, const double *settings,
                                  REAL *restrict error) {
    REAL tr[9], tp[3], r[9], p[3];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) tr[3 * i + j] = target[4 * i + j], r[3 * i + j] = pose[4 * i + j];
        tp[i] = target[4 * i + 3], p[i] = pose[4 * i + 3];
    }
    KERNEL(pose_error)(1, tr, tp, r, p, error, (REAL)settings[WB_SMALL_SIN_SQ], (REAL)settings[WB_NEAR_PI_COS]);
}

/* A relative frame task's pose T_root_frame = T_world_root^-1 T_world_frame (4 x 4, row-major) from the two frames'
   poses and, where `jacobian` is given, its Jacobian in root's axes (6 x nv) from theirs (world-aligned): with
   d = p_frame - p_root, [R_root^T (J_frame_lin - J_root_lin + d x J_root_ang); R_root^T (J_frame_ang - J_root_ang)]
   (kinematics.wholebody.tasks.relative_frame). */
static void KERNEL(wb_relative)(long nv, const REAL *restrict root, const REAL *restrict frame,
                                const REAL *restrict J_root, const REAL *restrict J_frame, REAL *restrict pose,
                                REAL *restrict jacobian) {
    REAL d[3] = {frame[3] - root[3], frame[7] - root[7], frame[11] - root[11]};
    for (int a = 0; a < 3; a++) {
        for (int c = 0; c < 3; c++)
            pose[4 * a + c] = root[a] * frame[c] + root[4 + a] * frame[4 + c] + root[8 + a] * frame[8 + c];
        pose[4 * a + 3] = root[a] * d[0] + root[4 + a] * d[1] + root[8 + a] * d[2];
    }
    pose[12] = pose[13] = pose[14] = 0, pose[15] = 1;
    if (!jacobian) return;
    for (long e = 0; e < nv; e++) {
        REAL w[3], lin[3], ang[3];
        for (int k = 0; k < 3; k++) w[k] = J_root[(3 + k) * nv + e];
        REAL turn[3] = {d[1] * w[2] - d[2] * w[1], d[2] * w[0] - d[0] * w[2], d[0] * w[1] - d[1] * w[0]};
        for (int k = 0; k < 3; k++) {
            lin[k] = J_frame[k * nv + e] - J_root[k * nv + e] + turn[k];
            ang[k] = J_frame[(3 + k) * nv + e] - w[k];
        }
        for (int a = 0; a < 3; a++) {
            jacobian[a * nv + e] = root[a] * lin[0] + root[4 + a] * lin[1] + root[8 + a] * lin[2];
            jacobian[(3 + a) * nv + e] = root[a] * ang[0] + root[4 + a] * ang[1] + root[8 + a] * ang[2];
        }
    }
}

typedef struct {
    REAL *nodes, *poses, *jacobians, *work, *com, *com_jacobian, *q;
    double *A, *b, *G, *h, *lb, *ub, *J, *r, *P, *p, *U, *c, *dq, *kept, *Ak, *bk, *sol, *w, *flags, *rows, *guess;
    double *previous;
    double *retry_problem, *interior, *retry_out;
    long *nonzero, *retry, *column; /* column: per level row, the one variable a posture's row touches (-1: more) */
} KERNEL(wb_scratch);

/* The variable each of the levels' rows touches where it touches one whatever the configuration (a posture's row:
   its joint's), -1 for the others, in wb_assemble's order (a row of zero cost left out): column (the levels' rows). */
static void KERNEL(wb_row_columns)(const long long *plan, const double *settings, long *column) {
    long frames = plan[WB_FRAMES], levels = plan[WB_LEVELS], base_nv = plan[WB_BASE_NV], fill[64];
    const long long *level_rows = plan + WB_HEADER + 2 * frames, *record = level_rows + levels;
    for (long k = 0, start = 0; k < levels && k < 64; k++) fill[k] = start, start += level_rows[k];
    for (long b = 0; b < plan[WB_BLOCKS]; b++, record += WB_RECORD) {
        long type = record[WB_TYPE], level = record[WB_LEVEL];
        if (!WB_IS_TASK(type)) continue;
        const double *param = settings + record[WB_PARAM];
        for (long j = 0; j < record[WB_COUNT]; j++)
            if (param[1 + j] > 0) column[fill[level]++] = type == WB_POSTURE_TASK ? base_nv + j : -1;
    }
}

/* Row i's level Hessian from its mk weighted rows J (and with r its linear term S->c = -J^T r): with rank < 0 the
   dense S->P = J^T J + damping_sq I, else diag(S->p) + S->U S->U^T: a row touching one variable adds to p, any other is
   a column of U (only a frame's or the centre of mass's row touches more than one, and the level has `rank` of those),
   the damping in p. column: the rows' wb_row_columns, whose rows of one variable skip the search for it. */
static void KERNEL(wb_level_hessian)(long nv, long mk, const double *J, const double *r, const long *column,
                                     double damping_sq, long rank, KERNEL(wb_scratch) *S, long i) {
    double *P = rank >= 0 ? 0 : S->P + i * nv * nv, *c = S->c + i * nv, *p = S->p + i * nv;
    double *U = S->U + i * nv * (rank > 0 ? rank : 0);
    for (long e = 0; e < nv; e++) c[e] = 0, p[e] = damping_sq;
    if (rank < 0) {
        for (long e = 0; e < nv * nv; e++) P[e] = 0;
        for (long j = 0; j < mk; j++) KERNEL(wb_gram_row)(nv, J + j * nv, r ? r[j] : 0, S->nonzero, P, c);
        for (long e = 0; e < nv; e++) P[e * nv + e] += damping_sq;
        return;
    }
    for (long e = 0; e < nv * rank; e++) U[e] = 0;
    for (long j = 0, u = 0; j < mk; j++) {
        const double *row = J + j * nv;
        if (column[j] >= 0) { /* a posture's row: its one variable */
            long e = column[j];
            c[e] -= row[e] * (r ? r[j] : 0);
            p[e] += row[e] * row[e];
            continue;
        }
        long touched = KERNEL(wb_gram_row)(nv, row, r ? r[j] : 0, S->nonzero, 0, c);
        if (touched == 1) p[S->nonzero[0]] += row[S->nonzero[0]] * row[S->nonzero[0]];
        if (touched > 1) {
            for (long e = 0; e < nv; e++) U[e * rank + u] = row[e];
            u++;
        }
    }
}

/* The tree's pass at the configurations of S->q (n rows): the nodes, the pose of every frame read and, where the plan
   reads it, the centre of mass; with `jacobians`, the frames' and the centre of mass's Jacobians too. */
static void KERNEL(wb_tree_pass)(long n, const long long *plan, const void *const *arrays, KERNEL(wb_scratch) *S,
                                 int jacobians) {
    long m = plan[WB_M], nq = plan[WB_NQ], nv = plan[WB_NV], base_nv = plan[WB_BASE_NV], frames = plan[WB_FRAMES];
    const long long *frame = plan + WB_HEADER;
    KERNEL(tree_nodes)(m, n, plan[WB_FLOATING], nq, S->q, arrays[WB_ORIGIN], arrays[WB_REVOLUTE],
                       arrays[WB_MULTIPLIER], arrays[WB_OFFSET], arrays[WB_COLUMN], arrays[WB_PARENT], S->nodes);
    for (long f = 0; f < frames; f++) {
        const void *const *chain = arrays + WB_ARRAYS + 5 * f;
        KERNEL(tree_frames)(1, n, 16, 16, 1, 4, S->nodes, chain[0], frame + 2 * f, S->poses + f * n * 16);
        if (jacobians)
            KERNEL(tree_frame_jacobian)(frame[2 * f + 1], n, frame[2 * f], nv, base_nv, 6 * nv, 1, S->nodes, chain[0],
                                        chain[1], chain[2], chain[3], chain[4], S->work, S->jacobians + f * n * 6 * nv);
    }
    if (plan[WB_COM])
        KERNEL(tree_com)(m, n, nv, base_nv, 3 * nv, 1, 3, 1, S->nodes, arrays[WB_MOMENT], arrays[WB_SUBTREE_MASS],
                         arrays[WB_REVOLUTE], arrays[WB_MULTIPLIER], arrays[WB_TOTAL], arrays[WB_DOF], arrays[WB_PARENT],
                         S->work, S->com, jacobians ? S->com_jacobian : 0);
}

/* The constraint rows and every level's weighted rows of row i (global row g) at the configuration of S->q; without
   `errors` the frames' pose errors are left out (0 in the rows' right-hand sides: the backward reads the matrices). */
static void KERNEL(wb_assemble)(long i, long g, long n, const long long *plan, const double *settings,
                                const void *const *arrays, const void *const *targets, const long long *strides,
                                KERNEL(wb_scratch) *S, long total_rows, int errors) {
    long nv = plan[WB_NV], nq = plan[WB_NQ], base_nv = plan[WB_BASE_NV], base_nq = plan[WB_FLOATING] ? 7 : 0;
    long me = plan[WB_ME], mi = plan[WB_MI], blocks = plan[WB_BLOCKS], frames = plan[WB_FRAMES];
    long levels = plan[WB_LEVELS];
    const long long *level_rows = plan + WB_HEADER + 2 * frames, *record = level_rows + levels;
    const REAL *q = S->q + i * nq;
    double *A = S->A + i * me * nv, *b = S->b + i * me, *G = S->G + i * mi * nv, *h = S->h + i * mi;
    double *lb = S->lb + i * nv, *ub = S->ub + i * nv, *J = S->J + i * total_rows * nv, *r = S->r + i * total_rows;
    long eq = 0, in = 0, level_start[64], level_fill[64];
    for (long k = 0, start = 0; k < levels && k < 64; k++) level_start[k] = start, level_fill[k] = 0, start += level_rows[k];
    for (long e = 0; e < me * nv; e++) A[e] = 0;
    for (long e = 0; e < mi * nv; e++) G[e] = 0;
    for (long e = 0; e < total_rows * nv; e++) J[e] = 0;
    for (long e = 0; e < nv; e++) lb[e] = -INFINITY, ub[e] = INFINITY;
    const REAL *com = S->com + i * 3, *com_jacobian = S->com_jacobian + i * 3 * nv;
    REAL relative_pose[16], relative_jacobian[6 * nv];
    for (long k = 0; k < blocks; k++, record += WB_RECORD) {
        long type = record[WB_TYPE], f = record[WB_FRAME], t = record[WB_TARGET], root = record[WB_ROOT];
        const double *param = settings + record[WB_PARAM];
        const REAL *target = t >= 0 ? (const REAL *)targets[t] + g * strides[t] : 0;
        const REAL *pose = f >= 0 ? S->poses + (f * n + i) * 16 : 0;
        const REAL *jacobian = f >= 0 ? S->jacobians + (f * n + i) * 6 * nv : 0;
        if (type == WB_RELATIVE_FRAME_TASK) {
            KERNEL(wb_relative)(nv, S->poses + (root * n + i) * 16, pose, S->jacobians + (root * n + i) * 6 * nv,
                                jacobian, relative_pose, relative_jacobian);
            pose = relative_pose, jacobian = relative_jacobian;
        }
        if (WB_IS_TASK(type)) {
            long level = record[WB_LEVEL], first = record[WB_FIRST], count = record[WB_COUNT];
            REAL error[6] = {0, 0, 0, 0, 0, 0};
            if (WB_IS_POSE_TASK(type) && errors) KERNEL(wb_pose_error)(target, pose, settings, error);
            if (type == WB_COM_TASK)
                for (int a = 0; a < 3; a++) error[a] = target[a] - com[a];
            double gain = param[0];
            for (long j = 0; j < count; j++) {
                double cost = param[1 + j];
                if (!(cost > 0)) continue; /* a row of zero cost asks nothing */
                long row = level_start[level] + level_fill[level]++, src = first + j;
                double *Jrow = J + row * nv;
                if (type == WB_POSTURE_TASK) {
                    Jrow[base_nv + j] = cost;
                    r[row] = gain * cost * (double)(REAL)(target[j] - q[base_nq + j]);
                } else {
                    const REAL *from = WB_IS_POSE_TASK(type) ? jacobian + src * nv : com_jacobian + src * nv;
                    for (long e = 0; e < nv; e++) Jrow[e] = cost * (double)from[e];
                    r[row] = gain * cost * (double)error[src];
                }
            }
        } else if (type == WB_CONTACT) {
            REAL error[6] = {0, 0, 0, 0, 0, 0};
            if (errors) KERNEL(wb_pose_error)(target, pose, settings, error);
            for (int a = 0; a < 6; a++, eq++) {
                for (long e = 0; e < nv; e++) A[eq * nv + e] = (double)jacobian[a * nv + e];
                b[eq] = (double)error[a];
            }
        } else if (type == WB_SUPPORT_POLYGON) {
            const REAL *normal = (const REAL *)targets[t] + g * strides[t];
            const REAL *offset = (const REAL *)targets[t + 1] + g * strides[t + 1];
            const unsigned char *edge = (const unsigned char *)targets[t + 2] + g * strides[t + 2];
            for (long j = 0; j < record[WB_ROWS]; j++, in++) {
                if (!edge[j]) { h[in] = WB_INACTIVE; continue; }
                REAL nx = normal[2 * j], ny = normal[2 * j + 1];
                for (long e = 0; e < nv; e++) G[in * nv + e] = (double)(REAL)(nx * com_jacobian[e] + ny * com_jacobian[nv + e]);
                h[in] = (double)(REAL)(offset[j] - (REAL)param[0] - (nx * com[0] + ny * com[1]));
            }
        } else if (type == WB_CONFIGURATION_LIMIT) {
            const REAL *lower = arrays[WB_LOWER], *upper = arrays[WB_UPPER];
            REAL gain = (REAL)param[0];
            for (long j = 0; j < nv - base_nv; j++) {
                double low = (double)(REAL)(gain * (lower[j] - q[base_nq + j]));
                double high = (double)(REAL)(gain * (upper[j] - q[base_nq + j]));
                lb[base_nv + j] = lb[base_nv + j] > low ? lb[base_nv + j] : low;
                ub[base_nv + j] = ub[base_nv + j] < high ? ub[base_nv + j] : high;
            }
        } else if (type == WB_STEP_LIMIT) {
            for (long e = 0; e < nv; e++) {
                double limit = (double)(REAL)param[e];
                lb[e] = lb[e] > -limit ? lb[e] : -limit;
                ub[e] = ub[e] < limit ? ub[e] : limit;
            }
        }
    }
}

/* The scratch of n rows: counts of REAL, double and long values (about 70 KB a row for the G1). */
static void KERNEL(wb_sizes)(const long long *plan, long n, size_t *reals, size_t *doubles, size_t *longs) {
    long m = plan[WB_M], nq = plan[WB_NQ], nv = plan[WB_NV], levels = plan[WB_LEVELS], frames = plan[WB_FRAMES];
    long me = plan[WB_ME], mi = plan[WB_MI], F = mi + 2 * nv, total_rows = 0;
    const long long *level_rows = plan + WB_HEADER + 2 * frames;
    for (long k = 0; k < levels; k++) total_rows += level_rows[k];
    long most_eq = me + total_rows, N = nv + most_eq + mi, rank = KERNEL(wb_most_rank)(plan);
    *reals = (size_t)(m + 1) * 12 * n + (size_t)frames * n * (16 + 6 * nv) + (size_t)n * (3 + 3 * nv + nq) +
             (size_t)(6 * nv + 3 * nv + 3 * (m + 1) + 30) * WB_TREE_TILE;
    size_t problem = (size_t)nv * nv + nv + (size_t)most_eq * nv + most_eq + (size_t)mi * nv + mi + 2 * nv
                     + (size_t)nv * (1 + rank);
    size_t per_row = (size_t)me * nv + me + (size_t)mi * nv + mi + 2 * nv /* A, b, G, h, lb, ub */
                     + (size_t)total_rows * (nv + 2) + (size_t)nv * nv + 2 * nv  /* J, r, kept, P, c, dq */
                     + (size_t)nv * (1 + rank)                                   /* p, U */
                     + (size_t)most_eq * (nv + 1) + N + nv + 2 * F + 4          /* Ak, bk, sol, w, flags, previous, rows */
                     + 2 * mi + 4 * nv + problem                                /* guess, the rows left */
                     + nv + most_eq + 2 * mi + 4 * nv + N + nv + F + 4;         /* their interior point and polish */
    *doubles = (size_t)n * per_row;
    *longs = (size_t)nv + n + 1 + total_rows;
}

/* The scratch of n rows laid out in the blocks wb_sizes counts; returns the doubles' end (what follows is the
   caller's). */
static double *KERNEL(wb_layout)(long n, const long long *plan, REAL *real_block, double *block, long *longs,
                                 KERNEL(wb_scratch) *S) {
    long m = plan[WB_M], nq = plan[WB_NQ], nv = plan[WB_NV], levels = plan[WB_LEVELS], frames = plan[WB_FRAMES];
    long me = plan[WB_ME], mi = plan[WB_MI], F = mi + 2 * nv, total_rows = 0;
    const long long *level_rows = plan + WB_HEADER + 2 * frames;
    for (long k = 0; k < levels; k++) total_rows += level_rows[k];
    long most_eq = me + total_rows; /* the last level's equalities: the constraints' and every level's above */
    long N = nv + most_eq + mi, most_rank = KERNEL(wb_most_rank)(plan);
    size_t problem = (size_t)nv * nv + nv + (size_t)most_eq * nv + most_eq + (size_t)mi * nv + mi + 2 * nv
                     + (size_t)nv * (1 + most_rank);
    REAL *at = real_block;
    S->nodes = at, at += (m + 1) * 12 * n;
    S->poses = at, at += frames * n * 16;
    S->jacobians = at, at += frames * n * 6 * nv;
    S->com = at, at += 3 * n;
    S->com_jacobian = at, at += 3 * nv * n;
    S->q = at, at += nq * n;
    S->work = at;
    double *d = block;
    S->A = d, d += n * me * nv;
    S->b = d, d += n * me;
    S->G = d, d += n * mi * nv;
    S->h = d, d += n * mi;
    S->lb = d, d += n * nv;
    S->ub = d, d += n * nv;
    S->J = d, d += n * total_rows * nv;
    S->r = d, d += n * total_rows;
    S->P = d, d += n * nv * nv;
    S->p = d, d += n * nv;
    S->U = d, d += n * nv * most_rank;
    S->c = d, d += n * nv;
    S->dq = d, d += n * nv;
    S->kept = d, d += n * total_rows;
    S->Ak = d, d += n * most_eq * nv;
    S->bk = d, d += n * most_eq;
    S->sol = d, d += n * N;
    S->w = d, d += n * nv;
    S->flags = d, d += n * F;
    S->previous = d, d += n * F;
    S->rows = d, d += n * 4;
    S->guess = d, d += n * (2 * mi + 4 * nv);
    S->retry_problem = d, d += n * problem;
    S->interior = d, d += n * (nv + most_eq + 2 * mi + 4 * nv);
    S->retry_out = d, d += n * (N + nv + F + 4);
    S->nonzero = longs, S->retry = longs + nv, S->column = S->retry + n + 1;
    return d;
}

/* The batch in chunks of WB_CHUNK rows, each thread taking the next chunk when it is done with its last: the rows are
   independent, every step of theirs included, so a chunk's scratch (taken once per thread) bounds the memory whatever
   the batch and stays in cache between its steps, and a thread slowed by another process on its core takes fewer
   chunks instead of holding the others up. `run` is the work on a chunk: the forward's steps (wholebody_step.c) or one
   step's backward (wholebody_backward.c, with `extra_doubles` more doubles per row of scratch). Returns 0, or -1 where
   a thread could not allocate its scratch or a chunk failed. */
typedef struct {
    long steps;
    const long long *plan;
    const double *settings;
    const void *const *arrays, *const *targets;
    const long long *strides;
    const REAL *q;
    REAL *q_next, *dq, *residuals, *violations;
    signed char *status, *active_bounds;
    unsigned char *active_in;
    double *saved;
    /* the backward's */
    const double *saved_in;
    const signed char *status_in;
    const REAL *dq_in, *grad_q_next, *grad_dq;
    void *const *grad_targets;
    const long long *target_sizes;
    REAL *grad_q;
} KERNEL(wb_job);

typedef long (*KERNEL(wb_runner))(long lo, long hi, const KERNEL(wb_job) *job, REAL *real_block, double *block,
                                   long *long_block);

/* One thread's part of wb_in_chunks: in its own scratch, the next chunk of `chunks` (taken from *next) until none is
   left; *failed set where the scratch could not be had or a chunk failed. */
static void KERNEL(wb_chunks_worker)(long n, long chunks, long *next, long *failed, const KERNEL(wb_job) *job,
                                     size_t reals, size_t doubles, size_t longs, KERNEL(wb_runner) run) {
    REAL *real_block = malloc(sizeof(REAL) * reals);
    double *block = malloc(sizeof(double) * doubles);
    long *long_block = malloc(sizeof(long) * longs);
    if (!real_block || !block || !long_block) {
        ATOMIC_WRITE *failed = 1;
    } else {
        for (;;) {
            long chunk;
#ifdef _OPENMP
#pragma omp atomic capture
#endif
            chunk = (*next)++;
            if (chunk >= chunks) break;
            long lo = chunk * WB_CHUNK, hi = lo + WB_CHUNK < n ? lo + WB_CHUNK : n;
            if (run(lo, hi, job, real_block, block, long_block) < 0) {
                ATOMIC_WRITE *failed = 1;
            }
        }
    }
    free(real_block), free(block), free(long_block);
}

/* The batch's chunks of WB_CHUNK rows to `threads` threads, each taking the next chunk when done; a team of one runs on
   the caller's thread, outside any parallel region (ROWS_IN_PARALLEL's note). -1 where any chunk failed. */
static long KERNEL(wb_in_chunks)(long n, long threads, const KERNEL(wb_job) *job, size_t extra_doubles,
                                 KERNEL(wb_runner) run) {
    const long long *plan = job->plan;
    long chunks = (n + WB_CHUNK - 1) / WB_CHUNK, next = 0, failed = 0, rows = n < WB_CHUNK ? n : WB_CHUNK;
    long team = threads < chunks ? threads : chunks;
    size_t reals, doubles, longs;
    KERNEL(wb_sizes)(plan, rows, &reals, &doubles, &longs);
    doubles += (size_t)rows * extra_doubles;
#ifdef _OPENMP
    if (team > 1) {
#pragma omp parallel num_threads(team)
        KERNEL(wb_chunks_worker)(n, chunks, &next, &failed, job, reals, doubles, longs, run);
        return failed ? -1 : 0;
    }
#endif
    (void)team; /* without OpenMP: one thread */
    KERNEL(wb_chunks_worker)(n, chunks, &next, &failed, job, reals, doubles, longs, run);
    return failed ? -1 : 0;
}

