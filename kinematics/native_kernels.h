/* The kernels of kinematics.native for one floating-point type. native_kernels.c includes this file once per type
   with REAL (float or double), KERNEL(name) (name_float or name_double) and SQRT, ATAN2, FABS defined; it has no
   include guard on purpose.

   Every array is batch-last and contiguous: x[k * n + b] is entry k of sample b. kinematics.native checks each
   tensor's device, dtype and exact shape before it hands a pointer to these functions. */

DISPATCH void KERNEL(fk_jacobian)(long dof, long n, const REAL *restrict sine, const REAL *restrict versine,
                                  const REAL *restrict q, const REAL *restrict local, const REAL *restrict revolute,
                                  const REAL *restrict end, REAL *restrict rot, REAL *restrict pos, REAL *restrict jac) {
    for (long k = 0; k < 9; k++) {
        IVDEP for (long b = 0; b < n; b++) rot[k * n + b] = (k % 4 == 0);
    }
    for (long k = 0; k < 3; k++) {
        IVDEP for (long b = 0; b < n; b++) pos[k * n + b] = 0;
    }
    for (long i = 0; i < dof; i++) {
        /* local[i] = (constant, sine, versine, slide) 3x4 blocks: frame i = constant + s sine + v versine + q slide */
        REAL c[12], e[12], f[12], g[12];
        for (int k = 0; k < 12; k++) {
            c[k] = local[48 * i + k];
            e[k] = local[48 * i + 12 + k];
            f[k] = local[48 * i + 24 + k];
            g[k] = local[48 * i + 36 + k];
        }
        REAL *restrict out = jac + 6 * i * n;
        IVDEP for (long b = 0; b < n; b++) {
            REAL s = sine[i * n + b], v = versine[i * n + b], d = q[i * n + b], l[12], a[9], r[9], p[3];
            for (int k = 0; k < 12; k++) l[k] = c[k] + s * e[k] + v * f[k] + d * g[k];
            for (int k = 0; k < 9; k++) a[k] = rot[k * n + b];
            for (int x = 0; x < 3; x++) {
                for (int y = 0; y < 3; y++) r[3 * x + y] = a[3 * x] * l[y] + a[3 * x + 1] * l[4 + y] + a[3 * x + 2] * l[8 + y];
                p[x] = pos[x * n + b] + a[3 * x] * l[3] + a[3 * x + 1] * l[7] + a[3 * x + 2] * l[11];
            }
            for (int k = 0; k < 9; k++) rot[k * n + b] = r[k];
            for (int x = 0; x < 3; x++) {
                pos[x * n + b] = p[x];
                out[x * n + b] = p[x];             /* the joint's origin until the last loop */
                out[(3 + x) * n + b] = r[3 * x + 2]; /* the joint's axis: the frame's z column */
            }
        }
    }
    REAL t[12];
    for (int k = 0; k < 12; k++) t[k] = end[k];
    IVDEP for (long b = 0; b < n; b++) {  /* the TCP: frame n times the fixed end transform */
        REAL a[9], r[9], p[3];
        for (int k = 0; k < 9; k++) a[k] = rot[k * n + b];
        for (int x = 0; x < 3; x++) {
            for (int y = 0; y < 3; y++) r[3 * x + y] = a[3 * x] * t[y] + a[3 * x + 1] * t[4 + y] + a[3 * x + 2] * t[8 + y];
            p[x] = pos[x * n + b] + a[3 * x] * t[3] + a[3 * x + 1] * t[7] + a[3 * x + 2] * t[11];
        }
        for (int k = 0; k < 9; k++) rot[k * n + b] = r[k];
        for (int x = 0; x < 3; x++) pos[x * n + b] = p[x];
    }
    for (long i = 0; i < dof; i++) {  /* revolute: [z x (p - o); z], prismatic: [z; 0] */
        REAL w = revolute[i], u = 1 - revolute[i], *restrict out = jac + 6 * i * n;
        IVDEP for (long b = 0; b < n; b++) {
            REAL zx = out[3 * n + b], zy = out[4 * n + b], zz = out[5 * n + b];
            REAL ax = pos[b] - out[b], ay = pos[n + b] - out[n + b], az = pos[2 * n + b] - out[2 * n + b];
            out[b] = w * (zy * az - zz * ay) + u * zx;
            out[n + b] = w * (zz * ax - zx * az) + u * zy;
            out[2 * n + b] = w * (zx * ay - zy * ax) + u * zz;
            out[3 * n + b] = w * zx;
            out[4 * n + b] = w * zy;
            out[5 * n + b] = w * zz;
        }
    }
}

/* J J^T + C for J^T stored as jac (dof, 6, n): sums in the batch-last layout (vectorised), then written as
   contiguous (n, 6, 6) matrices for the batched solve. work: (21, n) scratch. */
DISPATCH void KERNEL(gram)(long dof, long n, const REAL *restrict jac, const REAL *restrict constant,
                           REAL *restrict work, REAL *restrict out) {
    long entry = 0;
    for (int r = 0; r < 6; r++) {
        for (int c = r; c < 6; c++, entry++) {
            REAL *restrict w = work + entry * n, k = constant[6 * r + c];
            IVDEP for (long b = 0; b < n; b++) w[b] = k;
            for (long i = 0; i < dof; i++) {
                const REAL *restrict x = jac + (6 * i + r) * n, *restrict y = jac + (6 * i + c) * n;
                IVDEP for (long b = 0; b < n; b++) w[b] += x[b] * y[b];
            }
        }
    }
    for (long b = 0; b < n; b++) {
        REAL *restrict m = out + 36 * b;
        entry = 0;
        for (int r = 0; r < 6; r++) {
            for (int c = r; c < 6; c++, entry++) m[6 * r + c] = m[6 * c + r] = work[entry * n + b];
        }
    }
}

/* J^T x: jac (dof, 6, n), x (n, 6) as the batched solve returns it -> out (dof, n). */
DISPATCH void KERNEL(jt_x)(long dof, long n, const REAL *restrict jac, const REAL *restrict x, REAL *restrict out) {
    for (long i = 0; i < dof; i++) {
        const REAL *restrict j = jac + 6 * i * n;
        REAL *restrict o = out + i * n;
        IVDEP for (long b = 0; b < n; b++) {
            o[b] = j[b] * x[6 * b] + j[n + b] * x[6 * b + 1] + j[2 * n + b] * x[6 * b + 2] + j[3 * n + b] * x[6 * b + 3]
                 + j[4 * n + b] * x[6 * b + 4] + j[5 * n + b] * x[6 * b + 5];
        }
    }
}

/* The IK residual (kinematics.pose_error): target minus reached position, and log(R_target R^T) by the formula of
   kinematics.rotations.so3_log_matrix_first, branch for branch. Rotations (3, 3, n), positions (3, n) -> (6, n). */
DISPATCH void KERNEL(pose_error)(long n, const REAL *restrict tr, const REAL *restrict tp, const REAL *restrict r,
                                 const REAL *restrict p, REAL *restrict out, REAL small_sin_sq, REAL near_pi_cos) {
    const REAL half = (REAL)0.5, one = (REAL)1;
    for (long b = 0; b < n; b++) {
        REAL m[9];
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 3; j++) {
                m[3 * i + j] = tr[3 * i * n + b] * r[3 * j * n + b] + tr[(3 * i + 1) * n + b] * r[(3 * j + 1) * n + b]
                             + tr[(3 * i + 2) * n + b] * r[(3 * j + 2) * n + b];
            }
        }
        REAL v0 = half * (m[7] - m[5]), v1 = half * (m[2] - m[6]), v2 = half * (m[3] - m[1]);
        REAL c = half * (m[0] + m[4] + m[8] - one);
        REAL s2 = v0 * v0 + v1 * v1 + v2 * v2;
        int small = s2 < small_sin_sq, near = c < near_pi_cos;
        REAL sn = small ? one : SQRT(s2);
        REAL d0 = m[0] - c, d1 = m[4] - c, d2 = m[8] - c;
        REAL s01 = half * (m[1] + m[3]), s02 = half * (m[2] + m[6]), s12 = half * (m[5] + m[7]);
        int pick0 = d0 >= d1 && d0 >= d2, pick1 = d1 >= d2;
        REAL c0 = pick0 ? d0 : (pick1 ? s01 : s02), c1 = pick0 ? s01 : (pick1 ? d1 : s12);
        REAL c2 = pick0 ? s02 : (pick1 ? s12 : d2);
        REAL cn2 = near ? c0 * c0 + c1 * c1 + c2 * c2 : one;
        REAL cn = SQRT(cn2 > (REAL)1e-30 ? cn2 : (REAL)1e-30);
        REAL a0 = c0 / cn, a1 = c1 / cn, a2 = c2 / cn;
        REAL along = a0 * v0 + a1 * v1 + a2 * v2;
        REAL angle = ATAN2(near ? FABS(along) : sn, c);
        REAL e0, e1, e2;
        if (near) {
            REAL signed_angle = along < 0 ? -angle : angle;
            e0 = a0 * signed_angle; e1 = a1 * signed_angle; e2 = a2 * signed_angle;
        } else {
            REAL g = small ? one + s2 / (REAL)6 : angle / sn;
            e0 = v0 * g; e1 = v1 * g; e2 = v2 * g;
        }
        for (int k = 0; k < 3; k++) out[k * n + b] = tp[k * n + b] - p[k * n + b];
        out[3 * n + b] = e0; out[4 * n + b] = e1; out[5 * n + b] = e2;
    }
}

/* The backward of pose_error for the rotation part: grad (3, n) on log(M), M = R_t R^T -> d/dR_t = G R and
   d/dR = G^T R_t (3, 3, n), with G the closed form of kinematics.rotations.so3_log_matrix_first_vjp. */
DISPATCH void KERNEL(pose_error_vjp)(long n, const REAL *restrict tr, const REAL *restrict r, const REAL *restrict grad,
                                     REAL *restrict grad_tr, REAL *restrict grad_r, REAL small_sin_sq, REAL near_pi_cos) {
    const REAL half = (REAL)0.5, one = (REAL)1, zero = (REAL)0;
    for (long b = 0; b < n; b++) {
        REAL m[9], a[9], o[9], g[9];
        for (int k = 0; k < 9; k++) {
            a[k] = tr[k * n + b];
            o[k] = r[k * n + b];
        }
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 3; j++) m[3 * i + j] = a[3 * i] * o[3 * j] + a[3 * i + 1] * o[3 * j + 1] + a[3 * i + 2] * o[3 * j + 2];
        }
        REAL l0 = grad[b], l1 = grad[n + b], l2 = grad[2 * n + b];
        REAL v0 = half * (m[7] - m[5]), v1 = half * (m[2] - m[6]), v2 = half * (m[3] - m[1]);
        REAL c = half * (m[0] + m[4] + m[8] - one);
        REAL s2 = v0 * v0 + v1 * v1 + v2 * v2;
        int small = s2 < small_sin_sq, near = c < near_pi_cos;
        REAL gv0, gv1, gv2, gc, gd0 = zero, gd1 = zero, gd2 = zero, gs01 = zero, gs02 = zero, gs12 = zero;
        if (!near) {
            REAL lv = l0 * v0 + l1 * v1 + l2 * v2;
            if (small) {
                REAL f = one + s2 / (REAL)6, h = lv / (REAL)3;
                gv0 = l0 * f + h * v0; gv1 = l1 * f + h * v1; gv2 = l2 * f + h * v2;
                gc = zero;
            } else {
                REAL sn = SQRT(s2), theta = ATAN2(sn, c), rad = sn * sn + c * c;
                REAL f = theta / sn, h = lv * ((c / rad * sn - theta) / (sn * sn)) / sn;
                gv0 = l0 * f + h * v0; gv1 = l1 * f + h * v1; gv2 = l2 * f + h * v2;
                gc = -lv / rad;
            }
        } else {
            REAL d0 = m[0] - c, d1 = m[4] - c, d2 = m[8] - c;
            REAL s01 = half * (m[1] + m[3]), s02 = half * (m[2] + m[6]), s12 = half * (m[5] + m[7]);
            int pick0 = d0 >= d1 && d0 >= d2, pick1 = d1 >= d2;
            REAL c0 = pick0 ? d0 : (pick1 ? s01 : s02), c1 = pick0 ? s01 : (pick1 ? d1 : s12);
            REAL c2 = pick0 ? s02 : (pick1 ? s12 : d2);
            REAL cn2 = c0 * c0 + c1 * c1 + c2 * c2;
            int live = cn2 > (REAL)1e-30;
            REAL cn = SQRT(live ? cn2 : (REAL)1e-30);
            REAL a0 = c0 / cn, a1 = c1 / cn, a2 = c2 / cn;
            REAL along = a0 * v0 + a1 * v1 + a2 * v2, y = FABS(along), angle = ATAN2(y, c);
            REAL sign = along < 0 ? -one : one, sgn = along > 0 ? one : (along < 0 ? -one : zero);
            REAL mu = sign * (l0 * a0 + l1 * a1 + l2 * a2), rad = along * along + c * c;
            REAL k = mu * c / rad * sgn;
            REAL ga0 = sign * angle * l0 + k * v0, ga1 = sign * angle * l1 + k * v1, ga2 = sign * angle * l2 + k * v2;
            gv0 = k * a0; gv1 = k * a1; gv2 = k * a2;
            gc = -mu * y / rad;
            REAL t = live ? (ga0 * c0 + ga1 * c1 + ga2 * c2) / (cn * cn * cn) : zero;
            REAL g0 = ga0 / cn - t * c0, g1 = ga1 / cn - t * c1, g2 = ga2 / cn - t * c2;
            if (pick0) { gd0 = g0; gs01 = g1; gs02 = g2; }
            else if (pick1) { gs01 = g0; gd1 = g1; gs12 = g2; }
            else { gs02 = g0; gs12 = g1; gd2 = g2; }
            gc -= gd0 + gd1 + gd2;
        }
        REAL hc = half * gc, h0 = half * gv0, h1 = half * gv1, h2 = half * gv2;
        g[0] = hc + gd0; g[1] = half * gs01 - h2; g[2] = half * gs02 + h1;
        g[3] = half * gs01 + h2; g[4] = hc + gd1; g[5] = half * gs12 - h0;
        g[6] = half * gs02 - h1; g[7] = half * gs12 + h0; g[8] = hc + gd2;
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 3; j++) {
                grad_tr[(3 * i + j) * n + b] = g[3 * i] * o[j] + g[3 * i + 1] * o[3 + j] + g[3 * i + 2] * o[6 + j];
                grad_r[(3 * i + j) * n + b] = g[i] * a[j] + g[3 + i] * a[3 + j] + g[6 + i] * a[6 + j];
            }
        }
    }
}

/* The backward of the chain pass for an all-revolute chain (kinematics.chain_gradient): rot (3, 3, n) the TCP
   rotation, jac (dof, 6, n) = J^T, and the output gradients -> grad_q (dof, n). work: (12, n) scratch. */
DISPATCH void KERNEL(chain_vjp)(long dof, long n, const REAL *restrict rot, const REAL *restrict jac,
                                const REAL *restrict grad_rot, const REAL *restrict grad_pos,
                                const REAL *restrict grad_jac, REAL *restrict work, REAL *restrict grad_q) {
    REAL *restrict w0 = work, *restrict w1 = work + n, *restrict w2 = work + 2 * n;            /* omega */
    REAL *restrict t0 = work + 3 * n, *restrict t1 = work + 4 * n, *restrict t2 = work + 5 * n; /* sum of a_i */
    REAL *restrict u0 = work + 6 * n, *restrict u1 = work + 7 * n, *restrict u2 = work + 8 * n; /* running a */
    REAL *restrict p0 = work + 9 * n, *restrict p1 = work + 10 * n, *restrict p2 = work + 11 * n; /* running b */
    IVDEP for (long b = 0; b < n; b++) {
        REAL m[9];  /* R G^T */
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 3; j++) {
                m[3 * i + j] = rot[3 * i * n + b] * grad_rot[3 * j * n + b] + rot[(3 * i + 1) * n + b] * grad_rot[(3 * j + 1) * n + b]
                             + rot[(3 * i + 2) * n + b] * grad_rot[(3 * j + 2) * n + b];
            }
        }
        w0[b] = m[5] - m[7]; w1[b] = m[6] - m[2]; w2[b] = m[1] - m[3];
        t0[b] = 0; t1[b] = 0; t2[b] = 0; u0[b] = 0; u1[b] = 0; u2[b] = 0;
        p0[b] = grad_pos[b]; p1[b] = grad_pos[n + b]; p2[b] = grad_pos[2 * n + b];
    }
    for (int pass = 0; pass < 2; pass++) {
        for (long i = 0; i < dof; i++) {
            const REAL *restrict j = jac + 6 * i * n, *restrict g = grad_jac + 6 * i * n;
            REAL *restrict out = grad_q + i * n;
            IVDEP for (long b = 0; b < n; b++) {
                REAL lx = j[b], ly = j[n + b], lz = j[2 * n + b], zx = j[3 * n + b], zy = j[4 * n + b], zz = j[5 * n + b];
                REAL gx = g[b], gy = g[n + b], gz = g[2 * n + b], hx = g[3 * n + b], hy = g[4 * n + b], hz = g[5 * n + b];
                /* a_i = J_i x G_J,i + z_i x G_z,i */
                REAL ax = ly * gz - lz * gy + zy * hz - zz * hy;
                REAL ay = lz * gx - lx * gz + zz * hx - zx * hz;
                REAL az = lx * gy - ly * gx + zx * hy - zy * hx;
                if (pass == 0) {
                    t0[b] += ax; t1[b] += ay; t2[b] += az;
                } else {
                    u0[b] += ax; u1[b] += ay; u2[b] += az;
                    /* b_i = G_J,i x z_i, summed over i <= k */
                    p0[b] += gy * zz - gz * zy; p1[b] += gz * zx - gx * zz; p2[b] += gx * zy - gy * zx;
                    out[b] = zx * (t0[b] - u0[b] + w0[b]) + zy * (t1[b] - u1[b] + w1[b]) + zz * (t2[b] - u2[b] + w2[b])
                           + lx * p0[b] + ly * p1[b] + lz * p2[b];
                }
            }
        }
    }
}

/* ---- The fused DLS solve (kinematics.ik, step "clamp"): every iteration of the solve for a tile of IK_TILE rows
   in one call, from the chain pass, pose error, J^T kernels above (run on the tile's rows), the damped 6x6 system
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
   project after each step); params as kinematics.fused_solve writes them (step size, small_sin_sq, near_pi_cos,
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

/* The whole solve of kinematics.ik in batch-first layout: ik_solve's iterations from the seeds (n, dof) (projected
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

/* ---- KinematicTree (kinematics.tree): the level pass, every frame's pose, a frame Jacobian, the CoM and its
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

/* The support polygon's hull edges (kinematics.wholebody.support_polygon's reference, the same tests): xy (n, k, 2)
   batch-first ground points, the candidate edges' corner pairs first[p], second[p]. Per row, the k output rows
   are the hull edges in pair order, then the other pairs in pair order: normal (n, k, 2) outward unit normals,
   offset (n, k) with n . x <= offset inside, edge (n, k) 1 / 0. */
DISPATCH void KERNEL(hull_edges)(long n, long k, long p, const REAL *restrict xy, const long *restrict first,
                                 const long *restrict second, REAL *restrict normal, REAL *restrict offset,
                                 REAL *restrict edge) {
    const REAL tol = (REAL)(sizeof(REAL) == 4 ? 1e-5 : 1e-9);
    REAL *pair = malloc(sizeof(REAL) * 4 * p); /* per pair: its normal, offset and whether it is an edge */
    if (pair == 0) { /* out of memory: NaN everywhere */
        for (long i = 0; i < n * k; i++) normal[2 * i] = normal[2 * i + 1] = offset[i] = edge[i] = (REAL)NAN;
        return;
    }
    for (long r = 0; r < n; r++) {
        const REAL *pt = xy + r * k * 2;
        for (long e = 0; e < p; e++) {
            const REAL ax = pt[2 * first[e]], ay = pt[2 * first[e] + 1];
            const REAL ux = pt[2 * second[e]] - ax, uy = pt[2 * second[e] + 1] - ay;
            const REAL length = SQRT(ux * ux + uy * uy), inv = 1 / (length > (REAL)1e-12 ? length : (REAL)1e-12);
            const REAL length_sq = length * length > (REAL)1e-24 ? length * length : (REAL)1e-24;
            REAL nx = uy * inv, ny = -ux * inv;
            const REAL base = nx * ax + ny * ay;
            int outward = 1, inward = 1;
            for (long c = 0; c < k; c++) { /* branch-free: every corner's two tests */
                const REAL side = nx * pt[2 * c] + ny * pt[2 * c + 1] - base;
                const REAL t = ((pt[2 * c] - ax) * ux + (pt[2 * c + 1] - ay) * uy) / length_sq;
                const int off_line = FABS(side) > tol, between = (t >= -tol) & (t <= 1 + tol);
                outward &= (side <= tol) & (off_line | between);
                inward &= (side >= -tol) & (off_line | between);
            }
            if (inward && !outward) nx = -nx, ny = -ny;
            REAL *out = pair + 4 * e;
            out[0] = nx, out[1] = ny, out[2] = nx * ax + ny * ay, out[3] = (outward || inward) && length > tol;
        }
        REAL *nr = normal + r * k * 2, *orow = offset + r * k, *er = edge + r * k;
        long out = 0;
        for (int pass = 0; pass < 2; pass++) /* the edges, then the other pairs, each in pair order */
            for (long e = 0; e < p && out < k; e++) {
                const REAL *in = pair + 4 * e;
                if ((in[3] > 0) != (pass == 0)) continue;
                nr[2 * out] = in[0], nr[2 * out + 1] = in[1], orow[out] = in[2], er[out++] = in[3];
            }
    }
    free(pair);
}

#if defined(__GNUC__) && !defined(__clang__)
/* solve_qp's kernels, to the end of this file: a product and a sum fused into one FMA where the target has it (the
   x86-64-v3 clone). The chain and tree kernels above keep ISO rounding, so their results equal the torch ops'
   bit for bit where the tests ask it. */
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
#endif
/* solve_qp's interior point (kinematics.qp._ipm, the same arithmetic): Mehrotra predictor-corrector steps on the
   elastic QP. Unlike the tree's kernels these arrays are batch-FIRST and contiguous (one row's P at P + r n n, ...),
   as kinematics.qp holds them, except that row r's P starts at P + r p_stride (n n, or 0: one P for every row, a
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
/* solve_qp's active-set steps (kinematics.qp._polish_reference: the same guesses, rules and tests), from the
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
   reuse the factors. Outputs: sol (nb, n + me + mi) = [x; y; z], w (nb, n) signed bound multipliers, flags (nb,
   mi + 2 n) = active inequalities, fixed at ub, fixed at lb (1 / 0), rows (nb, 4) = status, primal residual, dual
   residual, whether the original system's solution was kept (1) or the elastic one (0). params = (elastic,
   tolerance, infeasibility tolerance). */
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

/* rows r0 .. r1 - 1 of M (m x m, lower triangle, row-major) <- those of V^T V, V n x stride */
static QP_INLINE void KERNEL(qp_gram_rows)(const REAL *restrict V, REAL *restrict M, long n, long stride, long m, long r0,
                                 long r1) {
    for (long a = r0; a < r1; a++)
        for (long b = 0; b <= a; b++) M[a * m + b] = 0;
    for (long i = 0; i < n; i++) {
        const REAL *restrict vi = V + i * stride;
        for (long a = r0; a < r1; a++) {
            const REAL via = vi[a];
            REAL *restrict ma = M + a * m;
            IVDEP for (long b = 0; b <= a; b++) ma[b] += via * vi[b];
        }
    }
}

static QP_INLINE void KERNEL(qp_upper_solve)(const REAL *restrict L, REAL *restrict v, long n) { /* v <- L^-T v */
    for (long i = n - 1; i >= 0; i--) {
        REAL t = v[i] / L[i * n + i];
        v[i] = t;
        for (long k = 0; k < i; k++) v[k] -= L[i * n + k] * t;
    }
}

static QP_INLINE int KERNEL(qp_cholesky_strict)(REAL *restrict L, REAL *restrict col, long n, REAL rel) {
    /* in place, right-looking (the updates are contiguous axpys that vectorise), lower triangle, row-major; col is
       n values of scratch. 0 (L half-written) when a pivot is <= rel (1 + the largest diagonal entry) */
    REAL big = 0;
    for (long i = 0; i < n; i++) big = FABS(L[i * n + i]) > big ? FABS(L[i * n + i]) : big;
    REAL floor = rel * (1 + big);
    for (long j = 0; j < n; j++) {
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

typedef struct {
    long n, m, stride, dense;
    REAL *L, *C, *V, *M, *K, *col; /* V = L^-1 C^T, n x stride (column k: row k of C) */
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
    for (long i = 0; i < n; i++) x[i] = f[i];
    KERNEL(qp_lower_solve)(F->L, x, n); /* u = L^-1 f */
    for (long k = 0; k < m; k++) nu[k] = -g[k]; /* V^T u - g */
    for (long i = 0; i < n; i++) {
        const REAL xi = x[i], *restrict vi = F->V + i * F->stride;
        IVDEP for (long k = 0; k < m; k++) nu[k] += vi[k] * xi;
    }
    if (m) {
        KERNEL(qp_lower_solve)(F->M, nu, m);
        KERNEL(qp_upper_solve)(F->M, nu, m);
    }
    for (long i = 0; i < n; i++) x[i] -= KERNEL(qp_dot)(F->V + i * F->stride, nu, m);
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
    return KERNEL(qp_cholesky_strict)(F->L, F->col, n, rel);
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

static QP_INLINE int KERNEL(qp_workspace_take)(KERNEL(qp_workspace) *W, long n, long me, long mi, long extra) {
    long mmax = me + mi + (n < QP_UNIT_ROWS ? n : QP_UNIT_ROWS), N = n + me + mi, Kmax = n + mmax;
    long reals = 3 * n * n + 2 * mmax * n + mmax * mmax + Kmax * Kmax + Kmax + 5 * mmax + 4 * N + 4 * n + me * me
                 + me * n;
    REAL *scratch = malloc(sizeof(REAL) * (reals + extra));
    long *piv = malloc(sizeof(long) * Kmax), *kind = malloc(sizeof(long) * (mmax + 2 * n));
    if (scratch == 0 || piv == 0 || kind == 0) {
        free(scratch), free(piv), free(kind);
        return 0;
    }
    KERNEL(qp_factors) F = {n, 0, mmax, 0, scratch, 0, 0, 0, 0, 0, piv};
    F.C = F.L + n * n;
    F.V = F.C + mmax * n;
    F.M = F.V + mmax * n;
    F.K = F.M + mmax * mmax;
    F.col = F.K + Kmax * Kmax;
    W->F = F, W->scratch = scratch, W->kind = kind, W->free_ = kind + mmax, W->all_ = W->free_ + n;
    for (long i = 0; i < n; i++) W->all_[i] = i;
    W->rhs = F.col + Kmax, W->D = W->rhs + mmax, W->nu = W->D + mmax, W->res_g = W->nu + mmax;
    W->unit_nu = W->res_g + mmax, W->sol_d = W->unit_nu + mmax, W->sol = W->sol_d + N, W->sol_dr = W->sol + N, W->solr = W->sol_dr + N;
    W->res_f = W->solr + N, W->dx = W->res_f + n, W->fr = W->dx + n, W->c = W->fr + n;
    W->M_eq = W->c + n, W->P = W->M_eq + me * me, W->Pr = W->P + n * n, W->Ar = W->Pr + n * n;
    W->extra = W->Ar + me * n;
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
   pair's midpoint; 0 where free, or where the bound is infinite, as kinematics.qp._kkt) */
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

/* The reduced Hessian P_FF on the nf free variables free_ (P itself where every variable is free, else gathered
   into Pr_buf), F->n = nf, and the factor of P_FF + elastic I into F->L; returns whether it factored */
static QP_INLINE int KERNEL(qp_reduce_hessian)(KERNEL(qp_factors) *F, const REAL *P, long n, const long *restrict free_,
                                               long nf, REAL *Pr_buf, const REAL **Pr, REAL d, REAL rel) {
    F->n = nf;
    *Pr = P;
    if (nf < n) {
        for (long a = 0; a < nf; a++)
            for (long b = 0; b < nf; b++) Pr_buf[a * nf + b] = P[free_[a] * n + free_[b]];
        *Pr = Pr_buf;
    }
    return KERNEL(qp_factor_hessian)(F, *Pr, d, rel);
}

/* The equality rows' free part A_F (A itself where every variable is free, else gathered into Ar_buf) and, where
   P_FF + elastic I factored, their columns of V and their Gram block M_eq */
static QP_INLINE void KERNEL(qp_reduce_equalities)(KERNEL(qp_factors) *F, const REAL *A, long n, long me,
                                                   const long *restrict free_, REAL *Ar_buf, const REAL **Ar,
                                                   REAL *restrict M_eq, int factored) {
    long nf = F->n;
    *Ar = A;
    if (nf < n) {
        for (long k = 0; k < me; k++)
            for (long a = 0; a < nf; a++) Ar_buf[k * nf + a] = A[k * n + free_[a]];
        *Ar = Ar_buf;
    }
    if (factored && me) {
        for (long k = 0; k < me; k++) /* A_F read in order */
            for (long a = 0; a < nf; a++) F->V[a * F->stride + k] = (*Ar)[k * nf + a];
        KERNEL(qp_lower_solve_columns)(F->L, F->V, nf, F->stride, 0, me);
        KERNEL(qp_gram_rows)(F->V, M_eq, nf, F->stride, me, 0, me);
    }
}

/* A system on the nf free variables free_: P_FF's factor (a P shared by every row, with every variable free: the
   thread's factor of it, kept in *full_factored, 1 / 0 whether it factored, -1 none), and A_F's columns of V and
   M_eq; returns whether P_FF + elastic I factored */
static QP_INLINE int KERNEL(qp_reduce_step)(KERNEL(qp_factors) *F, const REAL *P, const REAL *A, long n, long me,
                                            long p_stride, const long *restrict free_, long nf, REAL *Pr_buf,
                                            REAL *Ar_buf, const REAL **Pr, const REAL **Ar, REAL *restrict M_eq,
                                            REAL d, REAL rel, int *full_factored) {
    int factored;
    if (p_stride == 0 && nf == n && *full_factored >= 0) F->n = n, *Pr = P, factored = *full_factored;
    else {
        factored = KERNEL(qp_reduce_hessian)(F, P, n, free_, nf, Pr_buf, Pr, d, rel);
        *full_factored = p_stride == 0 && nf == n ? factored : -1;
    }
    KERNEL(qp_reduce_equalities)(F, A, n, me, free_, Ar_buf, Ar, M_eq, factored);
    return factored;
}

/* the objective's linear term on the system's F->n variables (map: their indices; those past F->n fixed at c):
   fr = -q_F - P_FX c_X */
static QP_INLINE void KERNEL(qp_linear_term)(const KERNEL(qp_factors) *F, const REAL *restrict P,
                                             const REAL *restrict q, long n, const long *restrict map,
                                             const REAL *restrict c, REAL *restrict fr) {
    for (long a = 0; a < F->n; a++) fr[a] = -q[map[a]] - KERNEL(qp_fixed_terms)(P + map[a] * n, map, F->n, n, c);
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
   returns whether it factored */
static QP_INLINE int KERNEL(qp_factor_active)(KERNEL(qp_factors) *F, const REAL *restrict P, REAL d,
                                              const REAL *restrict D, const REAL *restrict M_eq, long me, int factored,
                                              REAL rel, int dense) {
    long n = F->n, m = F->m, stride = F->stride;
    F->dense = !factored;
    if (!F->dense) {
        for (long i = 0; i < n; i++)
            for (long k = me; k < m; k++) F->V[i * stride + k] = F->C[k * n + i];
        KERNEL(qp_lower_solve_columns)(F->L, F->V, n, stride, me, m);
        KERNEL(qp_gram_rows)(F->V, F->M, n, stride, m, me, m);
        for (long k = 0; k < me; k++)
            for (long l = 0; l <= k; l++) F->M[k * m + l] = M_eq[k * me + l];
        for (long k = 0; k < m; k++) F->M[k * m + k] += D[k];
        F->dense = m > 0 && !KERNEL(qp_cholesky_strict)(F->M, F->col, m, rel);
    }
    if (F->dense && !dense) return 0;
    if (F->dense) {
        long K = n + m;
        for (long i = 0; i < n; i++) {
            for (long j = 0; j < n; j++) F->K[i * K + j] = P[i * n + j] + (i == j ? d : 0);
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
                                               REAL *restrict nu) {
    long n = F->n, m = F->m;
    KERNEL(qp_factored_solve)(F, f, rhs, dx, nu);
    for (long i = 0; i < N; i++) sol_d[i] = i < n ? dx[i] : 0;
    for (long k = 0; k < m; k++)
        if (kind[k] >= 0) sol_d[n + kind[k]] = nu[k];
        else unit_nu[k] = nu[k];
    for (long i = 0; i < N; i++) sol[i] = sol_d[i];
    for (long t = 0; t < refinements; t++) {
        for (long i = 0; i < n; i++) res_f[i] = f[i];
        for (long i = 0; i < n; i++) {
            REAL xi = sol[i];
            const REAL *restrict pi = P + i * n;
            IVDEP for (long j = 0; j < n; j++) res_f[j] -= pi[j] * xi;
        }
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
                                              long p_stride,
                                const REAL *restrict params, const REAL *restrict P_, const REAL *restrict q_,
                                const REAL *restrict A_, const REAL *restrict b_, const REAL *restrict G_,
                                const REAL *restrict h_, const REAL *restrict lb_, const REAL *restrict ub_,
                                const REAL *restrict z_, const REAL *restrict s_, const REAL *restrict zu_,
                                const REAL *restrict su_, const REAL *restrict zl_, const REAL *restrict sl_,
                                REAL *restrict sol_, REAL *restrict w_, REAL *restrict flags_, REAL *restrict rows_) {
    const REAL d = params[0], tol = params[1], inf_tol = params[2];
    const REAL rel = (REAL)(sizeof(REAL) == 4 ? 1e-5 : 1e-10);
    long N = n + me + mi;
    KERNEL(qp_workspace) W;
    if (!KERNEL(qp_workspace_take)(&W, n, me, mi, 4 * n + mi + 1)) { /* out of memory: every row's status is -1 */
        for (long r = lo; r < hi; r++) rows_[r * 4] = -1;
        return;
    }
    KERNEL(qp_factors) F = W.F;
    REAL *rhs = W.rhs, *D = W.D, *nu = W.nu, *res_g = W.res_g, *sol_d = W.sol_d, *sol = W.sol;
    REAL *sol_dr = W.sol_dr, *solr = W.solr, *res_f = W.res_f, *dx = W.dx, *M_eq = W.M_eq, *P = W.P, *Pr_buf = W.Pr;
    REAL *Ar_buf = W.Ar, *fr = W.fr, *c = W.c, *stat = W.extra, *w_pass = stat + n, *gx = w_pass + 2 * n;
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
        KERNEL(qp_row_hessian)(P_, r, lo, p_stride, n, P);
        long nf = 0, units = 0; /* units: the fixed variables kept as exact unit rows of the whole system instead */
        int refixed = 1, whole = 0; /* refixed: the fixed variables changed; whole: F holds this row's factor of
                                       P + elastic I and its equalities' V columns and M_eq, every variable free */
        const REAL *Pr = P, *Ar = A;
        int stat_of_sol = 0; /* stat and gx hold those of the final sol (the last step's test, repeated below) */
        for (long step = 0; step < (steps > 1 ? steps : 1); step++) {
            if (refixed) {
                nf = KERNEL(qp_free_variables)(n, upper, lower, lb, ub, free_, c);
                if (whole && n - nf <= QP_UNIT_ROWS) units = n - nf, F.n = n, Pr = P, Ar = A; /* at hand */
                else {
                    units = 0;
                    factored = KERNEL(qp_reduce_step)(&F, P, A, n, me, p_stride, free_, nf, Pr_buf, Ar_buf, &Pr, &Ar,
                                                      M_eq, d, rel, &full_factored);
                    whole = nf == n && factored;
                }
                KERNEL(qp_linear_term)(&F, P, q, n, units ? all_ : free_, c, fr);
            }
            int solved = 0;
            if (units) { /* a few variables fixed where the whole system's factor is at hand: their unit rows (D = 0,
                            as exact as the elimination) in the Schur complement, cheaper than refactoring P_FF */
                KERNEL(qp_active_rows)(&F, n, me, mi, d, A, A, b, G, h, act, all_, c, rhs, D, kind);
                for (long x = nf; x < n; x++) {
                    long i = free_[x], m = F.m++;
                    for (long j = 0; j < n; j++) F.C[m * n + j] = j == i;
                    rhs[m] = c[i], D[m] = 0, kind[m] = -1;
                }
                solved = KERNEL(qp_factor_active)(&F, P, d, D, M_eq, me, factored, rel, 0);
                if (solved) {
                    KERNEL(qp_solve_refined)(&F, P, fr, rhs, kind, refinements, N, sol_d, sol, unit_nu, res_f, res_g,
                                             dx, nu);
                    for (long x = nf; x < n; x++) sol_d[free_[x]] = sol[free_[x]] = c[free_[x]];
                } else { /* a unit row dependent on the others: the free variables' system after all */
                    factored = KERNEL(qp_reduce_step)(&F, P, A, n, me, p_stride, free_, nf, Pr_buf, Ar_buf, &Pr, &Ar,
                                                      M_eq, d, rel, &full_factored);
                    KERNEL(qp_linear_term)(&F, P, q, n, free_, c, fr);
                    units = whole = 0;
                }
            }
            if (!solved) {
                KERNEL(qp_active_rows)(&F, n, me, mi, d, Ar, A, b, G, h, act, free_, c, rhs, D, kind);
                KERNEL(qp_factor_active)(&F, Pr, d, D, M_eq, me, factored, rel, 1);
                /* the elastic solution, then `refinements` steps toward the original system (D = 0, no prox) */
                KERNEL(qp_solve_refined)(&F, Pr, fr, rhs, kind, refinements, nf + me + mi, sol_dr, solr, unit_nu, res_f,
                                         res_g, dx, nu);
                KERNEL(qp_expand)(n, nf, me + mi, free_, c, sol_dr, sol_d);
                KERNEL(qp_expand)(n, nf, me + mi, free_, c, solr, sol);
            }
            if (step + 1 < steps) { /* the next guess, from the refined point where finite, else the elastic one */
                int good = 1;
                for (long i = 0; i < N; i++) good &= isfinite(sol[i]) != 0;
                const REAL *s = good ? sol : sol_d;
                for (long i = 0; i < n; i++) stat[i] = q[i];
                for (long i = 0; i < n; i++) {
                    REAL xi = s[i];
                    const REAL *restrict pi = P + i * n;
                    IVDEP for (long j = 0; j < n; j++) stat[j] += pi[j] * xi;
                }
                for (long k = 0; k < me; k++) {
                    const REAL yk = s[n + k], *restrict ak = A + k * n;
                    IVDEP for (long j = 0; j < n; j++) stat[j] += ak[j] * yk;
                }
                for (long k = 0; k < mi; k++) {
                    const REAL zk = s[n + me + k], *restrict gk = G + k * n;
                    IVDEP for (long j = 0; j < n; j++) stat[j] += gk[j] * zk;
                    gx[k] = KERNEL(qp_dot)(gk, s, n);
                }
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
        /* SOLVED when the refined (else the elastic) point passes the KKT test, as in kinematics.qp._solve */
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
                for (long i = 0; i < n; i++) {
                    REAL xi = s[i];
                    const REAL *restrict pi = P + i * n;
                    IVDEP for (long j = 0; j < n; j++) stat[j] += pi[j] * xi;
                }
            }
            for (long k = 0; k < me; k++) {
                const REAL yk = s[n + k], *restrict ak = A + k * n;
                if (!reuse) IVDEP for (long j = 0; j < n; j++) stat[j] += ak[j] * yk;
                v = KERNEL(qp_max)(v, FABS(KERNEL(qp_dot)(ak, s, n) - b[k]));
            }
            for (long k = 0; k < mi; k++) {
                const REAL zk = s[n + me + k], *restrict gk = G + k * n;
                const REAL t = (reuse ? gx[k] : KERNEL(qp_dot)(gk, s, n)) - h[k];
                if (!reuse) IVDEP for (long j = 0; j < n; j++) stat[j] += gk[j] * zk;
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
    KERNEL(qp_workspace_free)(&W);
}

DISPATCH void KERNEL(qp_polish)(long nb, long threads, long n, long me, long mi, long steps, long refinements, long p_stride,
                                const REAL *restrict params, const REAL *restrict P_, const REAL *restrict q_,
                                const REAL *restrict A_, const REAL *restrict b_, const REAL *restrict G_,
                                const REAL *restrict h_, const REAL *restrict lb_, const REAL *restrict ub_,
                                const REAL *restrict z_, const REAL *restrict s_, const REAL *restrict zu_,
                                const REAL *restrict su_, const REAL *restrict zl_, const REAL *restrict sl_,
                                REAL *restrict sol_, REAL *restrict w_, REAL *restrict flags_, REAL *restrict rows_) {
    ROWS_IN_PARALLEL(nb, threads, 16, 1, KERNEL(qp_polish_rows)(lo, hi, n, me, mi, steps, refinements, p_stride, params, P_, q_,
                                                       A_, b_, G_, h_, lb_, ub_, z_, s_, zu_, su_, zl_, sl_, sol_, w_,
                                                       flags_, rows_));
}

/* solve_qp's backward (kinematics.qp_gradient): per row, the adjoint system of the final active set (flags_ as
   qp_polish writes them) on its free variables F, in the symmetric form the polish solves,

       [P_FF + elastic I   C_F^T] [u ]   [g_F]
       [C_F               -D    ] [nu] = [0  ],

   refined `refinements` times to the original system (D = 0, no prox) on the rows whose original point was kept
   (exact_ > 0), the elastic system's solution on the others. Outputs, in the convention of the KKT matrix the
   gradient differentiates (kinematics.qp._kkt, whose rows x_i = c_i fix a variable exactly): lx (nb, n) = u on free
   variables and, on a fixed one, its row's multiplier g_i - (P u + A^T nu_y + G^T nu_z)_i; ls (nb, n) = lx weighted
   as that matrix weighs each stationarity row (1 free, 0 fixed); ly (nb, me), lz (nb, mi) (0 on inactive rows).
   params = (elastic). Returns 0, or -1 where its scratch could not be allocated. */
static QP_INLINE long KERNEL(qp_adjoint_rows)(long lo, long hi, long n, long me, long mi, long refinements,
                                              long p_stride,
                                 const REAL *restrict params,
                                 const REAL *restrict P_, const REAL *restrict A_, const REAL *restrict G_,
                                 const REAL *restrict flags_, const REAL *restrict exact_, const REAL *restrict g_,
                                 REAL *restrict ls_, REAL *restrict lx_, REAL *restrict ly_, REAL *restrict lz_) {
    const REAL d = params[0], rel = (REAL)(sizeof(REAL) == 4 ? 1e-5 : 1e-10);
    KERNEL(qp_workspace) W;
    if (!KERNEL(qp_workspace_take)(&W, n, me, mi, 0)) return -1; /* out of memory: -1, for the caller */
    KERNEL(qp_factors) F = W.F;
    REAL *rhs = W.rhs, *D = W.D, *nu = W.nu, *res_g = W.res_g, *sol_dr = W.sol_dr, *solr = W.solr, *sol = W.sol;
    REAL *res_f = W.res_f, *dx = W.dx, *M_eq = W.M_eq, *P = W.P, *fr = W.fr, *c = W.c;
    long *kind = W.kind, *free_ = W.free_;
    int full_factored = -1; /* as in qp_polish_rows */
    for (long r = lo; r < hi; r++) {
        const REAL *A = A_ + r * me * n, *G = G_ + r * mi * n, *act = flags_ + r * (mi + 2 * n), *g = g_ + r * n;
        const REAL *Pr = P, *Ar = A;
        KERNEL(qp_row_hessian)(P_, r, lo, p_stride, n, P);
        long nf = KERNEL(qp_free_variables)(n, act + mi, act + mi + n, 0, 0, free_, c); /* c: 0, unused */
        int factored = KERNEL(qp_reduce_step)(&F, P, A, n, me, p_stride, free_, nf, W.Pr, W.Ar, &Pr, &Ar, M_eq, d, rel,
                                              &full_factored);
        KERNEL(qp_active_rows)(&F, n, me, mi, d, Ar, A, 0, G, 0, act, free_, c, rhs, D, kind);
        KERNEL(qp_factor_active)(&F, Pr, d, D, M_eq, me, factored, rel, 1);
        for (long a = 0; a < nf; a++) fr[a] = g[free_[a]];
        KERNEL(qp_solve_refined)(&F, Pr, fr, rhs, kind, exact_[r] > 0 ? refinements : 0, nf + me + mi, sol_dr, solr,
                                 W.unit_nu, res_f, res_g, dx, nu);
        KERNEL(qp_expand)(n, nf, me + mi, free_, c, solr, sol); /* u (0 on fixed variables), nu_y, nu_z */
        REAL *ls = ls_ + r * n, *lx = lx_ + r * n;
        for (long i = 0; i < n; i++) lx[i] = g[i]; /* fixed: g - P u - A^T nu_y - G^T nu_z */
        for (long i = 0; i < n; i++) {
            const REAL ui = sol[i], *restrict pi = P + i * n;
            IVDEP for (long j = 0; j < n; j++) lx[j] -= pi[j] * ui;
        }
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
                                                                             params, P_, A_, G_, flags_, exact_, g_,
                                                                             ls_, lx_, ly_, lz_));
    return result;
}

#undef QP_TINY
#undef QP_UNIT_ROWS
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
