/* The chain pass (FK + Jacobian), the DLS step's products J J^T + C and J^T x, the pose error and the closed-form
   backward passes (kinematics.model.chain, ik.dls_step, lie.pose_error, model.chain_gradient). ISO rounding (no contraction: the
   build's -std=c99 leaves GCC's fp-contract off), so the results equal the torch ops' where the tests ask it.

   Every array is batch-last and contiguous: x[k * n + b] is entry k of sample b. kinematics.native checks each
   tensor's device, dtype and exact shape before it hands a pointer to these functions. */
#ifndef REAL
#define KINEMATICS_UNIT "chain.c"
#include "per_type.h"
#else

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

/* The IK residual (kinematics.lie.pose_error): target minus reached position, and log(R_target R^T) by the formula of
   kinematics.lie.rotations.so3_log_matrix_first, branch for branch. Rotations (3, 3, n), positions (3, n) -> (6, n). */
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
   d/dR = G^T R_t (3, 3, n), with G the closed form of kinematics.lie.rotations.so3_log_matrix_first_vjp. */
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

/* The backward of the chain pass for an all-revolute chain (kinematics.model.chain_gradient): rot (3, 3, n) the TCP
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

#endif /* REAL */
