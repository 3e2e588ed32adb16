/* solve_qp's active-set polish and status tests (kinematics.qp.kernels._solve) and its backward, the adjoint solve of the
   final active set (kinematics.qp.gradient), which shares the polish's factorisations. Contraction ON
   (fp-contract=fast) for this unit's kernels. */
#ifndef REAL
#define KINEMATICS_UNIT "qp_active_set.c"
#include "per_type.h"
#else

#if defined(__GNUC__) && !defined(__clang__)
/* solve_qp's kernels: a product and a sum fused into one FMA where the target has it (the x86-64-v3 clone), in this
   unit only (qp_ipm.c does the same). The chain, IK, tree and hull units keep ISO rounding, so their results
   equal the torch ops' bit for bit where the tests ask it. */
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
#endif
/* solve_qp's active-set steps (kinematics.qp.kernels._polish_reference: the same guesses, rules and tests), from the
   guess (z, s, zu, su, zl, sl) (the interior point's, or a given active set's), one row at a time, batch-first like
   qp_ipm. A row stops once its active set repeats (every later step would repeat the last). Each active-set system
   is solved on its free variables F (a variable fixed at a bound is x_i = c_i exactly, its terms moved to the
   right-hand sides), in its symmetric form: with C the equality rows and the active inequality rows,

       [P_FF + elastic I   C_F^T] [x_F]   [-q_F - P_FX c_X]     (elastic: D = elastic on every row; the original
       [C_F               -D    ] [nu ] = [ r - C_X c_X   ]      system: D = 0, no prox)

   by a Cholesky factor of P_FF + elastic I and one of the Schur complement C_F (P_FF + elastic I)^-1 C_F^T + D;
   where either has a pivot too small to trust (a semidefinite P, dependent rows), by an LU factorisation with
   partial pivoting of the whole matrix. The factor of P_FF + elastic I and the equality rows' part of the Schur
   complement are computed again only when the fixed variables change. The refinements to the original system
   reuse the factors. A row's systems are first the original ones (D = 0, no prox), solved once without
   refinement, while their factors' pivots pass QP_AS_IS; from the first that does not, the elastic ones. Outputs:
   sol (nb, n + me + mi) = [x; y; z], w (nb, n) signed bound multipliers, flags (nb, mi + 2 n) = active
   inequalities, fixed at ub, fixed at lb (1 / 0), rows (nb, 4) = status, primal residual, dual residual, whether
   the original system's solution was kept (1) or the elastic one (0). params = (elastic, tolerance, infeasibility
   tolerance). */
static QP_INLINE REAL KERNEL(qp_dot)(const REAL *restrict a, const REAL *restrict b, long len) {
    /* four partial sums: independent chains instead of one that waits on every add */
    REAL s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    long k = 0;
    for (; k + 4 <= len; k += 4) {
        s0 += a[k] * b[k];
        s1 += a[k + 1] * b[k + 1];
        s2 += a[k + 2] * b[k + 2];
        s3 += a[k + 3] * b[k + 3];
    }
    for (; k < len; k++) s0 += a[k] * b[k];
    return (s0 + s1) + (s2 + s3);
}

/* out[k] += sum over a < rows of R_a[k] w[a] (k < len), R_a = R + (map ? map[a] : a) * stride: the rows in order, four
   per pass over out (the same sums in the same order as one row at a time, with a quarter of out's loads and stores) */
static QP_INLINE void KERNEL(qp_rows_combination)(const REAL *restrict R, const long *restrict map, long rows, long len,
                                                  long stride, const REAL *restrict w, REAL *restrict out) {
    long a = 0;
    for (; a + 4 <= rows; a += 4) {
        const REAL *restrict r0 = R + (map ? map[a] : a) * stride, *restrict r1 = R + (map ? map[a + 1] : a + 1) * stride;
        const REAL *restrict r2 = R + (map ? map[a + 2] : a + 2) * stride;
        const REAL *restrict r3 = R + (map ? map[a + 3] : a + 3) * stride;
        const REAL w0 = w[a], w1 = w[a + 1], w2 = w[a + 2], w3 = w[a + 3];
        IVDEP for (long k = 0; k < len; k++) out[k] = (((out[k] + r0[k] * w0) + r1[k] * w1) + r2[k] * w2) + r3[k] * w3;
    }
    for (; a < rows; a++) {
        const REAL *restrict ra = R + (map ? map[a] : a) * stride, wa = w[a];
        IVDEP for (long k = 0; k < len; k++) out[k] += ra[k] * wa;
    }
}

static QP_INLINE void KERNEL(qp_lower_solve)(const REAL *restrict L, REAL *restrict v, long n) { /* v <- L^-1 v */
    for (long i = 0; i < n; i++) v[i] = (v[i] - KERNEL(qp_dot)(L + i * n, v, i)) / L[i * n + i];
}

/* columns c0 .. c1 - 1 of V (n x stride, row-major) <- L^-1 of themselves: every column at once, row by row */
static QP_INLINE void KERNEL(qp_lower_solve_columns)(const REAL *restrict L, REAL *restrict V, long n, long stride, long c0,
                                           long c1) {
    for (long i = 0; i < n; i++) {
        REAL *restrict vi = V + i * stride;
        for (long k = 0; k < i; k++) {
            const REAL lik = L[i * n + k], *restrict vk = V + k * stride;
            if (lik != 0) IVDEP for (long c = c0; c < c1; c++) vi[c] -= lik * vk[c];
        }
        const REAL d = L[i * n + i];
        const REAL inv = 1 / d; /* one division per row, a product per column */
        IVDEP for (long c = c0; c < c1; c++) vi[c] *= inv;
    }
}

/* The sums of rows a0 .. a0 + ROWS - 1 by columns b0 .. b0 + COLS - 1 of V^T V (V n x stride, row-major) into out
   (ROWS x COLS), each one's terms added in V's row order, first to last (a sum's bits do not depend on the block it is
   in); the block's ROWS x COLS sums stay in registers over V's rows. */
#define QP_GRAM_BLOCK(ROWS, COLS)                                                                                    \
    static QP_INLINE void KERNEL(qp_gram_block_##ROWS##x##COLS)(const REAL *restrict V, long n, long stride, long a0, \
                                                                long b0, REAL *restrict out) {                     \
        REAL sum[ROWS][COLS] = {{0}};                                                                              \
        for (long i = 0; i < n; i++) {                                                                             \
            const REAL *restrict vi = V + i * stride;                                                              \
            for (int ra = 0; ra < ROWS; ra++)                                                                      \
                for (int c = 0; c < COLS; c++) sum[ra][c] += vi[a0 + ra] * vi[b0 + c];                             \
        }                                                                                                          \
        for (int ra = 0; ra < ROWS; ra++)                                                                          \
            for (int c = 0; c < COLS; c++) out[ra * COLS + c] = sum[ra][c];                                        \
    }
QP_GRAM_BLOCK(4, 8)
QP_GRAM_BLOCK(4, 4)
QP_GRAM_BLOCK(1, 8)
QP_GRAM_BLOCK(1, 4)
QP_GRAM_BLOCK(1, 1)
#undef QP_GRAM_BLOCK

/* rows r0 .. r1 - 1 of M (m x m, lower triangle, row-major) <- those of V^T V, V n x stride (its first r1 columns
   read): by blocks of four rows (one where there are fewer) and eight columns (four, or one, where there are fewer),
   the last block of each overlapping the one before rather than reading past row or column r1 - 1; an entry computed
   twice is the same sum both times */
static QP_INLINE void KERNEL(qp_gram_rows)(const REAL *restrict V, REAL *restrict M, long n, long stride, long m, long r0,
                                           long r1) {
    const long rows = r1 - r0 >= 4 ? 4 : 1, cols = r1 >= 8 ? 8 : (r1 >= 4 ? 4 : 1);
    REAL block[32];
    for (long a = r0; a < r1;) {
        const long a0 = a + rows <= r1 ? a : r1 - rows, end = a0 + rows; /* columns 0 .. end - 1: to the diagonal */
        for (long b = 0; b < end;) {
            const long b0 = b + cols <= r1 ? b : r1 - cols;
            if (rows == 4) /* then r1 >= 4: columns by eight or four */
                cols == 8 ? KERNEL(qp_gram_block_4x8)(V, n, stride, a0, b0, block)
                          : KERNEL(qp_gram_block_4x4)(V, n, stride, a0, b0, block);
            else
                cols == 8   ? KERNEL(qp_gram_block_1x8)(V, n, stride, a0, b0, block)
                : cols == 4 ? KERNEL(qp_gram_block_1x4)(V, n, stride, a0, b0, block)
                            : KERNEL(qp_gram_block_1x1)(V, n, stride, a0, b0, block);
            for (long ra = 0; ra < rows; ra++)
                for (long c = 0; c < cols && b0 + c <= a0 + ra; c++) M[(a0 + ra) * m + b0 + c] = block[ra * cols + c];
            b = b0 + cols;
        }
        a = end;
    }
}

static QP_INLINE void KERNEL(qp_upper_solve)(const REAL *restrict L, REAL *restrict v, long n) { /* v <- L^-T v */
    for (long i = n - 1; i >= 0; i--) {
        REAL t = v[i] / L[i * n + i];
        v[i] = t;
        for (long k = 0; k < i; k++) v[k] -= L[i * n + k] * t;
    }
}

/* v <- L^-1 v and then v <- L^-T v for L (n x n, lower, row-major) with its diagonal's reciprocals inv: both column by
   column (each solved entry's multiples taken off the entries after it at once), so that a row's wait on the one
   before is a product and an FMA, not a division and a dot product's sum */
static QP_INLINE void KERNEL(qp_lower_upper_solve)(const REAL *restrict L, const REAL *restrict inv, REAL *restrict v,
                                                   long n) {
    for (long j = 0; j < n; j++) {
        const REAL vj = v[j] *= inv[j];
        for (long i = j + 1; i < n; i++) v[i] -= L[i * n + j] * vj;
    }
    for (long i = n - 1; i >= 0; i--) {
        const REAL t = v[i] *= inv[i];
        for (long k = 0; k < i; k++) v[k] -= L[i * n + k] * t;
    }
}

static QP_INLINE REAL KERNEL(qp_largest_diagonal)(const REAL *restrict L, long n, long lo, long hi) {
    REAL big = 0;
    for (long i = lo; i < hi; i++) big = FABS(L[i * n + i]) > big ? FABS(L[i * n + i]) : big;
    return big;
}

static QP_INLINE int KERNEL(qp_cholesky_strict)(REAL *restrict L, REAL *restrict col, long n, REAL rel, long from) {
    /* in place, right-looking (the updates are contiguous axpys that vectorise), lower triangle, row-major; col is
       n values of scratch. 0 (L half-written) when a pivot is <= rel (1 + the largest diagonal entry); from > 0:
       the pivots from `from` on are tested against the largest diagonal entry of the trailing block as it is when
       they are reached (the Schur complement of the leading block), the leading ones against the leading block's */
    REAL floor = rel * (1 + KERNEL(qp_largest_diagonal)(L, n, 0, from > 0 ? from : n));
    for (long j = 0; j < n; j++) {
        if (j == from && from > 0) floor = rel * (1 + KERNEL(qp_largest_diagonal)(L, n, from, n));
        REAL d = L[j * n + j];
        if (!(d > floor)) return 0;
        d = SQRT(d);
        L[j * n + j] = d;
        const REAL inv = 1 / d; /* one division per pivot, a product per entry */
        for (long i = j + 1; i < n; i++) col[i] = L[i * n + j] *= inv;
        for (long i = j + 1; i < n; i++) {
            REAL lij = col[i], *restrict row = L + i * n;
            if (lij != 0) IVDEP for (long k = j + 1; k <= i; k++) row[k] -= lij * col[k]; /* sparse P: skipped */
        }
    }
    return 1;
}

static void KERNEL(qp_lu)(REAL *restrict K, long *restrict piv, long N) { /* in place, partial pivoting */
    for (long j = 0; j < N; j++) {
        long p = j;
        REAL best = FABS(K[j * N + j]);
        for (long i = j + 1; i < N; i++)
            if (FABS(K[i * N + j]) > best) {
                best = FABS(K[i * N + j]);
                p = i;
            }
        piv[j] = p;
        if (p != j)
            for (long k = 0; k < N; k++) {
                REAL t = K[j * N + k];
                K[j * N + k] = K[p * N + k];
                K[p * N + k] = t;
            }
        REAL inv = 1 / K[j * N + j]; /* a singular system gives inf / nan: the KKT test then fails the row */
        const REAL *restrict rj = K + j * N;
        for (long i = j + 1; i < N; i++) {
            REAL l = K[i * N + j] *= inv, *restrict ri = K + i * N;
            if (l != 0) IVDEP for (long k = j + 1; k < N; k++) ri[k] -= l * rj[k];
        }
    }
}

static void KERNEL(qp_lu_solve)(const REAL *restrict K, const long *restrict piv, REAL *restrict v, long N) {
    for (long j = 0; j < N; j++) {
        REAL t = v[j];
        v[j] = v[piv[j]];
        v[piv[j]] = t;
    }
    for (long i = 0; i < N; i++) {
        REAL t = v[i];
        for (long k = 0; k < i; k++) t -= K[i * N + k] * v[k];
        v[i] = t;
    }
    for (long i = N - 1; i >= 0; i--) {
        REAL t = v[i];
        for (long k = i + 1; k < N; k++) t -= K[i * N + k] * v[k];
        v[i] = t / K[i * N + i];
    }
}

/* The elastic system's factors. With r = 0, L is the Cholesky factor of P_FF + elastic I and V = L^-1 C^T. With a
   structured Hessian P = diag(p) + U U^T (r > 0, the r columns of U), the system is solved as the equivalent one
   with r more rows U^T x - t = 0 of weight 1 and the diagonal p_F + elastic as its Hessian: L is that diagonal's
   square root (n values, `diagonal`), V = L^-1 [U_F, C^T] (U's r columns first) and M the Cholesky factor of V^T V + diag(1_r,
   D), of size r + m. */
typedef struct {
    long n, m, stride, dense, r, diagonal; /* diagonal: L is n values, the structured Hessian's (r >= 0) */
    REAL *L, *C, *V, *M, *K, *col, *M_inv; /* V: n x stride (column r + k: row k of C); M_inv: M's diagonal's
                                              reciprocals */
    long *piv;
} KERNEL(qp_factors);

/* [x; nu] <- the factored system's solution for the right-hand side [f; g] (x: n values, nu: m) */
static QP_INLINE void KERNEL(qp_factored_solve)(const KERNEL(qp_factors) *F, const REAL *f, const REAL *g, REAL *x, REAL *nu) {
    long n = F->n, m = F->m;
    if (F->dense) {
        for (long i = 0; i < n; i++) F->col[i] = f[i];
        for (long k = 0; k < m; k++) F->col[n + k] = g[k];
        KERNEL(qp_lu_solve)(F->K, F->piv, F->col, n + m);
        for (long i = 0; i < n; i++) x[i] = F->col[i];
        for (long k = 0; k < m; k++) nu[k] = F->col[n + k];
        return;
    }
    long r = F->r, s = r + m;
    REAL *restrict t = r ? F->col : nu; /* [t; nu]: the structured system's r more multipliers first */
    for (long i = 0; i < n; i++) x[i] = f[i];
    if (F->diagonal)
        for (long i = 0; i < n; i++) x[i] /= F->L[i]; /* u = L^-1 f */
    else
        KERNEL(qp_lower_solve)(F->L, x, n);
    for (long k = 0; k < r; k++) t[k] = 0; /* V^T u - [0; g] */
    for (long k = 0; k < m; k++) t[r + k] = -g[k];
    KERNEL(qp_rows_combination)(F->V, 0, n, s, F->stride, x, t);
    if (s) KERNEL(qp_lower_upper_solve)(F->M, F->M_inv, t, s);
    for (long i = 0; i < n; i++) x[i] -= KERNEL(qp_dot)(F->V + i * F->stride, t, s);
    for (long k = 0; k < m && r; k++) nu[k] = t[r + k];
    if (F->diagonal)
        for (long i = 0; i < n; i++) x[i] /= F->L[i];
    else
        KERNEL(qp_upper_solve)(F->L, x, n);
}

/* The polish's and the adjoint's shared pieces. An active set's system is solved on its free variables only: a
   variable fixed at a bound is eliminated (x_i = c_i exactly, its terms moved to the right-hand sides), which leaves
   P's free block, each constraint row's free part, and no unit rows. The factor of P_FF + elastic I (0 when a pivot is
   too small: the dense LU then), the equality rows' columns of V = L^-1 C^T and their Gram block M_eq (the first me
   rows of every active set's C) depend on the fixed variables only, the rest on the active inequalities too. */
static QP_INLINE int KERNEL(qp_factor_hessian)(KERNEL(qp_factors) *F, const REAL *restrict P, REAL d, REAL rel) {
    long n = F->n;
    for (long i = 0; i < n; i++) {
        for (long j = 0; j <= i; j++) F->L[i * n + j] = P[i * n + j];
        F->L[i * n + i] += d;
    }
    return KERNEL(qp_cholesky_strict)(F->L, F->col, n, rel, 0);
}

/* One thread's scratch for the polish and the adjoint: the factors' blocks in F, the vectors both use, the reduced
   problem (Pr, Ar, fr, c, free_), and `extra` more values for the caller at W->extra. Returns 0 (nothing held) where
   it cannot be allocated. */
typedef struct {
    KERNEL(qp_factors) F;
    REAL *scratch, *rhs, *D, *nu, *res_g, *unit_nu, *sol_d, *sol, *sol_dr, *solr, *res_f, *dx, *M_eq, *P, *Pr, *Ar;
    REAL *fr, *c, *extra;
    long *kind, *free_, *all_;
} KERNEL(qp_workspace);

#define QP_UNIT_ROWS 4 /* the most fixed variables the polish keeps as unit rows of the whole system */
/* The pivot test of an active set's original system, relative to each factor's largest diagonal entry
   (kinematics.qp.kernels.AS_IS_PIVOT): above it, the elastic solution refined once is the original system's to about
   (elastic / pivot)^2, 1e-12 for elastic 1e-9, so solving the original system instead moves no answer by more */
#define QP_AS_IS 1e-3

static QP_INLINE int KERNEL(qp_workspace_take)(KERNEL(qp_workspace) *W, long n, long me, long mi, long r,
                                                long extra) {
    long mmax = me + mi + (n < QP_UNIT_ROWS ? n : QP_UNIT_ROWS), N = n + me + mi, Kmax = n + mmax + r;
    long smax = mmax + r, emax = me + r; /* the Schur complement's size, that of its equality block */
    long reals = 3 * n * n + mmax * n + smax * n + smax * smax + Kmax * Kmax + Kmax + 5 * mmax + 4 * N + 4 * n
                 + emax * emax + me * n + smax;
    REAL *scratch = malloc(sizeof(REAL) * (reals + extra));
    long *piv = malloc(sizeof(long) * Kmax), *kind = malloc(sizeof(long) * (mmax + 2 * n));
    if (scratch == 0 || piv == 0 || kind == 0) {
        free(scratch), free(piv), free(kind);
        return 0;
    }
    KERNEL(qp_factors) F = {n, 0, smax, 0, 0, 0, scratch, 0, 0, 0, 0, 0, 0, piv};
    F.C = F.L + n * n;
    F.V = F.C + mmax * n;
    F.M = F.V + smax * n;
    F.K = F.M + smax * smax;
    F.col = F.K + Kmax * Kmax;
    W->F = F, W->scratch = scratch, W->kind = kind, W->free_ = kind + mmax, W->all_ = W->free_ + n;
    for (long i = 0; i < n; i++) W->all_[i] = i;
    W->rhs = F.col + Kmax, W->D = W->rhs + mmax, W->nu = W->D + mmax, W->res_g = W->nu + mmax;
    W->unit_nu = W->res_g + mmax, W->sol_d = W->unit_nu + mmax, W->sol = W->sol_d + N, W->sol_dr = W->sol + N, W->solr = W->sol_dr + N;
    W->res_f = W->solr + N, W->dx = W->res_f + n, W->fr = W->dx + n, W->c = W->fr + n;
    W->M_eq = W->c + n, W->P = W->M_eq + emax * emax, W->Pr = W->P + n * n, W->Ar = W->Pr + n * n;
    W->F.M_inv = W->Ar + me * n, W->extra = W->F.M_inv + smax;
    return 1;
}

static QP_INLINE void KERNEL(qp_workspace_free)(KERNEL(qp_workspace) *W) {
    free(W->scratch), free(W->F.piv), free(W->kind);
}

/* row r's P, symmetrised ((P + P^T) / 2), into P. A P shared by every row (p_stride 0, a constant Hessian) is read
   once, at the first row (lo) a thread solves: nothing writes P after. */
static QP_INLINE void KERNEL(qp_row_hessian)(const REAL *restrict P_, long r, long lo, long p_stride, long n,
                                             REAL *restrict P) {
    if (p_stride == 0 && r > lo) return;
    for (long i = 0; i < n * n; i++) P[i] = P_[r * p_stride + i]; /* in order, then (P + P^T) / 2 in cache */
    for (long i = 0; i < n; i++)
        for (long j = 0; j < i; j++) P[i * n + j] = P[j * n + i] = (REAL)0.5 * (P[i * n + j] + P[j * n + i]);
}

/* The free variables of an active set (upper, lower: fixed at ub, at lb, n flags each): their indices first in
   free_ (returned: their count nf), the fixed ones' after them, and each fixed variable's value in c (a contradictory
   pair's midpoint; 0 where free, or where the bound is infinite, as kinematics.qp.kernels._kkt) */
static QP_INLINE long KERNEL(qp_free_variables)(long n, const REAL *restrict upper, const REAL *restrict lower,
                                                const REAL *restrict lb, const REAL *restrict ub, long *restrict free_,
                                                REAL *restrict c) {
    long nf = 0, fixed = n;
    for (long i = 0; i < n; i++) {
        int up = upper[i] > 0, lo = lower[i] > 0;
        REAL ubv = ub && isfinite(ub[i]) ? ub[i] : 0, lbv = lb && isfinite(lb[i]) ? lb[i] : 0;
        c[i] = up && lo ? (REAL)0.5 * (lbv + ubv) : (up ? ubv : (lo ? lbv : 0));
        if (up || lo) free_[--fixed] = i;
        else free_[nf++] = i;
    }
    return nf;
}

/* sum over the fixed variables (free_[nf .. n)) of row[i] c[i]: a row's terms that move to the right-hand side */
static QP_INLINE REAL KERNEL(qp_fixed_terms)(const REAL *restrict row, const long *restrict free_, long nf, long n,
                                             const REAL *restrict c) {
    REAL t = 0;
    for (long x = nf; x < n; x++) t += row[free_[x]] * c[free_[x]];
    return t;
}

/* A structured Hessian P = diag(p) + U U^T (U: n x r, row-major), or none (p = 0): what the polish is given */
typedef struct {
    const REAL *p, *U;
    long r;
} KERNEL(qp_structure);

/* P's entry (map[i], map[j]), P = diag(p) + U U^T, H's */
static QP_INLINE REAL KERNEL(qp_structured_entry)(const KERNEL(qp_structure) *H, const long *restrict map, long i,
                                                  long j) {
    return (i == j ? H->p[map[i]] : 0) + KERNEL(qp_dot)(H->U + map[i] * H->r, H->U + map[j] * H->r, H->r);
}

/* out[a] += sign (P x)[a] (sign +-1) over the system's count variables (x and out in their order): with a structured
   Hessian (H->p) P = diag(p) + U U^T on the variables map[0 .. count), in O(count r) (ux: r values of scratch), else
   the dense P (count x count) */
static QP_INLINE void KERNEL(qp_hessian_product)(const KERNEL(qp_structure) *H, const REAL *restrict P,
                                                 const long *restrict map, long count, const REAL *restrict x,
                                                 REAL sign, REAL *restrict out, REAL *restrict ux) {
    if (!H->p) {
        for (long i = 0; i < count; i++) {
            const REAL xi = sign * x[i], *restrict pi = P + i * count;
            IVDEP for (long j = 0; j < count; j++) out[j] += pi[j] * xi;
        }
        return;
    }
    long r = H->r;
    for (long k = 0; k < r; k++) ux[k] = 0;
    KERNEL(qp_rows_combination)(H->U, map, count, r, r, x, ux);
    for (long a = 0; a < count; a++) out[a] += sign * (H->p[map[a]] * x[a] + KERNEL(qp_dot)(H->U + map[a] * r, ux, r));
}

/* The reduced Hessian P_FF on the nf free variables free_ (P itself where every variable is free, else gathered
   into Pr_buf), F->n = nf, and the factor of P_FF + elastic I into F->L: the Cholesky factor, or with a structured
   Hessian (H->p) the square root of p_F + elastic (F->r = H->r, F->diagonal) where no p_F is too small; returns
   whether it factored */
static QP_INLINE int KERNEL(qp_reduce_hessian)(KERNEL(qp_factors) *F, const REAL *P, long n, const long *restrict free_,
                                               long nf, REAL *Pr_buf, const REAL **Pr, REAL d, REAL rel,
                                               const KERNEL(qp_structure) *H) {
    F->n = nf, F->r = 0, F->diagonal = 0;
    if (!H->p) {
        *Pr = P;
        if (nf < n) {
            for (long a = 0; a < nf; a++)
                for (long b = 0; b < nf; b++) Pr_buf[a * nf + b] = P[free_[a] * n + free_[b]];
            *Pr = Pr_buf;
        }
        return KERNEL(qp_factor_hessian)(F, *Pr, d, rel);
    }
    /* the Schur complement's condition grows as U's scale over p's: a p_F + elastic below 1e-6 (float: 1e-3) of P_FF's
       largest diagonal entry takes the Cholesky factor of P_FF + elastic I instead, as qp_polish does (P_FF built
       from p and U for it; *Pr = 0 otherwise: nothing reads P_FF). P_FF as it is (d = 0): a p_F below rel of it
       (P_FF's pivots are at least p_F's, so those that pass also pass P_FF's own test) */
    long r = H->r;
    REAL big = 0, floor = d == 0 ? rel : (REAL)(sizeof(REAL) == 4 ? 1e-3 : 1e-6);
    for (long a = 0; a < nf; a++) {
        const REAL *restrict ua = H->U + free_[a] * r, entry = FABS(H->p[free_[a]] + KERNEL(qp_dot)(ua, ua, r) + d);
        big = entry > big ? entry : big;
    }
    *Pr = 0;
    for (long a = 0; a < nf; a++) {
        REAL pivot = H->p[free_[a]] + d;
        if (!(pivot > floor * (1 + big))) {
            for (long i = 0; i < nf; i++)
                for (long j = 0; j < nf; j++) Pr_buf[i * nf + j] = KERNEL(qp_structured_entry)(H, free_, i, j);
            *Pr = Pr_buf;
            return KERNEL(qp_factor_hessian)(F, Pr_buf, d, rel);
        }
        F->L[a] = SQRT(pivot);
    }
    F->r = r, F->diagonal = 1;
    return 1;
}

/* The equality rows' free part A_F (A itself where every variable is free, else gathered into Ar_buf) and, where
   P_FF + elastic I factored, their columns of V and their Gram block M_eq (with a structured Hessian, U_F's r
   columns before them, and M_eq that of both, r + me square) */
static QP_INLINE void KERNEL(qp_reduce_equalities)(KERNEL(qp_factors) *F, const REAL *A, const REAL *U, long n,
                                                   long me, const long *restrict free_, REAL *Ar_buf, const REAL **Ar,
                                                   REAL *restrict M_eq, int factored) {
    long nf = F->n;
    *Ar = A;
    if (nf < n) {
        for (long k = 0; k < me; k++)
            for (long a = 0; a < nf; a++) Ar_buf[k * nf + a] = A[k * n + free_[a]];
        *Ar = Ar_buf;
    }
    long r = F->r, e = r + me;
    if (factored && e) {
        if (F->diagonal) { /* U_F's columns first, then A_F's, every column divided by L, V written row by row */
            for (long a = 0; a < nf; a++) {
                REAL *restrict va = F->V + a * F->stride;
                const REAL *restrict ua = r ? U + free_[a] * r : 0, *restrict column = *Ar + a, inv = 1 / F->L[a];
                for (long k = 0; k < r; k++) va[k] = ua[k] * inv;
                for (long k = 0; k < me; k++) va[r + k] = column[k * nf] * inv;
            }
        } else {
            for (long k = 0; k < me; k++) /* A_F read in order */
                for (long a = 0; a < nf; a++) F->V[a * F->stride + r + k] = (*Ar)[k * nf + a];
            KERNEL(qp_lower_solve_columns)(F->L, F->V, nf, F->stride, 0, me);
        }
        KERNEL(qp_gram_rows)(F->V, M_eq, nf, F->stride, e, 0, e);
        for (long k = 0; k < r; k++) M_eq[k * e + k] += 1; /* the rows U^T x - t = 0, of weight 1 */
    }
}

/* A system on the nf free variables free_: P_FF's factor (a P shared by every row, with every variable free: the
   thread's factor of it as it is (d = 0), kept in *full_factored, 1 / 0 whether it factored, -1 none), and A_F's
   columns of V and M_eq; returns whether P_FF + d I factored */
static QP_INLINE int KERNEL(qp_reduce_step)(KERNEL(qp_factors) *F, const REAL *P, const REAL *A, long n, long me,
                                            long p_stride, const long *restrict free_, long nf, REAL *Pr_buf,
                                            REAL *Ar_buf, const REAL **Pr, const REAL **Ar, REAL *restrict M_eq,
                                            REAL d, REAL rel, int *full_factored, const KERNEL(qp_structure) *H) {
    int factored;
    if (p_stride == 0 && nf == n && *full_factored >= 0 && d == 0)
        F->n = n, F->r = F->diagonal = 0, *Pr = P, factored = *full_factored;
    else {
        factored = KERNEL(qp_reduce_hessian)(F, P, n, free_, nf, Pr_buf, Pr, d, rel, H);
        *full_factored = p_stride == 0 && nf == n && d == 0 ? factored : -1;
    }
    KERNEL(qp_reduce_equalities)(F, A, H->U, n, me, free_, Ar_buf, Ar, M_eq, factored);
    return factored;
}

/* the objective's linear term on the system's F->n variables (map: their indices; those past F->n fixed at c):
   fr = -q_F - P_FX c_X */
static QP_INLINE void KERNEL(qp_linear_term)(const KERNEL(qp_factors) *F, const REAL *restrict P,
                                             const REAL *restrict q, long n, const long *restrict map,
                                             const REAL *restrict c, REAL *restrict fr,
                                             const KERNEL(qp_structure) *H, REAL *restrict ux) {
    if (!H->p) {
        for (long a = 0; a < F->n; a++) fr[a] = -q[map[a]] - KERNEL(qp_fixed_terms)(P + map[a] * n, map, F->n, n, c);
        return;
    }
    long r = H->r; /* P_FX = U_F U_X^T: the fixed variables' U^T c once */
    for (long k = 0; k < r; k++) ux[k] = 0;
    for (long x = F->n; x < n; x++) {
        const REAL cx = c[map[x]], *restrict ux_row = H->U + map[x] * r;
        for (long k = 0; k < r; k++) ux[k] += ux_row[k] * cx;
    }
    for (long a = 0; a < F->n; a++) fr[a] = -q[map[a]] - KERNEL(qp_dot)(H->U + map[a] * r, ux, r);
}

/* the reduced active set's rows into F->C (nf = F->n columns): the equalities, then the active inequalities; their
   right-hand sides rhs with the fixed variables' terms moved over (b - A c, h - G c; 0 without b / h), elastic
   weights D and kinds (slot k of [y; z]). F->m = their count. */
static QP_INLINE void KERNEL(qp_active_rows)(KERNEL(qp_factors) *F, long n, long me, long mi, REAL d,
                                             const REAL *restrict Ar, const REAL *restrict A, const REAL *restrict b,
                                             const REAL *restrict G, const REAL *restrict h, const REAL *restrict act,
                                             const long *restrict free_, const REAL *restrict c, REAL *restrict rhs,
                                             REAL *restrict D, long *restrict kind) {
    long nf = F->n, m = 0;
    for (long k = 0; k < me; k++, m++) {
        for (long a = 0; a < nf; a++) F->C[m * nf + a] = Ar[k * nf + a];
        rhs[m] = b ? b[k] - KERNEL(qp_fixed_terms)(A + k * n, free_, nf, n, c) : 0, D[m] = d, kind[m] = k;
    }
    for (long k = 0; k < mi; k++)
        if (act[k] > 0) {
            const REAL *restrict gk = G + k * n;
            for (long a = 0; a < nf; a++) F->C[m * nf + a] = gk[free_[a]];
            rhs[m] = h ? h[k] - KERNEL(qp_fixed_terms)(gk, free_, nf, n, c) : 0, D[m] = d, kind[m++] = me + k;
        }
    F->m = m;
}

/* the elastic system's factors for F's rows: the Cholesky factor of the Schur complement C (P + elastic I)^-1 C^T +
   D (its equality block M_eq computed before), else, where P + elastic I did not factor (factored == 0) or the Schur
   complement has a pivot too small to trust, one LU with partial pivoting of the whole matrix, or (dense == 0) none:
   returns whether it factored. P: P_FF, or 0 for the structured Hessian H's on the variables map */
static QP_INLINE int KERNEL(qp_factor_active)(KERNEL(qp_factors) *F, const REAL *restrict P, REAL d,
                                              const REAL *restrict D, const REAL *restrict M_eq, long me, int factored,
                                              REAL rel, int dense, const KERNEL(qp_structure) *H,
                                              const long *restrict map) {
    long n = F->n, m = F->m, stride = F->stride, r = F->r, s = r + m, e = r + me; /* s: the Schur complement's size */
    F->dense = !factored;
    if (!F->dense) {
        if (F->diagonal) /* the active inequalities' columns, divided by L */
            for (long i = 0; i < n; i++) {
                const REAL inv = 1 / F->L[i];
                for (long k = me; k < m; k++) F->V[i * stride + r + k] = F->C[k * n + i] * inv;
            }
        else {
            for (long i = 0; i < n; i++)
                for (long k = me; k < m; k++) F->V[i * stride + r + k] = F->C[k * n + i];
            KERNEL(qp_lower_solve_columns)(F->L, F->V, n, stride, me, m);
        }
        KERNEL(qp_gram_rows)(F->V, F->M, n, stride, s, e, s);
        for (long k = 0; k < e; k++)
            for (long l = 0; l <= k; l++) F->M[k * s + l] = M_eq[k * e + l];
        for (long k = 0; k < m; k++) F->M[(r + k) * s + r + k] += D[k];
        /* the original system's (d = 0): the constraints' block tested on its own scale, the Schur complement of the
           structured Hessian's r rows, as the dense P_FF's solve sees it */
        F->dense = s > 0 && !KERNEL(qp_cholesky_strict)(F->M, F->col, s, rel, d == 0 ? r : 0);
        for (long k = 0; k < s && !F->dense; k++) F->M_inv[k] = 1 / F->M[k * s + k];
    }
    if (F->dense && !dense) return 0;
    if (F->dense) {
        long K = n + m;
        for (long i = 0; i < n; i++) {
            for (long j = 0; j < n; j++)
                F->K[i * K + j] = (P ? P[i * n + j] : KERNEL(qp_structured_entry)(H, map, i, j)) + (i == j ? d : 0);
            for (long k = 0; k < m; k++) F->K[i * K + n + k] = F->C[k * n + i];
        }
        for (long k = 0; k < m; k++) {
            for (long j = 0; j < n; j++) F->K[(n + k) * K + j] = F->C[k * n + j];
            for (long l = 0; l < m; l++) F->K[(n + k) * K + n + l] = k == l ? -D[k] : 0;
        }
        KERNEL(qp_lu)(F->K, F->piv, K);
    }
    return 1;
}

/* sol_d = the elastic system's solution [x; y; z] (N values, x the F->n variables) for the right-hand side [f; rhs],
   and sol = sol_d refined `refinements` times to the original system (D = 0, no prox) with the same factors: each
   time [f - P x - C^T nu; rhs - C x] solved and added. A unit row's multiplier (kind < 0) goes to unit_nu, by row. */
static QP_INLINE void KERNEL(qp_solve_refined)(const KERNEL(qp_factors) *F, const REAL *restrict P,
                                               const REAL *restrict f, const REAL *restrict rhs,
                                               const long *restrict kind, long refinements, long N,
                                               REAL *restrict sol_d, REAL *restrict sol, REAL *restrict unit_nu,
                                               REAL *restrict res_f, REAL *restrict res_g, REAL *restrict dx,
                                               REAL *restrict nu, const KERNEL(qp_structure) *H,
                                               const long *restrict map, REAL *restrict ux) {
    long n = F->n, m = F->m;
    KERNEL(qp_factored_solve)(F, f, rhs, dx, nu);
    for (long i = 0; i < N; i++) sol_d[i] = i < n ? dx[i] : 0;
    for (long k = 0; k < m; k++)
        if (kind[k] >= 0) sol_d[n + kind[k]] = nu[k];
        else unit_nu[k] = nu[k];
    for (long i = 0; i < N; i++) sol[i] = sol_d[i];
    for (long t = 0; t < refinements; t++) {
        for (long i = 0; i < n; i++) res_f[i] = f[i];
        KERNEL(qp_hessian_product)(H, P, map, n, sol, -1, res_f, ux); /* - P_FF x, map: F's variables */
        for (long k = 0; k < m; k++) {
            const REAL nk = kind[k] >= 0 ? sol[n + kind[k]] : unit_nu[k], *restrict ck = F->C + k * n;
            IVDEP for (long j = 0; j < n; j++) res_f[j] -= ck[j] * nk;
            res_g[k] = rhs[k] - KERNEL(qp_dot)(ck, sol, n);
        }
        KERNEL(qp_factored_solve)(F, res_f, res_g, dx, nu);
        for (long i = 0; i < n; i++) sol[i] += dx[i];
        for (long k = 0; k < m; k++)
            if (kind[k] >= 0) sol[n + kind[k]] += nu[k];
            else unit_nu[k] += nu[k];
    }
}

/* a reduced solution (nf free variables, then the multipliers: `rest` values) as the full one [x; y; z] (n + rest):
   the free variables where free_ says, the fixed ones at c */
static QP_INLINE void KERNEL(qp_expand)(long n, long nf, long rest, const long *restrict free_, const REAL *restrict c,
                                        const REAL *restrict reduced, REAL *restrict full) {
    for (long i = 0; i < n; i++) full[i] = c[i];
    for (long a = 0; a < nf; a++) full[free_[a]] = reduced[a];
    for (long k = 0; k < rest; k++) full[n + k] = reduced[nf + k];
}

static REAL KERNEL(qp_max)(REAL a, REAL b) { return b > a || b != b ? b : a; } /* nan wins */

static QP_INLINE void KERNEL(qp_polish_rows)(long lo, long hi, long n, long me, long mi, long steps, long refinements,
                                              long p_stride, long r_, const REAL *restrict p_, const REAL *restrict U_,
                                const REAL *restrict params, const REAL *restrict P_, const REAL *restrict q_,
                                const REAL *restrict A_, const REAL *restrict b_, const REAL *restrict G_,
                                const REAL *restrict h_, const REAL *restrict lb_, const REAL *restrict ub_,
                                const REAL *restrict z_, const REAL *restrict s_, const REAL *restrict zu_,
                                const REAL *restrict su_, const REAL *restrict zl_, const REAL *restrict sl_,
                                REAL *restrict sol_, REAL *restrict w_, REAL *restrict flags_, REAL *restrict rows_) {
    const REAL d = params[0], tol = params[1], inf_tol = params[2];
    const REAL rel = (REAL)(sizeof(REAL) == 4 ? 1e-5 : 1e-10), rel_as_is = (REAL)QP_AS_IS;
    long N = n + me + mi;
    KERNEL(qp_workspace) W;
    if (!KERNEL(qp_workspace_take)(&W, n, me, mi, p_ ? r_ : 0, 4 * n + mi + 1 + (p_ ? r_ : 0))) { /* out of memory: every row's status is -1 */
        for (long r = lo; r < hi; r++) rows_[r * 4] = -1;
        return;
    }
    KERNEL(qp_factors) F = W.F;
    REAL *rhs = W.rhs, *D = W.D, *nu = W.nu, *res_g = W.res_g, *sol_d = W.sol_d, *sol = W.sol;
    REAL *sol_dr = W.sol_dr, *solr = W.solr, *res_f = W.res_f, *dx = W.dx, *M_eq = W.M_eq, *Pr_buf = W.Pr;
    REAL *Ar_buf = W.Ar, *fr = W.fr, *c = W.c, *stat = W.extra, *w_pass = stat + n, *gx = w_pass + 2 * n;
    REAL *ux = W.extra + 4 * n + mi + 1; /* a structured Hessian's U^T x */
    const KERNEL(qp_structure) dense = {0, 0, 0};
    REAL *unit_nu = W.unit_nu;
    long *kind = W.kind, *free_ = W.free_, *all_ = W.all_;
    int factored = 0, full_factored = -1; /* full_factored: F.L holds the factor of a P shared by every row with
                                             every variable free (1: it factored, 0: it did not), or not (-1) */
    for (long r = lo; r < hi; r++) {
        const REAL *q = q_ + r * n, *A = A_ + r * me * n, *b = b_ + r * me;
        const REAL *G = G_ + r * mi * n, *h = h_ + r * mi, *lb = lb_ + r * n, *ub = ub_ + r * n;
        REAL *act = flags_ + r * (mi + 2 * n), *upper = act + mi, *lower = upper + n;
        /* the interior point's guess: a side is active where its multiplier exceeds its slack */
        for (long k = 0; k < mi; k++) act[k] = z_[r * mi + k] > s_[r * mi + k];
        for (long i = 0; i < n; i++) {
            REAL zu = zu_[r * n + i], su = su_[r * n + i], zl = zl_[r * n + i], sl = sl_[r * n + i];
            int contra = lb[i] > ub[i];
            upper[i] = (zu > su && zu >= zl) || contra;
            lower[i] = (zl > sl && zl > zu) || contra;
        }
        REAL scale_p = 0, scale_d = 0; /* the KKT test's scales; its tolerances also hold the active set still */
        for (long k = 0; k < me; k++) scale_p = KERNEL(qp_max)(scale_p, FABS(b[k]));
        for (long k = 0; k < mi; k++)
            if (isfinite(h[k])) scale_p = KERNEL(qp_max)(scale_p, FABS(h[k]));
        for (long i = 0; i < n; i++) scale_d = KERNEL(qp_max)(scale_d, FABS(q[i]));
        scale_p += 1, scale_d += 1;
        const REAL slack_p = tol * scale_p, slack_d = tol * scale_d;
        /* a structured Hessian's products and blocks go through p and U (no P) */
        const KERNEL(qp_structure) H = {p_ ? p_ + r * n : 0, p_ ? U_ + r * n * r_ : 0, r_};
        if (!H.p) KERNEL(qp_row_hessian)(P_, r, lo, p_stride, n, W.P);
        const REAL *P = H.p ? 0 : W.P;
        long nf = 0, units = 0; /* units: the fixed variables kept as exact unit rows of the whole system instead */
        int refixed = 1, whole = 0; /* refixed: the fixed variables changed; whole: F holds this row's factor of
                                       P + elastic I and its equalities' V columns and M_eq, every variable free */
        const REAL *Pr = P, *Ar = A;
        int stat_of_sol = 0; /* stat and gx hold those of the final sol (the last step's test, repeated below) */
        /* as_is: this row's systems are factored as they are (e = 0: no prox, D = 0) while their factors pass the
           pivot tests at rel_as_is, so one solve gives the original system's solution and no refinement is needed;
           from the first that fails (a semidefinite P_FF, dependent rows) they are the elastic ones (e = elastic),
           solved and refined */
        int as_is = 1;
        REAL e = 0, rel_e = rel_as_is;
#define QP_REDUCE_STEP()                                                                                               \
    factored = KERNEL(qp_reduce_step)(&F, P, A, n, me, p_stride, free_, nf, Pr_buf, Ar_buf, &Pr, &Ar, M_eq, e, rel_e,  \
                                      &full_factored, &H);                                                             \
    if (as_is && !factored) {                                                                                          \
        as_is = 0, e = d, rel_e = rel;                                                                                 \
        factored = KERNEL(qp_reduce_step)(&F, P, A, n, me, p_stride, free_, nf, Pr_buf, Ar_buf, &Pr, &Ar, M_eq, e,     \
                                          rel_e, &full_factored, &H);                                                  \
    }
        for (long step = 0; step < (steps > 1 ? steps : 1); step++) {
            if (refixed) {
                nf = KERNEL(qp_free_variables)(n, upper, lower, lb, ub, free_, c);
                if (whole && n - nf <= QP_UNIT_ROWS && !H.p) units = n - nf, F.n = n, Pr = P, Ar = A; /* at hand */
                else {
                    units = 0;
                    QP_REDUCE_STEP()
                    whole = nf == n && factored;
                }
                KERNEL(qp_linear_term)(&F, P, q, n, units ? all_ : free_, c, fr, &H, ux);
            }
            int solved = 0;
            if (units) { /* a few variables fixed where the whole system's factor is at hand: their unit rows (D = 0,
                            as exact as the elimination) in the Schur complement, cheaper than refactoring P_FF */
                KERNEL(qp_active_rows)(&F, n, me, mi, e, A, A, b, G, h, act, all_, c, rhs, D, kind);
                for (long x = nf; x < n; x++) {
                    long i = free_[x], m = F.m++;
                    for (long j = 0; j < n; j++) F.C[m * n + j] = j == i;
                    rhs[m] = c[i], D[m] = 0, kind[m] = -1;
                }
                solved = KERNEL(qp_factor_active)(&F, P, e, D, M_eq, me, factored, rel_e, 0, &dense, all_);
                if (solved) {
                    KERNEL(qp_solve_refined)(&F, P, fr, rhs, kind, as_is ? 0 : refinements, N, sol_d, sol, unit_nu,
                                             res_f, res_g, dx, nu, &dense, all_, ux);
                    for (long x = nf; x < n; x++) sol_d[free_[x]] = sol[free_[x]] = c[free_[x]];
                } else { /* a unit row dependent on the others: the free variables' system after all */
                    QP_REDUCE_STEP()
                    KERNEL(qp_linear_term)(&F, P, q, n, free_, c, fr, &H, ux);
                    units = whole = 0;
                }
            }
            if (!solved) {
                KERNEL(qp_active_rows)(&F, n, me, mi, e, Ar, A, b, G, h, act, free_, c, rhs, D, kind);
                if (as_is && !KERNEL(qp_factor_active)(&F, Pr, e, D, M_eq, me, factored, rel_e, 0, &H, free_)) {
                    as_is = 0, e = d, rel_e = rel; /* dependent rows: the elastic systems from here on */
                    QP_REDUCE_STEP()
                    whole = nf == n && factored;
                    KERNEL(qp_active_rows)(&F, n, me, mi, e, Ar, A, b, G, h, act, free_, c, rhs, D, kind);
                }
                if (!as_is) KERNEL(qp_factor_active)(&F, Pr, e, D, M_eq, me, factored, rel_e, 1, &H, free_);
                /* the original system's solution where it factored as it is, else the elastic solution and then
                   `refinements` steps toward the original system (D = 0, no prox) */
                KERNEL(qp_solve_refined)(&F, Pr, fr, rhs, kind, as_is ? 0 : refinements, nf + me + mi, sol_dr, solr,
                                         unit_nu, res_f, res_g, dx, nu, &H, free_, ux);
                KERNEL(qp_expand)(n, nf, me + mi, free_, c, sol_dr, sol_d);
                KERNEL(qp_expand)(n, nf, me + mi, free_, c, solr, sol);
            }
            if (step + 1 < steps) { /* the next guess, from the refined point where finite, else the elastic one */
                int good = 1;
                for (long i = 0; i < N; i++) good &= isfinite(sol[i]) != 0;
                const REAL *s = good ? sol : sol_d;
                for (long i = 0; i < n; i++) stat[i] = q[i];
                KERNEL(qp_hessian_product)(&H, P, all_, n, s, 1, stat, ux);
                KERNEL(qp_rows_combination)(A, 0, me, n, n, s + n, stat);
                KERNEL(qp_rows_combination)(G, 0, mi, n, n, s + n + me, stat);
                for (long k = 0; k < mi; k++) gx[k] = KERNEL(qp_dot)(G + k * n, s, n);
                /* an active row stays while its multiplier has the right sign, an inactive one enters when
                   violated; a fixed variable is released, never moved straight to the other bound; nothing
                   changes within the KKT test's tolerances */
                int changed = 0;
                for (long k = 0; k < mi; k++) {
                    REAL next = act[k] > 0 ? s[n + me + k] > -slack_d : gx[k] > h[k] + slack_p;
                    changed |= next != act[k];
                    act[k] = next;
                }
                refixed = 0;
                for (long i = 0; i < n; i++) {
                    int up = upper[i] > 0, lo = lower[i] > 0, contra = lb[i] > ub[i];
                    REAL w = up || lo ? -stat[i] : 0;
                    REAL next_up = (up ? w > -slack_d : (!lo && s[i] > ub[i] + slack_p)) || contra;
                    REAL next_lo = (lo ? w < slack_d : (!up && s[i] < lb[i] - slack_p)) || contra;
                    refixed |= next_up != upper[i] || next_lo != lower[i];
                    upper[i] = next_up, lower[i] = next_lo;
                }
                changed |= refixed;
                stat_of_sol = good && !changed;
                if (!changed) break; /* the same active set again: every later step would repeat this one */
            }
        }
        /* SOLVED when the refined (else the elastic) point passes the KKT test, as in kinematics.qp.kernels._solve */
        int ok[2] = {0, 0};
        REAL viol[2] = {0, 0}, dual[2] = {0, 0};
        for (int pass = 0; pass < 2 && !ok[0]; pass++) { /* pass 0: the refined point, pass 1: the elastic one
                                                            (needed only where the refined one fails) */
            const REAL *s = pass == 0 ? sol : sol_d;
            REAL *w = w_pass + pass * n, v = 0, sign = 0, st = 0;
            int finite = 1;
            for (long i = 0; i < N; i++) finite &= isfinite(s[i]) != 0;
            int reuse = pass == 0 && stat_of_sol; /* the same sums, already done */
            if (!reuse) {
                for (long i = 0; i < n; i++) stat[i] = q[i];
                KERNEL(qp_hessian_product)(&H, P, all_, n, s, 1, stat, ux);
                KERNEL(qp_rows_combination)(A, 0, me, n, n, s + n, stat);
                KERNEL(qp_rows_combination)(G, 0, mi, n, n, s + n + me, stat);
            }
            for (long k = 0; k < me; k++) v = KERNEL(qp_max)(v, FABS(KERNEL(qp_dot)(A + k * n, s, n) - b[k]));
            for (long k = 0; k < mi; k++) {
                const REAL zk = s[n + me + k], *restrict gk = G + k * n;
                const REAL t = (reuse ? gx[k] : KERNEL(qp_dot)(gk, s, n)) - h[k];
                v = KERNEL(qp_max)(v, t > 0 ? t : 0);
                sign = KERNEL(qp_max)(sign, zk < 0 ? -zk : 0);
            }
            for (long i = 0; i < n; i++) {
                int up = upper[i] > 0, lo = lower[i] > 0;
                w[i] = up || lo ? -stat[i] : 0;
                v = KERNEL(qp_max)(v, lb[i] - s[i] > 0 ? lb[i] - s[i] : 0);
                v = KERNEL(qp_max)(v, s[i] - ub[i] > 0 ? s[i] - ub[i] : 0);
                if (up && !lo) sign = KERNEL(qp_max)(sign, w[i] < 0 ? -w[i] : 0);
                if (lo && !up) sign = KERNEL(qp_max)(sign, w[i] > 0 ? w[i] : 0);
                st = KERNEL(qp_max)(st, FABS(stat[i] + w[i]));
            }
            ok[pass] = v <= tol * scale_p && sign <= tol * scale_d && st <= tol * scale_d && finite;
            viol[pass] = v, dual[pass] = st;
        }
        int exact = ok[0], kept = exact ? 0 : 1;
        const REAL *fin = exact ? sol : sol_d, *wk = w_pass + kept * n;
        REAL *out = sol_ + r * N, *w = w_ + r * n, *row = rows_ + r * 4;
        for (long i = 0; i < N; i++) out[i] = fin[i];
        for (long k = 0; k < mi; k++) out[n + me + k] = out[n + me + k] > 0 ? out[n + me + k] : 0;
        for (long i = 0; i < n; i++) { /* within-tolerance wrong signs clipped, as z >= 0 */
            int up = upper[i] > 0, lo = lower[i] > 0;
            w[i] = up && !lo ? (wk[i] > 0 ? wk[i] : 0) : (lo && !up ? (wk[i] < 0 ? wk[i] : 0) : wk[i]);
        }
        row[0] = ok[0] || ok[1] ? 0 : (viol[1] > inf_tol * scale_p ? 1 : 2);
        row[1] = viol[kept], row[2] = dual[kept], row[3] = exact;
    }
#undef QP_REDUCE_STEP
    KERNEL(qp_workspace_free)(&W);
}

DISPATCH void KERNEL(qp_polish)(long nb, long threads, long n, long me, long mi, long steps, long refinements, long p_stride,
                                const REAL *restrict params, const REAL *restrict P_, const REAL *restrict q_,
                                const REAL *restrict A_, const REAL *restrict b_, const REAL *restrict G_,
                                const REAL *restrict h_, const REAL *restrict lb_, const REAL *restrict ub_,
                                const REAL *restrict z_, const REAL *restrict s_, const REAL *restrict zu_,
                                const REAL *restrict su_, const REAL *restrict zl_, const REAL *restrict sl_,
                                REAL *restrict sol_, REAL *restrict w_, REAL *restrict flags_, REAL *restrict rows_) {
    ROWS_IN_PARALLEL(nb, threads, 16, 1, KERNEL(qp_polish_rows)(lo, hi, n, me, mi, steps, refinements, p_stride, 0, 0, 0,
                                                       params, P_, q_, A_, b_, G_, h_, lb_, ub_, z_, s_, zu_, su_, zl_,
                                                       sl_, sol_, w_, flags_, rows_));
}

/* qp_polish for a structured Hessian, each row's P = diag(p_) + U_ U_^T, p_ (nb, n) and U_ (nb, n, r): the active
   sets' systems are solved through the Schur complement of [U_F, C_F^T] (size r + m, no factor of P_FF), the cheaper
   one where r + m is well below n, and P's products in O(n r); the same solution as qp_polish's up to rounding. Where
   a p_F + elastic is too small a pivot for it, P_FF is built and factored as in qp_polish. */
DISPATCH void KERNEL(qp_polish_structured)(long nb, long threads, long n, long me, long mi, long steps,
                                           long refinements, long r, const REAL *restrict params,
                                           const REAL *restrict p_, const REAL *restrict U_,
                                           const REAL *restrict q_, const REAL *restrict A_, const REAL *restrict b_,
                                           const REAL *restrict G_, const REAL *restrict h_, const REAL *restrict lb_,
                                           const REAL *restrict ub_, const REAL *restrict z_, const REAL *restrict s_,
                                           const REAL *restrict zu_, const REAL *restrict su_, const REAL *restrict zl_,
                                           const REAL *restrict sl_, REAL *restrict sol_, REAL *restrict w_,
                                           REAL *restrict flags_, REAL *restrict rows_) {
    ROWS_IN_PARALLEL(nb, threads, 16, 1, KERNEL(qp_polish_rows)(lo, hi, n, me, mi, steps, refinements, n * n, r, p_, U_,
                                                       params, 0, q_, A_, b_, G_, h_, lb_, ub_, z_, s_, zu_, su_, zl_,
                                                       sl_, sol_, w_, flags_, rows_));
}

/* solve_qp's backward (kinematics.qp.gradient): per row, the adjoint system of the final active set (flags_ as
   qp_polish writes them) on its free variables F, in the symmetric form the polish solves,

       [P_FF + elastic I   C_F^T] [u ]   [g_F]
       [C_F               -D    ] [nu] = [0  ],

   refined `refinements` times to the original system (D = 0, no prox) on the rows whose original point was kept
   (exact_ > 0; there the original system itself, solved once, where its factors pass the polish's pivot tests,
   QP_AS_IS), the elastic system's solution on the others. Outputs, in the convention of the KKT matrix the
   gradient differentiates (kinematics.qp.kernels._kkt, whose rows x_i = c_i fix a variable exactly): lx (nb, n) = u on free
   variables and, on a fixed one, its row's multiplier g_i - (P u + A^T nu_y + G^T nu_z)_i; ls (nb, n) = lx weighted
   as that matrix weighs each stationarity row (1 free, 0 fixed); ly (nb, me), lz (nb, mi) (0 on inactive rows).
   params = (elastic). Returns 0, or -1 where its scratch could not be allocated. */
static QP_INLINE long KERNEL(qp_adjoint_rows)(long lo, long hi, long n, long me, long mi, long refinements,
                                              long p_stride, long r_, const REAL *restrict p_, const REAL *restrict U_,
                                 const REAL *restrict params,
                                 const REAL *restrict P_, const REAL *restrict A_, const REAL *restrict G_,
                                 const REAL *restrict flags_, const REAL *restrict exact_, const REAL *restrict g_,
                                 REAL *restrict ls_, REAL *restrict lx_, REAL *restrict ly_, REAL *restrict lz_) {
    const REAL d = params[0], rel = (REAL)(sizeof(REAL) == 4 ? 1e-5 : 1e-10), rel_as_is = (REAL)QP_AS_IS;
    KERNEL(qp_workspace) W;
    if (!KERNEL(qp_workspace_take)(&W, n, me, mi, p_ ? r_ : 0, p_ ? r_ : 0)) return -1; /* out of memory: -1 */
    KERNEL(qp_factors) F = W.F;
    REAL *rhs = W.rhs, *D = W.D, *nu = W.nu, *res_g = W.res_g, *sol_dr = W.sol_dr, *solr = W.solr, *sol = W.sol;
    REAL *res_f = W.res_f, *dx = W.dx, *M_eq = W.M_eq, *fr = W.fr, *c = W.c, *ux = W.extra;
    long *kind = W.kind, *free_ = W.free_;
    int full_factored = -1; /* as in qp_polish_rows */
    for (long r = lo; r < hi; r++) {
        const REAL *A = A_ + r * me * n, *G = G_ + r * mi * n, *act = flags_ + r * (mi + 2 * n), *g = g_ + r * n;
        /* a structured Hessian's products and blocks go through p and U (no P), as in qp_polish_rows */
        const KERNEL(qp_structure) H = {p_ ? p_ + r * n : 0, p_ ? U_ + r * n * r_ : 0, r_};
        if (!H.p) KERNEL(qp_row_hessian)(P_, r, lo, p_stride, n, W.P);
        const REAL *P = H.p ? 0 : W.P, *Pr = P, *Ar = A;
        long nf = KERNEL(qp_free_variables)(n, act + mi, act + mi + n, 0, 0, free_, c); /* c: 0, unused */
        /* the original system where the row's original point was kept: as it is where its factors pass the polish's
           pivot tests (one solve); else the elastic system, refined there */
        int exact = exact_[r] > 0, as_is = 0, factored = 0;
        if (exact) {
            factored = KERNEL(qp_reduce_step)(&F, P, A, n, me, p_stride, free_, nf, W.Pr, W.Ar, &Pr, &Ar, M_eq, 0,
                                              rel_as_is, &full_factored, &H);
            if (factored) {
                KERNEL(qp_active_rows)(&F, n, me, mi, 0, Ar, A, 0, G, 0, act, free_, c, rhs, D, kind);
                as_is = KERNEL(qp_factor_active)(&F, Pr, 0, D, M_eq, me, factored, rel_as_is, 0, &H, free_);
            }
        }
        if (!as_is) {
            factored = KERNEL(qp_reduce_step)(&F, P, A, n, me, p_stride, free_, nf, W.Pr, W.Ar, &Pr, &Ar, M_eq, d, rel,
                                              &full_factored, &H);
            KERNEL(qp_active_rows)(&F, n, me, mi, d, Ar, A, 0, G, 0, act, free_, c, rhs, D, kind);
            KERNEL(qp_factor_active)(&F, Pr, d, D, M_eq, me, factored, rel, 1, &H, free_);
        }
        for (long a = 0; a < nf; a++) fr[a] = g[free_[a]];
        KERNEL(qp_solve_refined)(&F, Pr, fr, rhs, kind, exact && !as_is ? refinements : 0, nf + me + mi, sol_dr, solr,
                                 W.unit_nu, res_f, res_g, dx, nu, &H, free_, ux);
        KERNEL(qp_expand)(n, nf, me + mi, free_, c, solr, sol); /* u (0 on fixed variables), nu_y, nu_z */
        REAL *ls = ls_ + r * n, *lx = lx_ + r * n;
        for (long i = 0; i < n; i++) lx[i] = g[i]; /* fixed: g - P u - A^T nu_y - G^T nu_z */
        KERNEL(qp_hessian_product)(&H, P, W.all_, n, sol, -1, lx, ux);
        for (long k = 0; k < me + mi; k++) {
            const REAL nk = sol[n + k], *restrict ck = k < me ? A + k * n : G + (k - me) * n;
            if (nk != 0) IVDEP for (long j = 0; j < n; j++) lx[j] -= ck[j] * nk;
        }
        for (long i = 0; i < n; i++) ls[i] = 0;
        for (long a = 0; a < nf; a++) ls[free_[a]] = lx[free_[a]] = sol[free_[a]];
        for (long k = 0; k < me; k++) ly_[r * me + k] = sol[n + k];
        for (long k = 0; k < mi; k++) lz_[r * mi + k] = sol[n + me + k];
    }
    KERNEL(qp_workspace_free)(&W);
    return 0;
}

DISPATCH long KERNEL(qp_adjoint)(long nb, long threads, long n, long me, long mi, long refinements, long p_stride,
                                 const REAL *restrict params, const REAL *restrict P_, const REAL *restrict A_,
                                 const REAL *restrict G_, const REAL *restrict flags_, const REAL *restrict exact_,
                                 const REAL *restrict g_, REAL *restrict ls_, REAL *restrict lx_, REAL *restrict ly_,
                                 REAL *restrict lz_) {
    long result;
    COUNTED_ROWS_IN_PARALLEL(result, nb, threads, 16, KERNEL(qp_adjoint_rows)(lo, hi, n, me, mi, refinements, p_stride,
                                                                             0, 0, 0, params, P_, A_, G_, flags_,
                                                                             exact_, g_, ls_, lx_, ly_, lz_));
    return result;
}

/* qp_adjoint for a structured Hessian, each row's P = diag(p_) + U_ U_^T (p_ (nb, n), U_ (nb, n, r)), solved as
   qp_polish_structured solves the polish's systems: the same adjoint up to rounding. */
DISPATCH long KERNEL(qp_adjoint_structured)(long nb, long threads, long n, long me, long mi, long refinements, long r,
                                            const REAL *restrict params, const REAL *restrict p_,
                                            const REAL *restrict U_, const REAL *restrict A_, const REAL *restrict G_,
                                            const REAL *restrict flags_, const REAL *restrict exact_,
                                            const REAL *restrict g_, REAL *restrict ls_, REAL *restrict lx_,
                                            REAL *restrict ly_, REAL *restrict lz_) {
    long result;
    COUNTED_ROWS_IN_PARALLEL(result, nb, threads, 16, KERNEL(qp_adjoint_rows)(lo, hi, n, me, mi, refinements, n * n, r,
                                                                             p_, U_, params, 0, A_, G_, flags_, exact_,
                                                                             g_, ls_, lx_, ly_, lz_));
    return result;
}

#undef QP_UNIT_ROWS
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#endif /* REAL */
