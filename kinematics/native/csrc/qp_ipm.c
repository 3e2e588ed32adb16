/* solve_qp's interior point (kinematics.qp.kernels._ipm_reference). Contraction ON (fp-contract=fast) for this unit's kernels. */
#ifndef REAL
#define KINEMATICS_UNIT "qp_ipm.c"
#include "per_type.h"
#else

#if defined(__GNUC__) && !defined(__clang__)
/* solve_qp's kernels: a product and a sum fused into one FMA where the target has it (the x86-64-v3 clone), in this
   unit only (qp_active_set.c does the same). The chain, IK, tree and hull units keep ISO rounding, so their results
   equal the torch ops' bit for bit where the tests ask it. */
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
#endif
/* solve_qp's interior point (kinematics.qp.kernels._ipm_reference, the same arithmetic): Mehrotra predictor-corrector steps on the
   elastic QP. Unlike the tree's kernels these arrays are batch-FIRST and contiguous (one row's P at P + r n n, ...),
   as kinematics.qp.problem holds them, except that row r's P starts at P + r p_stride (n n, or 0: one P for every row, a
   constant Hessian read once instead of copied per row; qp_polish and qp_adjoint take it too); P's symmetric part (P + P^T) / 2 is used. params = (elastic, prox). Outputs x (nb, n), y (nb, me), z, s (nb, mi), zu, su, zl,
   sl (nb, n); zu / zl are 0 where the bound is infinite (NaN everywhere if the scratch cannot be allocated).

   The rows are solved QP_LANES at a time: each tile's inputs are gathered into a lane layout (row l's value of
   element i at [i * QP_LANES + l]) so that the innermost loop of every operation runs over the lanes and
   vectorises; the data-dependent branches (the ratio tests, the pivot floor) are selects per lane. The last,
   partial tile repeats the last row in its spare lanes and discards them. */
#define QP_TINY ((REAL)(sizeof(REAL) == 4 ? 1e-38 : 1e-300))
#define LANES NOUNROLL IVDEP for (long l = 0; l < QP_LANES; l++)

/* best = min(best, the step to the boundary v + t dv = 0 over the entries with dv < 0 (and mask > 0)), per lane */
static QP_INLINE void KERNEL(qp_step_to_boundary_lanes)(REAL *restrict best, const REAL *restrict v,
                                                  const REAL *restrict dv, const REAL *restrict mask, long m) {
    for (long i = 0; i < m; i++) {
        const REAL *vi = v + i * QP_LANES, *di = dv + i * QP_LANES, *mk = mask ? mask + i * QP_LANES : 0;
        LANES {
            REAL t = -vi[l] / (di[l] < -QP_TINY ? di[l] : -QP_TINY);
            int take = di[l] < 0 && t < best[l] && (mk == 0 || mk[l] > 0);
            best[l] = take ? t : best[l];
        }
    }
}

/* the longest step (per lane, from best's values down) that keeps every slack and multiplier >= 0 */
static QP_INLINE void KERNEL(qp_step_length_lanes)(REAL *restrict best, const REAL *s, const REAL *ds, const REAL *z,
                                                   const REAL *dz, const REAL *su, const REAL *dsu, const REAL *zu,
                                                   const REAL *dzu, const REAL *sl, const REAL *dsl, const REAL *zl,
                                                   const REAL *dzl, const REAL *fu, const REAL *fl, long mi, long n) {
    KERNEL(qp_step_to_boundary_lanes)(best, s, ds, 0, mi);
    KERNEL(qp_step_to_boundary_lanes)(best, z, dz, 0, mi);
    KERNEL(qp_step_to_boundary_lanes)(best, su, dsu, fu, n);
    KERNEL(qp_step_to_boundary_lanes)(best, zu, dzu, fu, n);
    KERNEL(qp_step_to_boundary_lanes)(best, sl, dsl, fl, n);
    KERNEL(qp_step_to_boundary_lanes)(best, zl, dzl, fl, n);
}

/* The interior point's linear algebra on one tile: every "entry" is a vector of QP_LANES rows' values (row l's in
   lane l), one SIMD register, so each loop below is written over entries and the lanes never appear. Matrices are
   packed lower triangles, row i's entries 0..i at QP_ROW(i). */
typedef REAL KERNEL(qp_vec) __attribute__((vector_size(QP_LANES * sizeof(REAL)), aligned(sizeof(REAL))));
#define QP_VEC KERNEL(qp_vec)
#define QP_AT(p, i) (*(QP_VEC *)((p) + (i) * QP_LANES)) /* entry i of a lanes array */
#define QP_ROW(i) ((i) * ((i) + 1) / 2)

/* s_t = the sum over k in [k0, k1) of x_k r_t,k for four rows r_t: each x_k loaded once for four products, two
   independent chains per sum */
static QP_INLINE void KERNEL(qp_dot4_lanes)(QP_VEC s[4], const REAL *restrict x, const REAL *const r[4], long k0,
                                            long k1) {
    const REAL *restrict r0 = r[0], *restrict r1 = r[1], *restrict r2 = r[2], *restrict r3 = r[3];
    QP_VEC s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, t0 = {0}, t1 = {0}, t2 = {0}, t3 = {0};
    long k = k0;
    for (; k + 2 <= k1; k += 2) {
        QP_VEC xk = QP_AT(x, k), xl = QP_AT(x, k + 1);
        s0 += xk * QP_AT(r0, k), s1 += xk * QP_AT(r1, k), s2 += xk * QP_AT(r2, k), s3 += xk * QP_AT(r3, k);
        t0 += xl * QP_AT(r0, k + 1), t1 += xl * QP_AT(r1, k + 1), t2 += xl * QP_AT(r2, k + 1);
        t3 += xl * QP_AT(r3, k + 1);
    }
    if (k < k1) {
        QP_VEC xk = QP_AT(x, k);
        s0 += xk * QP_AT(r0, k), s1 += xk * QP_AT(r1, k), s2 += xk * QP_AT(r2, k), s3 += xk * QP_AT(r3, k);
    }
    s[0] = s0 + t0, s[1] = s1 + t1, s[2] = s2 + t2, s[3] = s3 + t3;
}

/* s += the sum over k in [k0, k1) of x_k r_k, in four chains (vectors pass by pointer: GCC warns that passing
   them by value depends on the target, even into inlined calls) */
static QP_INLINE void KERNEL(qp_dot1_lanes)(QP_VEC *restrict s, const REAL *restrict x, const REAL *restrict r, long k0,
                                            long k1) {
    QP_VEC s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    long k = k0;
    for (; k + 4 <= k1; k += 4) {
        s0 += QP_AT(x, k) * QP_AT(r, k), s1 += QP_AT(x, k + 1) * QP_AT(r, k + 1);
        s2 += QP_AT(x, k + 2) * QP_AT(r, k + 2), s3 += QP_AT(x, k + 3) * QP_AT(r, k + 3);
    }
    for (; k < k1; k++) s0 += QP_AT(x, k) * QP_AT(r, k);
    *s += (s0 + s1) + (s2 + s3);
}

/* K_ik -= sum_t c_t F_kt over the panel's columns j .. j + w - 1 (w <= 4; c_t, e_t zero past w), for k in
   [k0, k1), on row ri (and, given rn, K_(i+1)k -= sum_t e_t F_kt on the next row): each F_kt loaded once for both
   rows */
static QP_INLINE void KERNEL(qp_rank_update)(REAL *restrict ri, REAL *restrict rn, const REAL *restrict K, long j,
                                             long w, long k0, long k1, const QP_VEC c[4], const QP_VEC e[4]) {
    const QP_VEC c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3]; /* zero past w */
    if (w == 4 && rn) {
        const QP_VEC e0 = e[0], e1 = e[1], e2 = e[2], e3 = e[3];
        for (long k = k0; k < k1; k++) {
            const REAL *restrict rk = K + (QP_ROW(k) + j) * QP_LANES;
            QP_VEC a0 = QP_AT(rk, 0), a1 = QP_AT(rk, 1), a2 = QP_AT(rk, 2), a3 = QP_AT(rk, 3);
            QP_AT(ri, k) -= a0 * c0 + a1 * c1 + a2 * c2 + a3 * c3;
            QP_AT(rn, k) -= a0 * e0 + a1 * e1 + a2 * e2 + a3 * e3;
        }
    } else if (w == 4) {
        for (long k = k0; k < k1; k++) {
            const REAL *restrict rk = K + (QP_ROW(k) + j) * QP_LANES;
            QP_AT(ri, k) -= QP_AT(rk, 0) * c0 + QP_AT(rk, 1) * c1 + QP_AT(rk, 2) * c2 + QP_AT(rk, 3) * c3;
        }
    } else { /* a narrower panel (at column n or N), one row at a time */
        REAL *rows[2] = {ri, rn};
        const QP_VEC *coefficients[2] = {c, e};
        for (int r = 0; r < (rn ? 2 : 1); r++)
            for (long k = k0; k < k1; k++) {
                const REAL *restrict rk = K + (QP_ROW(k) + j) * QP_LANES;
                QP_VEC sum = {0};
                for (long t = 0; t < w; t++) sum += QP_AT(rk, t) * coefficients[r][t];
                QP_AT(rows[r], k) -= sum;
            }
    }
}

/* In place (right-looking, by panels of up to four columns on one side of column n): the packed lower triangle of
   K = [[H, A^T], [A, elastic I]] (N = n + me rows) becomes the factor F = [[L, 0], [V^T, LS]] of the
   quasi-definite [[H, A^T], [A, -elastic I]] = F diag(I, -I) F^T: L L^T = H, V = L^-1 A^T, LS LS^T = elastic I +
   V^T V (the equality rows' Schur complement), so the first n columns' terms enter the trailing block with +
   instead of -. inv = the reciprocal pivots. A pivot lost to rounding is floored (floor_h in L, floor_s in LS), not
   NaN. Each panel's columns are finished, then its rank-4 update is applied to the rows below, two at a time. */
static QP_INLINE void KERNEL(qp_kkt_factor_lanes)(REAL *restrict K, REAL *restrict inv, long n, long N, REAL floor_h,
                                                  REAL floor_s) {
    for (long j = 0, w; j < N; j += w) {
        w = (j < n ? n : N) - j < 4 ? (j < n ? n : N) - j : 4;
        for (long c = j; c < j + w; c++) { /* the panel: column c's pivot, then its entries below */
            REAL *restrict rc = K + QP_ROW(c) * QP_LANES, *restrict d = rc + c * QP_LANES;
            for (long t = j; t < c; t++) QP_AT(d, 0) -= QP_AT(rc, t) * QP_AT(rc, t);
            REAL floor = c < n ? floor_h : floor_s;
            LANES d[l] = SQRT(d[l] > floor ? d[l] : floor);
            QP_AT(inv, c) = 1 / QP_AT(d, 0);
            for (long i = c + 1; i < N; i++) {
                REAL *restrict ri = K + QP_ROW(i) * QP_LANES;
                QP_VEC v = QP_AT(ri, c);
                for (long t = j; t < c; t++) v -= QP_AT(ri, t) * QP_AT(rc, t);
                QP_AT(ri, c) = v * QP_AT(inv, c);
            }
        }
        for (long i = j + w, rows; i < N; i += rows) { /* the rows below: K_ik -= sum_t F_it F_kt, k in [j + w, i] */
            /* a row of the trailing block takes the first n columns' terms with +: on its entries k >= n */
            int flip = j < n && i >= n;
            rows = i + 1 < N && (j >= n || i + 1 < n || i >= n) ? 2 : 1; /* a pair on one side of n */
            REAL *restrict ri = K + QP_ROW(i) * QP_LANES, *restrict rn = rows == 2 ? ri + (i + 1) * QP_LANES : 0;
            QP_VEC c[4], e[4], cf[4], ef[4], zero = {0};
            for (long t = 0; t < 4; t++) {
                c[t] = t < w ? QP_AT(ri, j + t) : zero, cf[t] = -c[t];
                e[t] = rn && t < w ? QP_AT(rn, j + t) : zero, ef[t] = -e[t];
            }
            long split = flip ? n : i + 1; /* entries before split: minus; from split on: plus */
            KERNEL(qp_rank_update)(ri, rn, K, j, w, j + w, split, c, e);
            KERNEL(qp_rank_update)(ri, rn, K, j, w, split, i + 1, cf, ef);
            if (rn) KERNEL(qp_rank_update)(rn, 0, K, j, w, i + 1, i + 2, flip ? ef : e, 0); /* its pivot column */
        }
    }
}

/* v <- F^-1 v for a packed lower factor F (N rows), four rows at a time */
static QP_INLINE void KERNEL(qp_lower_solve_packed)(const REAL *restrict F, const REAL *restrict inv,
                                                    REAL *restrict v, long N) {
    for (long i = 0; i < N; i += 4) {
        long w = N - i < 4 ? N - i : 4;
        QP_VEC s[4] = {{0}};
        const REAL *r[4];
        for (long t = 0; t < 4; t++) r[t] = F + QP_ROW(i + (t < w ? t : 0)) * QP_LANES;
        long k0 = 0;
        if (w == 4) KERNEL(qp_dot4_lanes)(s, v, r, 0, i), k0 = i; /* else s stays 0 */
        for (long t = 0; t < w; t++) {
            KERNEL(qp_dot1_lanes)(&s[t], v, r[t], k0, i + t);
            QP_AT(v, i + t) = (QP_AT(v, i + t) - s[t]) * QP_AT(inv, i + t);
        }
    }
}

/* v <- F^-T v, four rows of F at a time (bottom up): their entries solved, then their terms taken from the rows
   above, each entry of v loaded and stored once for four products */
static QP_INLINE void KERNEL(qp_upper_solve_packed)(const REAL *restrict F, const REAL *restrict inv,
                                                    REAL *restrict v, long N) {
    for (long top = N; top > 0; top -= 4) {
        long i = top - 4 > 0 ? top - 4 : 0, w = top - i;
        for (long t = w - 1; t >= 0; t--) {
            const REAL *restrict r = F + QP_ROW(i + t) * QP_LANES;
            QP_VEC x = QP_AT(v, i + t) * QP_AT(inv, i + t);
            QP_AT(v, i + t) = x;
            for (long k = i; k < i + t; k++) QP_AT(v, k) -= QP_AT(r, k) * x;
        }
        const REAL *restrict r0 = F + QP_ROW(i) * QP_LANES;
        if (w == 4) {
            const REAL *restrict r1 = F + QP_ROW(i + 1) * QP_LANES, *restrict r2 = F + QP_ROW(i + 2) * QP_LANES;
            const REAL *restrict r3 = F + QP_ROW(i + 3) * QP_LANES;
            QP_VEC x0 = QP_AT(v, i), x1 = QP_AT(v, i + 1), x2 = QP_AT(v, i + 2), x3 = QP_AT(v, i + 3);
            for (long k = 0; k < i; k++)
                QP_AT(v, k) -= QP_AT(r0, k) * x0 + QP_AT(r1, k) * x1 + QP_AT(r2, k) * x2 + QP_AT(r3, k) * x3;
        } else {
            for (long t = 0; t < w; t++) {
                const REAL *restrict r = F + QP_ROW(i + t) * QP_LANES;
                QP_VEC x = QP_AT(v, i + t);
                for (long k = 0; k < i; k++) QP_AT(v, k) -= QP_AT(r, k) * x;
            }
        }
    }
}

static QP_INLINE void KERNEL(qp_ipm_rows)(long lo, long hi, long n, long me, long mi, long iterations, long p_stride,
                                           const REAL *restrict params,
                             const REAL *restrict P_, const REAL *restrict q_, const REAL *restrict A_,
                             const REAL *restrict b_, const REAL *restrict G_, const REAL *restrict h_,
                             const REAL *restrict lb_, const REAL *restrict ub_, REAL *restrict x_, REAL *restrict y_,
                             REAL *restrict z_, REAL *restrict s_, REAL *restrict zu_, REAL *restrict su_,
                             REAL *restrict zl_, REAL *restrict sl_) {
    const REAL d = params[0], prox = params[1];
    const long T = QP_LANES, me1 = me > 0 ? me : 1, mi1 = mi > 0 ? mi : 1, N = n + me;
    /* the tile's scratch, each block lanes x its size: P (n n); the KKT factor (packed, N (N + 1) / 2); A (me n);
       G, WG (mi n); 25 vectors of n, 2 of N, 3 of me, 9 of mi (as taken below) */
    long sizes[] = {n * n, QP_ROW(N), me1 * n, mi1 * n, mi1 * n};
    long reals = 25 * n + 2 * N + 3 * me1 + 9 * mi1;
    for (int k = 0; k < 5; k++) reals += sizes[k];
    REAL *scratch = malloc(sizeof(REAL) * T * reals);
    if (scratch == 0) {
        REAL *outs[] = {x_, y_, z_, s_, zu_, su_, zl_, sl_};
        long widths[] = {n, me, mi, mi, n, n, n, n};
        for (int k = 0; k < 8; k++)
            for (long i = lo * widths[k]; i < hi * widths[k]; i++) outs[k][i] = (REAL)NAN;
        return;
    }
    REAL *next = scratch;
#define QP_TAKE(count) (next += (count) * T, next - (count) * T)
    REAL *restrict P = QP_TAKE(n * n), *restrict K = QP_TAKE(QP_ROW(N)), *restrict A = QP_TAKE(me1 * n);
    REAL *restrict G = QP_TAKE(mi1 * n), *restrict WG = QP_TAKE(mi1 * n), *restrict inv = QP_TAKE(N);
    REAL *restrict dx = QP_TAKE(N), *restrict dy = dx + n * T; /* the direction [dx; dy], solved in place */
    REAL *restrict q = QP_TAKE(n), *restrict lbf = QP_TAKE(n), *restrict ubf = QP_TAKE(n), *restrict fu = QP_TAKE(n);
    REAL *restrict fl = QP_TAKE(n), *restrict x = QP_TAKE(n), *restrict zu = QP_TAKE(n), *restrict su = QP_TAKE(n);
    REAL *restrict zl = QP_TAKE(n), *restrict sl = QP_TAKE(n), *restrict rd = QP_TAKE(n), *restrict ru = QP_TAKE(n);
    REAL *restrict rl = QP_TAKE(n), *restrict Wu = QP_TAKE(n), *restrict Wl = QP_TAKE(n), *restrict zus = QP_TAKE(n);
    REAL *restrict zls = QP_TAKE(n), *restrict tu = QP_TAKE(n), *restrict tl = QP_TAKE(n);
    REAL *restrict dzu = QP_TAKE(n), *restrict dzl = QP_TAKE(n);
    REAL *restrict dsu = QP_TAKE(n), *restrict dsl = QP_TAKE(n), *restrict rcu = QP_TAKE(n);
    REAL *restrict rcl = QP_TAKE(n);
    REAL *restrict b = QP_TAKE(me1), *restrict y = QP_TAKE(me1), *restrict re = QP_TAKE(me1);
    REAL *restrict h = QP_TAKE(mi1), *restrict z = QP_TAKE(mi1), *restrict s = QP_TAKE(mi1), *restrict ri = QP_TAKE(mi1);
    REAL *restrict Wi = QP_TAKE(mi1), *restrict ti = QP_TAKE(mi1), *restrict dz = QP_TAKE(mi1);
    REAL *restrict ds = QP_TAKE(mi1), *restrict rc = QP_TAKE(mi1);
#undef QP_TAKE
    for (long r0 = lo; r0 < hi; r0 += T) {
        for (long l = 0; l < T; l++) { /* gather: lane l is row r0 + l (the last row again past the end) */
            long r = r0 + l < hi ? r0 + l : hi - 1;
            const REAL *restrict Pr = P_ + r * p_stride; /* its symmetric part, (P + P^T) / 2 */
            for (long i = 0; i < n; i++)
                for (long j = 0; j < n; j++) P[(i * n + j) * T + l] = (REAL)0.5 * (Pr[i * n + j] + Pr[j * n + i]);
            for (long i = 0; i < me * n; i++) A[i * T + l] = A_[r * me * n + i];
            for (long i = 0; i < mi * n; i++) G[i * T + l] = G_[r * mi * n + i];
            for (long i = 0; i < n; i++) {
                q[i * T + l] = q_[r * n + i];
                REAL upper = ub_[r * n + i], lower = lb_[r * n + i];
                fu[i * T + l] = isfinite(upper) ? 1 : 0;
                fl[i * T + l] = isfinite(lower) ? 1 : 0;
                ubf[i * T + l] = isfinite(upper) ? upper : 0;
                lbf[i * T + l] = isfinite(lower) ? lower : 0;
            }
            for (long k = 0; k < me; k++) b[k * T + l] = b_[r * me + k];
            for (long k = 0; k < mi; k++) h[k * T + l] = h_[r * mi + k];
        }
        REAL count[QP_LANES], mu[QP_LANES], a[QP_LANES], mu_aff[QP_LANES], sigma_mu[QP_LANES];
        LANES count[l] = (REAL)mi;
        for (long i = 0; i < n; i++) {
            REAL *fui = fu + i * T, *fli = fl + i * T, *ubi = ubf + i * T, *lbi = lbf + i * T;
            LANES {
                count[l] += fui[l] + fli[l];
                x[i * T + l] = 0;
                zu[i * T + l] = fui[l];
                zl[i * T + l] = fli[l];
                su[i * T + l] = ubi[l] > 1 ? ubi[l] : 1; /* slacks start at the constraints' values at x = 0, */
                sl[i * T + l] = -lbi[l] > 1 ? -lbi[l] : 1; /* at least 1 */
            }
        }
        LANES count[l] = count[l] > 1 ? count[l] : 1;
        for (long k = 0; k < me * T; k++) y[k] = 0;
        for (long k = 0; k < mi * T; k++) {
            REAL hk = h[k] != h[k] ? 0 : (h[k] < (REAL)1e8 ? h[k] : (REAL)1e8); /* as nan_to_num(posinf=1e8) */
            z[k] = 1;
            s[k] = hk > 1 ? hk : 1;
        }
        for (long it = 0; it < iterations; it++) {
            LANES mu[l] = 0;
            for (long i = 0; i < n * T; i++) rd[i] = q[i] + zu[i] - zl[i];
            for (long i = 0; i < n; i++) { /* P x, P symmetric: rows as axpys */
                const REAL *restrict pi = P + i * n * T, *restrict xi = x + i * T;
                for (long j = 0; j < n; j++) LANES rd[j * T + l] += pi[j * T + l] * xi[l];
            }
            /* the sums over j run with the rows k innermost (independent accumulators), in the same order */
            for (long k = 0; k < me * T; k++) re[k] = -d * y[k] - b[k];
            for (long j = 0; j < n; j++)
                for (long k = 0; k < me; k++) LANES re[k * T + l] += A[(k * n + j) * T + l] * x[j * T + l];
            for (long k = 0; k < me; k++) {
                const REAL *restrict ak = A + k * n * T, *restrict yk = y + k * T;
                for (long j = 0; j < n; j++) LANES rd[j * T + l] += ak[j * T + l] * yk[l];
            }
            for (long k = 0; k < mi * T; k++) ri[k] = -d * z[k] + s[k] - h[k];
            for (long j = 0; j < n; j++)
                for (long k = 0; k < mi; k++) LANES ri[k * T + l] += G[(k * n + j) * T + l] * x[j * T + l];
            for (long k = 0; k < mi; k++) {
                const REAL *restrict gk = G + k * n * T;
                REAL *restrict zk = z + k * T, *restrict sk = s + k * T;
                for (long j = 0; j < n; j++) LANES rd[j * T + l] += gk[j * T + l] * zk[l];
                LANES {
                    mu[l] += sk[l] * zk[l];
                    Wi[k * T + l] = zk[l] / (sk[l] + d * zk[l]);
                }
                for (long j = 0; j < n; j++) LANES WG[(k * n + j) * T + l] = Wi[k * T + l] * gk[j * T + l];
            }
            for (long i = 0; i < n; i++) {
                REAL *fui = fu + i * T, *fli = fl + i * T;
                LANES {
                    long e = i * T + l;
                    ru[e] = (x[e] - d * zu[e] + su[e] - ubf[e]) * fui[l];
                    rl[e] = (-x[e] - d * zl[e] + sl[e] + lbf[e]) * fli[l];
                    mu[l] += su[e] * zu[e] * fui[l] + sl[e] * zl[e] * fli[l];
                    Wu[e] = fui[l] * zu[e] / (su[e] + d * zu[e]);
                    Wl[e] = fli[l] * zl[e] / (sl[e] + d * zl[e]);
                    zus[e] = fui[l] > 0 ? zu[e] : 1;
                    zls[e] = fli[l] > 0 ? zl[e] : 1;
                }
            }
            LANES mu[l] /= count[l];
            for (long i = 0; i < n; i++) { /* K's rows of H = P + diag(Wu + Wl + prox) + G^T W G */
                REAL *restrict ki = K + QP_ROW(i) * T;
                const REAL *restrict pi = P + i * n * T;
                for (long j = 0; j <= i; j += 4) { /* four entries at a time, the sum over the rows of G in registers */
                    long w = i + 1 - j < 4 ? i + 1 - j : 4;
                    if (w == 4) {
                        QP_VEC h0 = QP_AT(pi, j), h1 = QP_AT(pi, j + 1), h2 = QP_AT(pi, j + 2), h3 = QP_AT(pi, j + 3);
                        for (long k = 0; k < mi; k++) {
                            const REAL *restrict gk = G + k * n * T;
                            QP_VEC wg = QP_AT(WG, k * n + i);
                            h0 += wg * QP_AT(gk, j), h1 += wg * QP_AT(gk, j + 1);
                            h2 += wg * QP_AT(gk, j + 2), h3 += wg * QP_AT(gk, j + 3);
                        }
                        QP_AT(ki, j) = h0, QP_AT(ki, j + 1) = h1, QP_AT(ki, j + 2) = h2, QP_AT(ki, j + 3) = h3;
                    } else {
                        for (long t = j; t < j + w; t++) {
                            QP_VEC hij = QP_AT(pi, t);
                            for (long k = 0; k < mi; k++) hij += QP_AT(WG, k * n + i) * QP_AT(G + k * n * T, t);
                            QP_AT(ki, t) = hij;
                        }
                    }
                }
                QP_AT(ki, i) += QP_AT(Wu, i) + QP_AT(Wl, i) + prox;
            }
            for (long k = 0; k < me; k++) { /* the equality rows: A, then elastic on the diagonal */
                REAL *restrict kr = K + QP_ROW(n + k) * T;
                for (long j = 0; j < n * T; j++) kr[j] = A[k * n * T + j];
                for (long j = n * T; j < (n + k) * T; j++) kr[j] = 0;
                QP_AT(kr, n + k) = (QP_VEC){0} + d;
            }
            KERNEL(qp_kkt_factor_lanes)(K, inv, n, N, prox, d);
            for (int pass = 0; pass < 2; pass++) {
                if (pass == 0) {
                    for (long k = 0; k < mi * T; k++) rc[k] = s[k] * z[k];
                    for (long i = 0; i < n * T; i++) {
                        rcu[i] = su[i] * zu[i] * fu[i];
                        rcl[i] = sl[i] * zl[i] * fl[i];
                    }
                } else {
                    LANES a[l] = (REAL)INFINITY;
                    KERNEL(qp_step_length_lanes)(a, s, ds, z, dz, su, dsu, zu, dzu, sl, dsl, zl, dzl, fu, fl, mi, n);
                    LANES {
                        a[l] = a[l] < 1 ? a[l] : 1;
                        mu_aff[l] = 0;
                    }
                    for (long k = 0; k < mi; k++)
                        LANES {
                            long e = k * T + l;
                            mu_aff[l] += (s[e] + a[l] * ds[e]) * (z[e] + a[l] * dz[e]);
                        }
                    for (long i = 0; i < n; i++)
                        LANES {
                            long e = i * T + l;
                            mu_aff[l] += (su[e] + a[l] * dsu[e]) * (zu[e] + a[l] * dzu[e]) * fu[e];
                            mu_aff[l] += (sl[e] + a[l] * dsl[e]) * (zl[e] + a[l] * dzl[e]) * fl[e];
                        }
                    LANES {
                        REAL ratio = mu_aff[l] / count[l] / (mu[l] > QP_TINY ? mu[l] : QP_TINY);
                        ratio = ratio < 0 ? 0 : (ratio > 1 ? 1 : ratio);
                        sigma_mu[l] = ratio * ratio * ratio * mu[l];
                    }
                    for (long k = 0; k < mi; k++)
                        LANES {
                            long e = k * T + l;
                            rc[e] = s[e] * z[e] + ds[e] * dz[e] - sigma_mu[l];
                        }
                    for (long i = 0; i < n; i++)
                        LANES {
                            long e = i * T + l;
                            rcu[e] = (su[e] * zu[e] + dsu[e] * dzu[e] - sigma_mu[l]) * fu[e];
                            rcl[e] = (sl[e] * zl[e] + dsl[e] * dzl[e] - sigma_mu[l]) * fl[e];
                        }
                }
                /* the direction for the complementarity right-hand sides rc, rcu, rcl */
                for (long i = 0; i < n * T; i++) {
                    tu[i] = ru[i] - rcu[i] / zus[i];
                    tl[i] = rl[i] - rcl[i] / zls[i];
                    dx[i] = -rd[i] - Wu[i] * tu[i] + Wl[i] * tl[i];
                }
                for (long k = 0; k < mi; k++) {
                    REAL wt[QP_LANES];
                    const REAL *restrict gk = G + k * n * T;
                    LANES {
                        long e = k * T + l;
                        ti[e] = ri[e] - rc[e] / z[e];
                        wt[l] = Wi[e] * ti[e];
                    }
                    for (long j = 0; j < n; j++) LANES dx[j * T + l] -= gk[j * T + l] * wt[l];
                }
                /* [H A^T; A -elastic I] [dx; dy] = [that; -re] through K = F diag(I, -I) F^T */
                for (long k = 0; k < me * T; k++) dy[k] = -re[k];
                KERNEL(qp_lower_solve_packed)(K, inv, dx, N);
                for (long k = 0; k < me * T; k++) dy[k] = -dy[k];
                KERNEL(qp_upper_solve_packed)(K, inv, dx, N);
                for (long k = 0; k < mi * T; k++) dz[k] = ti[k]; /* G dx + ti, then dz, ds */
                for (long j = 0; j < n; j++)
                    for (long k = 0; k < mi; k++) LANES dz[k * T + l] += G[(k * n + j) * T + l] * dx[j * T + l];
                for (long k = 0; k < mi * T; k++) {
                    dz[k] = Wi[k] * dz[k];
                    ds[k] = (-rc[k] - s[k] * dz[k]) / z[k];
                }
                for (long i = 0; i < n * T; i++) {
                    dzu[i] = Wu[i] * (dx[i] + tu[i]);
                    dzl[i] = Wl[i] * (-dx[i] + tl[i]);
                    dsu[i] = fu[i] * (-rcu[i] - su[i] * dzu[i]) / zus[i];
                    dsl[i] = fl[i] * (-rcl[i] - sl[i] * dzl[i]) / zls[i];
                }
            }
            LANES a[l] = (REAL)INFINITY;
            KERNEL(qp_step_length_lanes)(a, s, ds, z, dz, su, dsu, zu, dzu, sl, dsl, zl, dzl, fu, fl, mi, n);
            LANES {
                a[l] = (REAL)0.99 * a[l];
                a[l] = a[l] < 1 ? a[l] : 1;
            }
            for (long i = 0; i < n; i++)
                LANES {
                    long e = i * T + l;
                    x[e] += a[l] * dx[e];
                    zu[e] += a[l] * dzu[e];
                    su[e] += a[l] * dsu[e];
                    zl[e] += a[l] * dzl[e];
                    sl[e] += a[l] * dsl[e];
                }
            for (long k = 0; k < me; k++) LANES y[k * T + l] += a[l] * dy[k * T + l];
            for (long k = 0; k < mi; k++)
                LANES {
                    long e = k * T + l;
                    z[e] += a[l] * dz[e];
                    s[e] += a[l] * ds[e];
                }
        }
        for (long l = 0; l < T && r0 + l < hi; l++) { /* scatter the tile's real rows */
            long r = r0 + l;
            for (long i = 0; i < n; i++) {
                long e = i * T + l;
                x_[r * n + i] = x[e];
                zu_[r * n + i] = zu[e] * fu[e];
                su_[r * n + i] = su[e];
                zl_[r * n + i] = zl[e] * fl[e];
                sl_[r * n + i] = sl[e];
            }
            for (long k = 0; k < me; k++) y_[r * me + k] = y[k * T + l];
            for (long k = 0; k < mi; k++) {
                z_[r * mi + k] = z[k * T + l];
                s_[r * mi + k] = s[k * T + l];
            }
        }
    }
    free(scratch);
}

DISPATCH void KERNEL(qp_ipm)(long nb, long threads, long n, long me, long mi, long iterations, long p_stride, const REAL *restrict params,
                             const REAL *restrict P_, const REAL *restrict q_, const REAL *restrict A_,
                             const REAL *restrict b_, const REAL *restrict G_, const REAL *restrict h_,
                             const REAL *restrict lb_, const REAL *restrict ub_, REAL *restrict x_, REAL *restrict y_,
                             REAL *restrict z_, REAL *restrict s_, REAL *restrict zu_, REAL *restrict su_,
                             REAL *restrict zl_, REAL *restrict sl_) {
    ROWS_IN_PARALLEL(nb, threads, 16, QP_LANES, KERNEL(qp_ipm_rows)(lo, hi, n, me, mi, iterations, p_stride, params, P_, q_, A_, b_, G_, h_, lb_, ub_, x_, y_, z_, s_, zu_, su_, zl_, sl_));
}
#undef LANES
#undef QP_VEC
#undef QP_AT
#undef QP_ROW
#undef QP_TINY
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#endif /* REAL */
