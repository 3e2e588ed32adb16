/* KinematicTree's kernels (kinematics.model.tree_kernels). ISO rounding (no contraction). */
#ifndef REAL
#define KINEMATICS_UNIT "tree.c"
#include "per_type.h"
#else

/* ---- KinematicTree (kinematics.model.tree): the level pass, every frame's pose, a frame Jacobian, the CoM and its
   Jacobian. Nodes are (m + 1, 12, n) batch-last: slot 0 the root (base) frame, slot i + 1 node i in level order
   (a parent's slot is below its child's), entry 4 r + c of each frame's top 3x4 block. Index arrays are int64.
   The batch is walked in tiles of TREE_TILE samples: each tile's inputs are copied into small local rows, computed
   there (vectorised over the tile) and stored at out[b * sb + e * se], with strides chosen by the caller (se 1:
   batch-first, the public layout; sb 1: batch-last). Reading or writing a dozen rows of n values side by side
   instead would make every row the same cache set when n is a multiple of 1024 (4 KiB apart). */
#ifndef TREE_TILE
#define TREE_TILE 32
#endif

/* tile[e * T + t] -> out[t * sb + e * se] for e < E, t < T (full tiles: constant trip counts, vectorised). */
static inline void KERNEL(tree_store)(long E, long T, const REAL *restrict tile, REAL *restrict out, long sb,
                                      long se) {
    if (se == 1 && T == TREE_TILE && E == 16) { /* poses: a constant 16 x TREE_TILE transpose */
        for (long t = 0; t < TREE_TILE; t++) {
            for (long e = 0; e < 16; e++) out[t * sb + e] = tile[e * TREE_TILE + t];
        }
    } else if (se == 1 && T == TREE_TILE) {
        for (long t = 0; t < TREE_TILE; t++) {
            for (long e = 0; e < E; e++) out[t * sb + e] = tile[e * TREE_TILE + t];
        }
    } else if (se == 1) {
        for (long t = 0; t < T; t++) {
            for (long e = 0; e < E; e++) out[t * sb + e] = tile[e * T + t];
        }
    } else if (sb == 1 && T == TREE_TILE) {
        for (long e = 0; e < E; e++) {
            IVDEP for (long t = 0; t < TREE_TILE; t++) out[e * se + t] = tile[e * TREE_TILE + t];
        }
    } else {
        for (long e = 0; e < E; e++) {
            for (long t = 0; t < T; t++) out[t * sb + e * se] = tile[e * T + t];
        }
    }
}

/* rows[k * T + t] = x[k * n + t] for k < K, t < T: K batch-last rows of a tile. */
static inline void KERNEL(tree_load)(long K, long T, long n, const REAL *restrict x, REAL *restrict rows) {
    if (T == TREE_TILE) {
        for (long k = 0; k < K; k++) {
            IVDEP for (long t = 0; t < TREE_TILE; t++) rows[k * TREE_TILE + t] = x[k * n + t];
        }
    } else {
        for (long k = 0; k < K; k++) {
            for (long t = 0; t < T; t++) rows[k * T + t] = x[k * n + t];
        }
    }
}

/* sin and cos of x, in double whatever REAL is: x = k pi/2 + r (Cody-Waite, pi/2 in three parts of 33 bits, exact
   products for |k| < 2^20), then Taylor series on |r| <= pi/4 (truncation below 1e-16), a quadrant's swap and signs
   as selects: branch-free, so the loop over a tile vectorises. Valid for |x| < 1e6; tree_angles sends larger
   values to libm. NaN and infinities give NaN, as libm. */
static inline void KERNEL(tree_sincos)(double x, double *restrict s, double *restrict c) {
    const double magic = 6755399441055744.0; /* 1.5 * 2^52: adding it rounds to an integer */
    double k = (x * 0.63661977236758134308 + magic) - magic;
    double r = ((x - k * 1.57079632673412561417e+00) - k * 6.07710050630396597660e-11) - k * 2.02226624871116645580e-21;
    double r2 = r * r;
    double sr = r + r * r2 * (-1.0 / 6 + r2 * (1.0 / 120 + r2 * (-1.0 / 5040 + r2 * (1.0 / 362880 + r2 * (-1.0 / 39916800 +
                r2 * (1.0 / 6227020800.0 + r2 * (-1.0 / 1307674368000.0 + r2 * (1.0 / 355687428096000.0))))))));
    double cr = 1 + r2 * (-0.5 + r2 * (1.0 / 24 + r2 * (-1.0 / 720 + r2 * (1.0 / 40320 + r2 * (-1.0 / 3628800 +
                r2 * (1.0 / 479001600 + r2 * (-1.0 / 87178291200.0 + r2 * (1.0 / 20922789888000.0))))))));
    int quadrant = (int)(fabs(k) < 1e9 ? k : 0) & 3; /* k mod 4, also for k < 0 (two's complement) */
    double ss = quadrant & 1 ? cr : sr, cc = quadrant & 1 ? sr : cr;
    *s = quadrant & 2 ? -ss : ss;
    *c = (quadrant + 1) & 2 ? -cc : cc;
}

/* One node's coordinate, angle sine / cosine and slide over a tile of T samples from q (batch-first rows of nq):
   value = offset + q[column] multiplier (mimic joints; 0 + q 1 otherwise), angle = value revolute, slide =
   value (1 - revolute). */
static inline void KERNEL(tree_angles)(long T, long nq, const REAL *restrict q, long column, REAL multiplier,
                                       REAL offset, REAL revolute, REAL *restrict cv, REAL *restrict sv,
                                       REAL *restrict dv) {
    REAL u = 1 - revolute, x[TREE_TILE];
    int big = 0;
    for (long t = 0; t < T; t++) x[t] = q[t * nq + column]; /* a strided gather: kept out of the vector loop */
    IVDEP for (long t = 0; t < T; t++) {
        REAL value = offset + x[t] * multiplier, angle = value * revolute;
        double s, c;
        KERNEL(tree_sincos)((double)angle, &s, &c);
        sv[t] = (REAL)s;
        cv[t] = (REAL)c;
        dv[t] = value * u;
        big |= !(fabs((double)angle) < 1e6);
    }
    if (big) {
        for (long t = 0; t < T; t++) {
            double angle = (double)((offset + q[t * nq + column] * multiplier) * revolute);
            if (fabs(angle) >= 1e6) {
                sv[t] = (REAL)sin(angle);
                cv[t] = (REAL)cos(angle);
            }
        }
    }
}

/* The level pass. q (n, nq) batch-first (the base, when floating, is q[b, 0:7]: position, quaternion x y z w);
   node i (level order) is driven by q[:, column[i]] (times multiplier[i] plus offset[i]), revolute[i] 1 or 0
   (prismatic); origin (m, 12): each node's constant frame C in its parent's; parent (m,) slots. */
DISPATCH void KERNEL(tree_nodes)(long m, long n, long floating, long nq, const REAL *restrict q,
                                 const REAL *restrict origin, const REAL *restrict revolute,
                                 const REAL *restrict multiplier, const REAL *restrict offset,
                                 const long long *restrict column, const long long *restrict parent,
                                 REAL *restrict nodes) {
    REAL p[12 * TREE_TILE], o[12 * TREE_TILE], cv[TREE_TILE], sv[TREE_TILE], dv[TREE_TILE];
    for (long b0 = 0; b0 < n; b0 += TREE_TILE) {
        long T = n - b0 < TREE_TILE ? n - b0 : TREE_TILE;
        if (floating) {
            for (long t = 0; t < T; t++) {
                const REAL *restrict x = q + (b0 + t) * nq;
                REAL qx = x[3], qy = x[4], qz = x[5], qw = x[6];
                REAL s = 2 / (qx * qx + qy * qy + qz * qz + qw * qw);
                REAL xs = qx * s, ys = qy * s, zs = qz * s;
                REAL wx = qw * xs, wy = qw * ys, wz = qw * zs;
                REAL xx = qx * xs, xy = qx * ys, xz = qx * zs;
                REAL yy = qy * ys, yz = qy * zs, zz = qz * zs;
                o[0 * T + t] = 1 - (yy + zz);
                o[1 * T + t] = xy - wz;
                o[2 * T + t] = xz + wy;
                o[3 * T + t] = x[0];
                o[4 * T + t] = xy + wz;
                o[5 * T + t] = 1 - (xx + zz);
                o[6 * T + t] = yz - wx;
                o[7 * T + t] = x[1];
                o[8 * T + t] = xz - wy;
                o[9 * T + t] = yz + wx;
                o[10 * T + t] = 1 - (xx + yy);
                o[11 * T + t] = x[2];
            }
        } else {
            for (long k = 0; k < 12; k++) {
                for (long t = 0; t < T; t++) o[k * T + t] = (k % 5 == 0);
            }
        }
        KERNEL(tree_store)(12, T, o, nodes + b0, 1, n);
    }
    for (long i = 0; i < m; i++) {
        REAL C[12];
        for (int k = 0; k < 12; k++) C[k] = origin[12 * i + k];
        const REAL *restrict P = nodes + 12 * parent[i] * n;
        REAL *restrict out = nodes + 12 * (i + 1) * n;
        for (long b0 = 0; b0 < n; b0 += TREE_TILE) {
            long T = n - b0 < TREE_TILE ? n - b0 : TREE_TILE;
            KERNEL(tree_angles)(T, nq, q + b0 * nq, column[i], multiplier[i], offset[i], revolute[i], cv, sv, dv);
            KERNEL(tree_load)(12, T, n, P + b0, p);
            IVDEP for (long t = 0; t < T; t++) {
                REAL c = cv[t], s = sv[t], d = dv[t], L[12];
                for (int r = 0; r < 3; r++) { /* L = C R_z(angle), its origin slid by d along its z */
                    L[4 * r] = C[4 * r] * c + C[4 * r + 1] * s;
                    L[4 * r + 1] = C[4 * r + 1] * c - C[4 * r] * s;
                    L[4 * r + 2] = C[4 * r + 2];
                    L[4 * r + 3] = C[4 * r + 3] + C[4 * r + 2] * d;
                }
                for (int r = 0; r < 3; r++) {
                    REAL a = p[(4 * r) * T + t], e = p[(4 * r + 1) * T + t], f = p[(4 * r + 2) * T + t];
                    for (int col = 0; col < 4; col++) {
                        REAL v = a * L[col] + e * L[4 + col] + f * L[8 + col];
                        o[(4 * r + col) * T + t] = col == 3 ? v + p[(4 * r + 3) * T + t] : v;
                    }
                }
            }
            KERNEL(tree_store)(12, T, o, out + b0, 1, n);
        }
    }
}

/* Every frame: out[b * sb + f * sf + (4 r + c) * se] = (node slot[f] * offset[f]) entry (r, c) for r < rows
   (rows 4 writes the homogeneous row 0 0 0 1 too). offset (nf, 16) row-major 4x4. */
DISPATCH void KERNEL(tree_frames)(long nf, long n, long sb, long sf, long se, long rows, const REAL *restrict nodes,
                                  const REAL *restrict offset, const long long *restrict slot, REAL *restrict out) {
    REAL p[12 * TREE_TILE], o[16 * TREE_TILE];
    for (long b0 = 0; b0 < n; b0 += TREE_TILE) {
        long T = n - b0 < TREE_TILE ? n - b0 : TREE_TILE;
        for (long t = 0; t < T; t++) {
            for (int c = 0; c < 4; c++) o[(12 + c) * T + t] = c == 3;
        }
        for (long f = 0; f < nf; f++) {
            const REAL *restrict M = offset + 16 * f;
            KERNEL(tree_load)(12, T, n, nodes + 12 * slot[f] * n + b0, p);
            for (int r = 0; r < 3; r++) {
                for (int c = 0; c < 4; c++) {
                    REAL m0 = M[c], m1 = M[4 + c], m2 = M[8 + c], m3 = M[12 + c];
                    const REAL *restrict a = p + 4 * r * T;
                    REAL *restrict x = o + (4 * r + c) * T;
                    IVDEP for (long t = 0; t < T; t++) x[t] = a[t] * m0 + a[T + t] * m1 + a[2 * T + t] * m2 + a[3 * T + t] * m3;
                }
            }
            KERNEL(tree_store)(rows == 4 ? 16 : 12, T, o, out + b0 * sb + f * sf, sb, se);
        }
    }
}

/* The free flyer's columns of a Jacobian (rows 3 or 6, tile layout J[(r * nv + c) * T + t]) at points p (3, T) for
   root frames R (12, T): column k the base axis k (the base's linear velocity is in the base frame), column 3 + k
   that axis crossed with p - t (rows 3-5 of it: the axis, for 6 rows). */
static inline void KERNEL(tree_base_block)(long rows, long nv, long T, const REAL *restrict R, const REAL *restrict p,
                                           REAL *restrict J) {
    for (int k = 0; k < 3; k++) {
        REAL *restrict lin = J + k * T, *restrict ang = J + (3 + k) * T;
        IVDEP for (long t = 0; t < T; t++) {
            REAL ax = p[t] - R[3 * T + t], ay = p[T + t] - R[7 * T + t], az = p[2 * T + t] - R[11 * T + t];
            REAL x = R[k * T + t], y = R[(4 + k) * T + t], z = R[(8 + k) * T + t];
            lin[t] = x;
            lin[nv * T + t] = y;
            lin[2 * nv * T + t] = z;
            ang[t] = y * az - z * ay;
            ang[nv * T + t] = z * ax - x * az;
            ang[2 * nv * T + t] = x * ay - y * ax;
            if (rows == 6) {
                ang[3 * nv * T + t] = x;
                ang[4 * nv * T + t] = y;
                ang[5 * nv * T + t] = z;
            }
        }
    }
}

/* One frame's Jacobian (6 rows, linear first, world-aligned axes at the frame origin) at out[b * sb + (r nv + c) *
   se]: the frame is node slot times offset (16); its k ancestor nodes (slots ancestors[j]) add w_j [z x (p - o); z]
   (revolute) or w_j [z; 0] to column base_nv + dofs[j]; a floating base (base_nv 6) fills columns 0-5. work:
   (6 nv + 15) TREE_TILE scratch. */
DISPATCH void KERNEL(tree_frame_jacobian)(long k, long n, long slot, long nv, long base_nv, long sb, long se,
                                          const REAL *restrict nodes, const REAL *restrict offset,
                                          const long long *restrict ancestors, const long long *restrict dofs,
                                          const REAL *restrict weights, const REAL *restrict revolute,
                                          REAL *restrict work, REAL *restrict out) {
    REAL *restrict J = work, *restrict N = work + 6 * nv * TREE_TILE, *restrict p = N + 12 * TREE_TILE;
    for (long b0 = 0; b0 < n; b0 += TREE_TILE) {
        long T = n - b0 < TREE_TILE ? n - b0 : TREE_TILE;
        for (long e = 0; e < 6 * nv * T; e++) J[e] = 0;
        KERNEL(tree_load)(12, T, n, nodes + 12 * slot * n + b0, N);
        for (int x = 0; x < 3; x++) {
            const REAL *restrict a = N + 4 * x * T;
            IVDEP for (long t = 0; t < T; t++) {
                p[x * T + t] = a[t] * offset[3] + a[T + t] * offset[7] + a[2 * T + t] * offset[11] + a[3 * T + t] * offset[15];
            }
        }
        if (base_nv) {
            KERNEL(tree_load)(12, T, n, nodes + b0, N);
            KERNEL(tree_base_block)(6, nv, T, N, p, J);
        }
        for (long j = 0; j < k; j++) {
            REAL w = weights[j], *restrict col = J + (base_nv + dofs[j]) * T;
            KERNEL(tree_load)(12, T, n, nodes + 12 * ancestors[j] * n + b0, N);
            if (revolute[j] != 0) {
                IVDEP for (long t = 0; t < T; t++) {
                    REAL zx = N[2 * T + t], zy = N[6 * T + t], zz = N[10 * T + t];
                    REAL ax = p[t] - N[3 * T + t], ay = p[T + t] - N[7 * T + t], az = p[2 * T + t] - N[11 * T + t];
                    col[t] += w * (zy * az - zz * ay);
                    col[nv * T + t] += w * (zz * ax - zx * az);
                    col[2 * nv * T + t] += w * (zx * ay - zy * ax);
                    col[3 * nv * T + t] += w * zx;
                    col[4 * nv * T + t] += w * zy;
                    col[5 * nv * T + t] += w * zz;
                }
            } else {
                IVDEP for (long t = 0; t < T; t++) {
                    col[t] += w * N[2 * T + t];
                    col[nv * T + t] += w * N[6 * T + t];
                    col[2 * nv * T + t] += w * N[10 * T + t];
                }
            }
        }
        KERNEL(tree_store)(6 * nv, T, J, out + b0 * sb, sb, se);
    }
}

/* The centre of mass com[b * csb + r * cse] and, when jac is not NULL, its Jacobian jac[b * sb + (r nv + c) * se].
   moment (m + 1, 4): per slot, m [c; 1] summed over the links it carries (in its frame); subtree_mass (m,); node i
   adds w_i [z x (S_i - M_i o)] / total (revolute; S_i its subtree's first moment) or w_i M_i z / total (prismatic)
   to column base_nv + dof[i]. work: (3 nv + 3 (m + 1) + 15) TREE_TILE scratch. */
DISPATCH void KERNEL(tree_com)(long m, long n, long nv, long base_nv, long sb, long se, long csb, long cse,
                               const REAL *restrict nodes, const REAL *restrict moment,
                               const REAL *restrict subtree_mass, const REAL *restrict revolute,
                               const REAL *restrict weights, const REAL *restrict total, const long long *restrict dof,
                               const long long *restrict parent, REAL *restrict work, REAL *restrict com,
                               REAL *restrict jac) {
    REAL inverse = 1 / total[0];
    REAL *restrict J = work, *restrict S = J + 3 * nv * TREE_TILE, *restrict N = S + 3 * (m + 1) * TREE_TILE;
    REAL *restrict c = N + 12 * TREE_TILE;
    for (long b0 = 0; b0 < n; b0 += TREE_TILE) {
        long T = n - b0 < TREE_TILE ? n - b0 : TREE_TILE;
        for (long e = 0; e < 3 * T; e++) c[e] = 0;
        for (long s = 0; s <= m; s++) { /* first moments per slot, S[(3 s + x) T + t], and their sum */
            const REAL *restrict w = moment + 4 * s;
            KERNEL(tree_load)(12, T, n, nodes + 12 * s * n + b0, N);
            for (int x = 0; x < 3; x++) {
                const REAL *restrict a = N + 4 * x * T;
                REAL *restrict v = S + (3 * s + x) * T;
                IVDEP for (long t = 0; t < T; t++) {
                    v[t] = a[t] * w[0] + a[T + t] * w[1] + a[2 * T + t] * w[2] + a[3 * T + t] * w[3];
                    c[x * T + t] += v[t];
                }
            }
        }
        for (long e = 0; e < 3 * T; e++) c[e] /= total[0];
        KERNEL(tree_store)(3, T, c, com + b0 * csb, csb, cse);
        if (jac == 0) continue;
        for (long i = m - 1; i >= 0; i--) { /* subtree moments: children sit after their parents in level order */
            if (parent[i] > 0) {
                for (long e = 0; e < 3 * T; e++) S[3 * parent[i] * T + e] += S[3 * (i + 1) * T + e];
            }
        }
        for (long e = 0; e < 3 * nv * T; e++) J[e] = 0;
        if (base_nv) {
            KERNEL(tree_load)(12, T, n, nodes + b0, N);
            KERNEL(tree_base_block)(3, nv, T, N, c, J);
        }
        for (long i = 0; i < m; i++) {
            const REAL *restrict sub = S + 3 * (i + 1) * T;
            REAL mass = subtree_mass[i], w = weights[i] * inverse, *restrict col = J + (base_nv + dof[i]) * T;
            KERNEL(tree_load)(12, T, n, nodes + 12 * (i + 1) * n + b0, N);
            if (revolute[i] != 0) {
                IVDEP for (long t = 0; t < T; t++) {
                    REAL zx = N[2 * T + t], zy = N[6 * T + t], zz = N[10 * T + t];
                    REAL ax = sub[t] - mass * N[3 * T + t], ay = sub[T + t] - mass * N[7 * T + t];
                    REAL az = sub[2 * T + t] - mass * N[11 * T + t];
                    col[t] += w * (zy * az - zz * ay);
                    col[nv * T + t] += w * (zz * ax - zx * az);
                    col[2 * nv * T + t] += w * (zx * ay - zy * ax);
                }
            } else {
                IVDEP for (long t = 0; t < T; t++) {
                    col[t] += w * mass * N[2 * T + t];
                    col[nv * T + t] += w * mass * N[6 * T + t];
                    col[2 * nv * T + t] += w * mass * N[10 * T + t];
                }
            }
        }
        KERNEL(tree_store)(3 * nv, T, J, jac + b0 * sb, sb, se);
    }
}

#endif /* REAL */
