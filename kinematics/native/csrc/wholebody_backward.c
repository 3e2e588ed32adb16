/* The whole-body cascade step's backward (kinematics.wholebody.step_kernel): one step's gradients from its output q
   and step dq back to the targets and, where asked, to q. It recomputes the step's rows from the forward's saved
   solutions, multipliers and active sets (wholebody_step.c), goes back through each level's QP (solve_qp's
   formulas), the rows and the kinematics (a sweep of summed moments and forces up the tree), in double, by the same
   chunks of rows as the forward (wholebody_shared.h). */
#ifndef REAL
#define KINEMATICS_UNIT "wholebody_backward.c"
#include "per_type.h"
#else

#include "wholebody_shared.h"

/* One row's wb_integrate backward w.r.t. dq: out (nv) += (d out / d dq)^T g for the gradient g (nq) on its output, in
   double, the derivative of free_flyer.integrate's formula (the series' on their branch) on the base. */
static void KERNEL(wb_integrate_vjp)(long nq, long floating, const REAL *restrict q, const REAL *restrict dq,
                                     const REAL *restrict g, double *restrict out) {
    long joints = floating ? 7 : 0, tangent = floating ? 6 : 0;
    for (long j = 0; j < nq - joints; j++) out[tangent + j] += (double)g[joints + j];
    if (!floating) return;
    double qx = q[3], qy = q[4], qz = q[5], qw = q[6], w[3] = {dq[3], dq[4], dq[5]}, v[3] = {dq[0], dq[1], dq[2]};
    double t2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2], t = sqrt(t2), b, c, hs, hc, db, dc, dhs, dhc; /* d./d(t^2) */
    if (t < (sizeof(REAL) == 4 ? 0.2 : 1e-2)) {
        b = 0.5 - t2 / 24.0 + t2 * t2 / 720.0, db = -1.0 / 24.0 + t2 / 360.0;
        c = 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0, dc = -1.0 / 120.0 + t2 / 2520.0;
        hs = 0.5 - t2 / 48.0 + t2 * t2 / 3840.0, dhs = -1.0 / 48.0 + t2 / 1920.0;
        hc = 1.0 - t2 / 8.0 + t2 * t2 / 384.0, dhc = -1.0 / 8.0 + t2 / 192.0;
    } else {
        double sn = sin(t), cs = cos(t), hsn = sin(0.5 * t), hcs = cos(0.5 * t);
        b = (1.0 - cs) / (t * t), db = (t * sn - 2.0 * (1.0 - cs)) / (2.0 * t2 * t2);
        c = (t - sn) / (t * t * t), dc = ((1.0 - cs) * t - 3.0 * (t - sn)) / (2.0 * t2 * t2 * t);
        hs = hsn / t, dhs = (0.5 * t * hcs - hsn) / (2.0 * t2 * t);
        hc = hcs, dhc = -hsn / (4.0 * t);
    }
#define WB_CROSS(x, y, o) (o[0] = x[1] * y[2] - x[2] * y[1], o[1] = x[2] * y[0] - x[0] * y[2], o[2] = x[0] * y[1] - x[1] * y[0])
    /* position: p + R(q) s, s = v + b a + c w x a, a = w x v; gs = R^T g_p */
    double s = 2.0 / (qx * qx + qy * qy + qz * qz + qw * qw);
    double xs = qx * s, ys = qy * s, zs = qz * s, wxs = qw * xs, wys = qw * ys, wzs = qw * zs;
    double xx = qx * xs, xy = qx * ys, xz = qx * zs, yy = qy * ys, yz = qy * zs, zz = qz * zs;
    double R[9] = {1.0 - (yy + zz), xy - wzs, xz + wys, xy + wzs, 1.0 - (xx + zz), yz - wxs, xz - wys, yz + wxs,
                   1.0 - (xx + yy)};
    double gs[3], a[3], wa[3], wg[3], wwg[3], vg[3], ag[3], gw[3], vgw[3];
    for (int i = 0; i < 3; i++) gs[i] = R[i] * g[0] + R[3 + i] * g[1] + R[6 + i] * g[2];
    WB_CROSS(w, v, a);
    WB_CROSS(w, a, wa);
    WB_CROSS(w, gs, wg);
    WB_CROSS(w, wg, wwg);
    WB_CROSS(v, gs, vg);
    WB_CROSS(a, gs, ag);
    WB_CROSS(gs, w, gw);
    WB_CROSS(v, gw, vgw);
    double ga = gs[0] * a[0] + gs[1] * a[1] + gs[2] * a[2], gwa = gs[0] * wa[0] + gs[1] * wa[1] + gs[2] * wa[2];
    double grad_w[3];
    for (int i = 0; i < 3; i++) {
        out[i] += gs[i] - b * wg[i] + c * wwg[i]; /* (I + b W + c W^2)^T gs */
        grad_w[i] = 2.0 * w[i] * (db * ga + dc * gwa) + b * vg[i] + c * (ag[i] + vgw[i]);
    }
    /* quaternion: n / |n|, n = q * (hs w, hc) */
    double px = hs * w[0], py = hs * w[1], pz = hs * w[2], pw = hc;
    double nx = qw * px + qx * pw + qy * pz - qz * py, ny = qw * py - qx * pz + qy * pw + qz * px;
    double nz = qw * pz + qx * py - qy * px + qz * pw, nw = qw * pw - qx * px - qy * py - qz * pz;
    double norm = sqrt(nx * nx + ny * ny + nz * nz + nw * nw), o[4] = {nx / norm, ny / norm, nz / norm, nw / norm};
    double go = o[0] * g[3] + o[1] * g[4] + o[2] * g[5] + o[3] * g[6], gn[4];
    for (int i = 0; i < 4; i++) gn[i] = ((double)g[3 + i] - o[i] * go) / norm;
    double ge[4] = {qw * gn[0] + qz * gn[1] - qy * gn[2] - qx * gn[3], -qz * gn[0] + qw * gn[1] + qx * gn[2] - qy * gn[3],
                    qy * gn[0] - qx * gn[1] + qw * gn[2] - qz * gn[3], qx * gn[0] + qy * gn[1] + qz * gn[2] + qw * gn[3]};
    double gew = ge[0] * w[0] + ge[1] * w[1] + ge[2] * w[2];
    for (int i = 0; i < 3; i++) out[3 + i] += grad_w[i] + hs * ge[i] + 2.0 * w[i] * (dhs * gew + dhc * ge[3]);
#undef WB_CROSS
}

/* The world angular velocity of the root frame per unit change of each quaternion coordinate of q (x, y, z, w;
   any norm: R is q / |q|'s rotation): omega_k = (2 / |q|) vec(e_k conj(q / |q|)), as out[3 k + r]. */
static void KERNEL(wb_quaternion_rates)(const REAL *quaternion, double *out) {
    double x = quaternion[0], y = quaternion[1], z = quaternion[2], w = quaternion[3];
    double norm = sqrt(x * x + y * y + z * z + w * w), f = 2.0 / norm;
    x /= norm, y /= norm, z /= norm, w /= norm;
    double rates[12] = {w, z, -y, -z, w, x, y, -x, w, -x, -y, -z}; /* w u_k - u_k x v (k = x, y, z), then -v */
    for (int e = 0; e < 12; e++) out[e] = f * rates[e];
}

/* A point x attached to slot s with gradient g: F[s] += g, M[s] += x x g; a direction v (no point): M[s] += v x g. */
static void KERNEL(wb_attach)(double *F, double *M, long s, const double *x, const double *g, int point) {
    if (point)
        for (int r = 0; r < 3; r++) F[3 * s + r] += g[r];
    M[3 * s] += x[1] * g[2] - x[2] * g[1];
    M[3 * s + 1] += x[2] * g[0] - x[0] * g[2];
    M[3 * s + 2] += x[0] * g[1] - x[1] * g[0];
}

static void KERNEL(wb_cross)(const double *a, const double *b, double *out) {
    out[0] = a[1] * b[2] - a[2] * b[1], out[1] = a[2] * b[0] - a[0] * b[2], out[2] = a[0] * b[1] - a[1] * b[0];
}

/* Row i's gradient w.r.t. its configuration q (n rows' scratch S, its tree pass done) of the kinematics the step read,
   from their gradients gk (wb_kinematics_size's layout): gq (nq, double) += it. Each pose, Jacobian column and the
   centre of mass is a sum of points and directions carried by the tree's slots (a frame's origin and axes, a
   joint's axis and origin, a slot's first moment); a joint's coordinate turns (or slides) its subtree about (along)
   its axis, so its derivative is the axis against the subtree's summed moment and force, F = sum g, M = sum x x g
   (z . (M - o x F); slid: z . F), and the free flyer's are F (its position) and, per quaternion coordinate, its
   rotation rate against M - t x F. work: 4 (m + 1) * 3 doubles. */
static void KERNEL(wb_kinematics_vjp)(long i, long n, const long long *plan, const void *const *arrays,
                                      const KERNEL(wb_scratch) *S, const double *gk, double *work, double *gq) {
    long m = plan[WB_M], nq = plan[WB_NQ], nv = plan[WB_NV], base_nv = plan[WB_BASE_NV], frames = plan[WB_FRAMES];
    const long long *frame = plan + WB_HEADER;
    double *F = work, *M = F + 3 * (m + 1), *first = M + 3 * (m + 1), *down = first + 3 * (m + 1);
    for (long e = 0; e < 6 * (m + 1); e++) work[e] = 0;
#define WB_NODE(s, e) ((double)S->nodes[(12 * (s) + (e)) * n + i])
    double t[3] = {WB_NODE(0, 3), WB_NODE(0, 7), WB_NODE(0, 11)}, axis[3][3], cross[3];
    for (int k = 0; k < 3; k++) axis[k][0] = WB_NODE(0, k), axis[k][1] = WB_NODE(0, 4 + k), axis[k][2] = WB_NODE(0, 8 + k);
    const double *gpose = gk, *gjac = gk + frames * 16, *gcom = gjac + frames * 6 * nv, *gcom_jac = gcom + 3;
    for (long f = 0; f < frames; f++) {
        long slot = frame[2 * f], k = frame[2 * f + 1];
        const REAL *pose = S->poses + (f * n + i) * 16;
        const double *gp = gpose + f * 16, *G = gjac + f * 6 * nv;
        double p[3] = {pose[3], pose[7], pose[11]}, gpoint[3] = {gp[3], gp[7], gp[11]};
        for (int c = 0; c < 3; c++) { /* the pose's axes */
            double v[3] = {pose[c], pose[4 + c], pose[8 + c]}, g[3] = {gp[c], gp[4 + c], gp[8 + c]};
            KERNEL(wb_attach)(F, M, slot, v, g, 0);
        }
        for (int c = 0; c < 3 && base_nv; c++) { /* the free flyer's columns: [a_c; 0] and [a_c x (p - t); a_c] */
            double lin[3] = {G[c], G[nv + c], G[2 * nv + c]}, turn[3] = {G[3 + c], G[nv + 3 + c], G[2 * nv + 3 + c]};
            double ang[3] = {G[3 * nv + 3 + c], G[4 * nv + 3 + c], G[5 * nv + 3 + c]}, arm[3], ga[3], gt[3];
            for (int r = 0; r < 3; r++) arm[r] = p[r] - t[r];
            KERNEL(wb_cross)(arm, turn, ga);
            for (int r = 0; r < 3; r++) ga[r] += lin[r] + ang[r];
            KERNEL(wb_cross)(turn, axis[c], cross);
            for (int r = 0; r < 3; r++) gpoint[r] += cross[r], gt[r] = -cross[r];
            KERNEL(wb_attach)(F, M, 0, axis[c], ga, 0);
            KERNEL(wb_attach)(F, M, 0, t, gt, 1);
        }
        const void *const *chain = arrays + WB_ARRAYS + 5 * f;
        const long long *ancestors = chain[1], *dofs = chain[2];
        const REAL *weights = chain[3], *revolute = chain[4];
        for (long j = 0; j < k; j++) { /* w [z x (p - o); z] (revolute) or w [z; 0] */
            long s = ancestors[j], col = base_nv + dofs[j];
            double w = weights[j], z[3] = {WB_NODE(s, 2), WB_NODE(s, 6), WB_NODE(s, 10)};
            double o[3] = {WB_NODE(s, 3), WB_NODE(s, 7), WB_NODE(s, 11)}, lin[3], gz[3], go[3];
            for (int r = 0; r < 3; r++) lin[r] = w * G[r * nv + col];
            if (revolute[j] != 0) {
                double arm[3] = {p[0] - o[0], p[1] - o[1], p[2] - o[2]};
                KERNEL(wb_cross)(arm, lin, gz);
                for (int r = 0; r < 3; r++) gz[r] += w * G[(3 + r) * nv + col];
                KERNEL(wb_cross)(lin, z, cross);
                for (int r = 0; r < 3; r++) gpoint[r] += cross[r], go[r] = -cross[r];
                KERNEL(wb_attach)(F, M, s, o, go, 1);
            } else {
                for (int r = 0; r < 3; r++) gz[r] = lin[r];
            }
            KERNEL(wb_attach)(F, M, s, z, gz, 0);
        }
        KERNEL(wb_attach)(F, M, slot, p, gpoint, 1);
    }
    const long long *parent = arrays[WB_PARENT], *column = arrays[WB_COLUMN];
    const REAL *revolute = arrays[WB_REVOLUTE], *multiplier = arrays[WB_MULTIPLIER];
    if (plan[WB_COM]) { /* c = sum_s S_s / total, S_s = m_s x_s a slot's first moment; its Jacobian's columns */
        const REAL *moment = arrays[WB_MOMENT], *subtree_mass = arrays[WB_SUBTREE_MASS];
        const long long *dof = arrays[WB_DOF];
        double total = ((const REAL *)arrays[WB_TOTAL])[0], c[3] = {0, 0, 0}, gc[3] = {gcom[0], gcom[1], gcom[2]};
        for (long s = 0; s <= m; s++)
            for (int r = 0; r < 3; r++) {
                double v = 0;
                for (int e = 0; e < 4; e++) v += WB_NODE(s, 4 * r + e) * (double)moment[4 * s + e];
                first[3 * s + r] = v, c[r] += v;
            }
        for (int r = 0; r < 3; r++) c[r] /= total;
        for (int k = 0; k < 3 && base_nv; k++) { /* [a_k] and [a_k x (c - t)] */
            double lin[3], turn[3], arm[3] = {c[0] - t[0], c[1] - t[1], c[2] - t[2]}, ga[3], gt[3];
            for (int r = 0; r < 3; r++) lin[r] = gcom_jac[r * nv + k], turn[r] = gcom_jac[r * nv + 3 + k];
            KERNEL(wb_cross)(arm, turn, ga);
            for (int r = 0; r < 3; r++) ga[r] += lin[r];
            KERNEL(wb_cross)(turn, axis[k], cross);
            for (int r = 0; r < 3; r++) gc[r] += cross[r], gt[r] = -cross[r];
            KERNEL(wb_attach)(F, M, 0, axis[k], ga, 0);
            KERNEL(wb_attach)(F, M, 0, t, gt, 1);
        }
        /* the subtrees' first moments (the root's slot apart, as tree_com), into `down`, then per node its column
           w / total [z x (Sub - M_i o)] (revolute) or w / total M_i z; what Sub's gradient asks of each slot below
           node i, (w / total) g x z, summed from the root down in `down` (a node's slot follows its parent's) */
        for (long e = 0; e < 3 * (m + 1); e++) down[e] = first[e];
        for (long node = m - 1; node >= 0; node--)
            if (parent[node] > 0)
                for (int r = 0; r < 3; r++) down[3 * parent[node] + r] += down[3 * (node + 1) + r];
        for (long node = 0; node < m; node++) {
            long s = node + 1, col = base_nv + dof[node];
            double kappa = (double)multiplier[node] / total, mass = subtree_mass[node], g[3], gz[3], go[3];
            double z[3] = {WB_NODE(s, 2), WB_NODE(s, 6), WB_NODE(s, 10)}, o[3] = {WB_NODE(s, 3), WB_NODE(s, 7), WB_NODE(s, 11)};
            for (int r = 0; r < 3; r++) g[r] = kappa * gcom_jac[r * nv + col];
            double *below = down + 3 * s, above[3] = {0, 0, 0};
            if (parent[node] > 0)
                for (int r = 0; r < 3; r++) above[r] = down[3 * parent[node] + r];
            if (revolute[node] != 0) {
                double arm[3] = {below[0] - mass * o[0], below[1] - mass * o[1], below[2] - mass * o[2]};
                KERNEL(wb_cross)(arm, g, gz);
                KERNEL(wb_cross)(z, g, go);
                for (int r = 0; r < 3; r++) go[r] *= mass;
                KERNEL(wb_attach)(F, M, s, o, go, 1);
                KERNEL(wb_cross)(g, z, below); /* Sub is read: `down` now holds the sums from the root */
            } else {
                for (int r = 0; r < 3; r++) gz[r] = mass * g[r], below[r] = 0;
            }
            for (int r = 0; r < 3; r++) below[r] += above[r];
            KERNEL(wb_attach)(F, M, s, z, gz, 0);
        }
        for (long s = 0; s <= m; s++) { /* each slot's point x_s = S_s / m_s, gradient m_s (gc / total + down_s) */
            double mass = moment[4 * s + 3], v[3];
            if (mass == 0) continue;
            for (int r = 0; r < 3; r++) v[r] = gc[r] / total + (s > 0 ? down[3 * s + r] : 0.0);
            for (int r = 0; r < 3; r++) F[3 * s + r] += mass * v[r];
            KERNEL(wb_cross)(first + 3 * s, v, cross);
            for (int r = 0; r < 3; r++) M[3 * s + r] += cross[r];
        }
    }
    for (long node = m - 1; node >= 0; node--) /* the subtrees' sums, the root's slot the whole tree's */
        for (int r = 0; r < 3; r++) F[3 * parent[node] + r] += F[3 * (node + 1) + r], M[3 * parent[node] + r] += M[3 * (node + 1) + r];
    for (long node = 0; node < m; node++) {
        long s = node + 1;
        double z[3] = {WB_NODE(s, 2), WB_NODE(s, 6), WB_NODE(s, 10)}, o[3] = {WB_NODE(s, 3), WB_NODE(s, 7), WB_NODE(s, 11)};
        double value = 0;
        KERNEL(wb_cross)(o, F + 3 * s, cross);
        for (int r = 0; r < 3; r++) value += z[r] * (revolute[node] != 0 ? M[3 * s + r] - cross[r] : F[3 * s + r]);
        gq[column[node]] += (double)multiplier[node] * value;
    }
    if (plan[WB_FLOATING]) {
        double rates[12], W[3];
        KERNEL(wb_quaternion_rates)(S->q + i * nq + 3, rates);
        KERNEL(wb_cross)(t, F, cross);
        for (int r = 0; r < 3; r++) gq[r] += F[r], W[r] = M[r] - cross[r];
        for (int k = 0; k < 4; k++) gq[3 + k] += rates[3 * k] * W[0] + rates[3 * k + 1] * W[1] + rates[3 * k + 2] * W[2];
    }
#undef WB_NODE
}

/* One row's wb_integrate backward w.r.t. q: out (nq) += (d out / d q)^T g for the gradient g (nq) on its output, in
   double: the joints' identity, and on the base the position's and the quaternion's (q * exp(w), normalised) through
   the root's rotation rates. */
static void KERNEL(wb_integrate_q_vjp)(long nq, long floating, const REAL *restrict q, const REAL *restrict dq,
                                       const REAL *restrict g, double *restrict out) {
    long joints = floating ? 7 : 0;
    for (long j = joints; j < nq; j++) out[j] += (double)g[j];
    if (!floating) return;
    double qx = q[3], qy = q[4], qz = q[5], qw = q[6], wx = dq[3], wy = dq[4], wz = dq[5];
    double vx = dq[0], vy = dq[1], vz = dq[2];
    double b, c, hs, hc;
    KERNEL(wb_exp_coefficients)(wx * wx + wy * wy + wz * wz, &b, &c, &hs, &hc);
    double ax = wy * vz - wz * vy, ay = wz * vx - wx * vz, az = wx * vy - wy * vx; /* w x v */
    double sv[3] = {vx + b * ax + c * (wy * az - wz * ay), vy + b * ay + c * (wz * ax - wx * az),
                    vz + b * az + c * (wx * ay - wy * ax)};
    double s = 2.0 / (qx * qx + qy * qy + qz * qz + qw * qw);
    double xs = qx * s, ys = qy * s, zs = qz * s, wxs = qw * xs, wys = qw * ys, wzs = qw * zs;
    double xx = qx * xs, xy = qx * ys, xz = qx * zs, yy = qy * ys, yz = qy * zs, zz = qz * zs;
    double R[9] = {1.0 - (yy + zz), xy - wzs, xz + wys, xy + wzs, 1.0 - (xx + zz), yz - wxs, xz - wys, yz + wxs,
                   1.0 - (xx + yy)};
    double moved[3], gp[3] = {g[0], g[1], g[2]}, turn[3], rates[12];
    for (int r = 0; r < 3; r++) moved[r] = R[3 * r] * sv[0] + R[3 * r + 1] * sv[1] + R[3 * r + 2] * sv[2];
    KERNEL(wb_cross)(moved, gp, turn); /* d(R s)/dq_k = omega_k x R s */
    KERNEL(wb_quaternion_rates)(q + 3, rates);
    for (int r = 0; r < 3; r++) out[r] += gp[r];
    for (int k = 0; k < 4; k++) out[3 + k] += rates[3 * k] * turn[0] + rates[3 * k + 1] * turn[1] + rates[3 * k + 2] * turn[2];
    double px = hs * wx, py = hs * wy, pz = hs * wz, pw = hc; /* n = q * p, out = n / |n| */
    double nx = qw * px + qx * pw + qy * pz - qz * py, ny = qw * py - qx * pz + qy * pw + qz * px;
    double nz = qw * pz + qx * py - qy * px + qz * pw, nw = qw * pw - qx * px - qy * py - qz * pz;
    double norm = sqrt(nx * nx + ny * ny + nz * nz + nw * nw), o[4] = {nx / norm, ny / norm, nz / norm, nw / norm};
    double go = o[0] * g[3] + o[1] * g[4] + o[2] * g[5] + o[3] * g[6], gn[4];
    for (int e = 0; e < 4; e++) gn[e] = ((double)g[3 + e] - o[e] * go) / norm;
    out[3] += pw * gn[0] - pz * gn[1] + py * gn[2] - px * gn[3];
    out[4] += pz * gn[0] + pw * gn[1] - px * gn[2] - py * gn[3];
    out[5] += -py * gn[0] + px * gn[1] + pw * gn[2] - pz * gn[3];
    out[6] += px * gn[0] + py * gn[1] + pz * gn[2] + pw * gn[3];
}

/* The values per row of the kinematics' gradients the configuration's gradient collects (wb_kinematics_vjp's gk): each
   frame's pose (16, a 4 x 4 pose's row-major entries) and Jacobian (6 nv), the centre of mass (3) and its Jacobian (3
   nv), then q itself (nq: the posture's errors and the configuration limits). */
static long KERNEL(wb_kinematics_size)(const long long *plan) {
    long nv = plan[WB_NV];
    return plan[WB_FRAMES] * (16 + 6 * nv) + 3 + 3 * nv + plan[WB_NQ];
}

/* The doubles per row wb_backward_chunk takes after the step's scratch (wb_layout): each level's step gradient
   (levels nv), the adjoint's right-hand side and its four outputs (3 nv + the most equalities + mi), the flags (mi + 2
   nv), the exact flag (1), the residuals' gradient (the levels' rows); for the configuration's gradient the levels'
   rows' (their rows times nv), the contacts' rows' (me (nv + 1)), the inequalities' (mi (nv + 1)), the bounds' (2 nv),
   each level's step (levels nv), the kinematics' (wb_kinematics_size) and wb_kinematics_vjp's work (12 (m + 1)), where
   `configuration` asks for it. */
static size_t KERNEL(wb_backward_doubles)(const long long *plan, int configuration) {
    long nv = plan[WB_NV], mi = plan[WB_MI], me = plan[WB_ME], levels = plan[WB_LEVELS], total_rows = 0;
    for (long k = 0; k < levels; k++) total_rows += plan[WB_HEADER + 2 * plan[WB_FRAMES] + k];
    size_t targets = (size_t)levels * nv + 3 * nv + (me + total_rows) + mi + (mi + 2 * nv) + 1 + total_rows;
    if (!configuration) return targets;
    return targets + (size_t)total_rows * nv + (size_t)me * (nv + 1) + (size_t)mi * (nv + 1) + 2 * nv
           + (size_t)levels * nv + KERNEL(wb_kinematics_size)(plan) + 12 * (plan[WB_M] + 1);
}

/* out[i] += a[i] u + b[i] w over rows i < rows of length nv: a rank-two update of row-major rows */
static void KERNEL(wb_outer_pair)(long rows, long nv, const double *a, const double *u, const double *b,
                                  const double *w, double *out) {
    for (long i = 0; i < rows; i++)
        for (long e = 0; e < nv; e++) out[i * nv + e] += a[i] * u[e] + b[i] * w[e];
}

/* A frame's pose error (position target - p, rotation log(R_target R^T)) to its target: out (4 x 4, the target's
   shape) = the target's gradient for the error's gradient grad_error (6: position, then rotation). */
static void KERNEL(wb_pose_error_to_target)(const REAL *target, const REAL *pose, const REAL *grad_error,
                                            const double *settings, REAL *out) {
    REAL tr[9], r[9], grad_tr[9], grad_r_unused[9];
    for (int a = 0; a < 3; a++)
        for (int c = 0; c < 3; c++) tr[3 * a + c] = target[4 * a + c], r[3 * a + c] = pose[4 * a + c];
    KERNEL(pose_error_vjp)(1, tr, r, grad_error + 3, grad_tr, grad_r_unused, (REAL)settings[WB_SMALL_SIN_SQ],
                           (REAL)settings[WB_NEAR_PI_COS]);
    for (int a = 0; a < 3; a++) {
        for (int c = 0; c < 3; c++) out[4 * a + c] = grad_tr[3 * a + c];
        out[4 * a + 3] = grad_error[a];
    }
    for (int c = 0; c < 4; c++) out[12 + c] = 0;
}

/* torch.maximum's (sign 1) or torch.minimum's (sign -1) share of the gradient for its first argument x against y */
static double KERNEL(wb_extremum_share)(double x, double y, double sign) {
    return sign * (x - y) > 0 ? 1.0 : x == y ? 0.5 : 0.0;
}

/* A frame's pose error (position target - p, rotation log(R_target R^T)) to the pose: grad_pose (4 x 4) += the
   pose's gradient for the error's gradient grad_error (6). */
static void KERNEL(wb_pose_error_to_pose)(const REAL *target, const REAL *pose, const double *grad_error,
                                          const double *settings, double *grad_pose) {
    REAL tr[9], r[9], g[3], grad_tr[9], grad_r[9];
    for (int a = 0; a < 3; a++) {
        for (int c = 0; c < 3; c++) tr[3 * a + c] = target[4 * a + c], r[3 * a + c] = pose[4 * a + c];
        g[a] = (REAL)grad_error[3 + a];
        grad_pose[4 * a + 3] -= grad_error[a];
    }
    KERNEL(pose_error_vjp)(1, tr, r, g, grad_tr, grad_r, (REAL)settings[WB_SMALL_SIN_SQ], (REAL)settings[WB_NEAR_PI_COS]);
    for (int a = 0; a < 3; a++)
        for (int c = 0; c < 3; c++) grad_pose[4 * a + c] += (double)grad_r[3 * a + c];
}

/* wb_relative's backward: the gradients of the relative pose (grad_pose, 4 x 4: its rotation's and position's entries)
   and of its Jacobian (grad_jacobian, 6 x nv) to the root's and the frame's poses (g_root, g_frame, 4 x 4) and
   Jacobians (gJ_root, gJ_frame, 6 x nv), added. With d = p_frame - p_root: R = R_root^T R_frame, p = R_root^T d, and
   per column the rotated [L; A], L = J_frame_lin - J_root_lin + d x w (w: J_root_ang's column), A = J_frame_ang - w. */
static void KERNEL(wb_relative_vjp)(long nv, const REAL *root, const REAL *frame, const REAL *J_root,
                                    const REAL *J_frame, const double *grad_pose, const double *grad_jacobian,
                                    double *g_root, double *g_frame, double *gJ_root, double *gJ_frame) {
    double Rr[3][3], Rf[3][3], d[3], gd[3] = {0, 0, 0}, gRr[3][3] = {{0}}, gRf[3][3] = {{0}};
    for (int k = 0; k < 3; k++) {
        for (int a = 0; a < 3; a++) Rr[k][a] = root[4 * k + a], Rf[k][a] = frame[4 * k + a];
        d[k] = (double)frame[4 * k + 3] - (double)root[4 * k + 3];
    }
    for (int k = 0; k < 3; k++)
        for (int a = 0; a < 3; a++) {
            double gp = grad_pose[4 * a + 3];
            for (int c = 0; c < 3; c++) {
                double gR = grad_pose[4 * a + c]; /* R[a][c] = sum_k Rr[k][a] Rf[k][c] */
                gRr[k][a] += Rf[k][c] * gR, gRf[k][c] += Rr[k][a] * gR;
            }
            gRr[k][a] += d[k] * gp, gd[k] += Rr[k][a] * gp; /* p[a] = sum_k Rr[k][a] d[k] */
        }
    for (long e = 0; e < nv; e++) {
        double w[3], L[3], A[3], gL[3], gA[3], cross[3];
        for (int k = 0; k < 3; k++) w[k] = J_root[(3 + k) * nv + e];
        KERNEL(wb_cross)(d, w, cross);
        for (int k = 0; k < 3; k++) {
            L[k] = (double)J_frame[k * nv + e] - (double)J_root[k * nv + e] + cross[k];
            A[k] = (double)J_frame[(3 + k) * nv + e] - w[k];
        }
        for (int k = 0; k < 3; k++) {
            gL[k] = gA[k] = 0;
            for (int a = 0; a < 3; a++) {
                double gl = grad_jacobian[a * nv + e], ga = grad_jacobian[(3 + a) * nv + e];
                gRr[k][a] += L[k] * gl + A[k] * ga;
                gL[k] += Rr[k][a] * gl, gA[k] += Rr[k][a] * ga;
            }
        }
        for (int k = 0; k < 3; k++) {
            gJ_frame[k * nv + e] += gL[k], gJ_root[k * nv + e] -= gL[k];
            gJ_frame[(3 + k) * nv + e] += gA[k], gJ_root[(3 + k) * nv + e] -= gA[k];
        }
        KERNEL(wb_cross)(gL, d, cross); /* d x w: to w, gL x d; to d, w x gL */
        for (int k = 0; k < 3; k++) gJ_root[(3 + k) * nv + e] += cross[k];
        KERNEL(wb_cross)(w, gL, cross);
        for (int k = 0; k < 3; k++) gd[k] += cross[k];
    }
    for (int k = 0; k < 3; k++) {
        for (int a = 0; a < 3; a++) g_root[4 * k + a] += gRr[k][a], g_frame[4 * k + a] += gRf[k][a];
        g_frame[4 * k + 3] += gd[k], g_root[4 * k + 3] -= gd[k];
    }
}

/* Whether a contact's anchor or the support polygon's prepared normals or offsets are wanted (grad_targets not NULL):
   their gradients come from the QP's matrices' (the contacts' b, the inequalities' G and h), as the configuration's
   do. */
static int KERNEL(wb_constraint_targets_wanted)(const long long *plan, void *const *grad_targets) {
    long frames = plan[WB_FRAMES], levels = plan[WB_LEVELS];
    const long long *record = plan + WB_HEADER + 2 * frames + levels;
    for (long b = 0; b < plan[WB_BLOCKS]; b++, record += WB_RECORD) {
        long type = record[WB_TYPE], t = record[WB_TARGET];
        if (type == WB_CONTACT && grad_targets[t]) return 1;
        if (type == WB_SUPPORT_POLYGON && (grad_targets[t] || grad_targets[t + 1])) return 1;
    }
    return 0;
}

/* The backward of one step of rows [lo, hi) (their step dq, their forward saved in `saved`, WB_SAVED_DOUBLES values
   per row, their levels' statuses in `status`) w.r.t. the tasks' targets and, where grad_q is not NULL, the
   configuration q, for the upstream gradients grad_q_next and grad_dq: the gradient the torch
   composition's autograd gives (kinematics.wholebody.cascade, kinematics.qp.gradient), step by step in reverse. The
   integration's derivative w.r.t. the step (wb_integrate_vjp), then level by level the selection (its solution where
   SOLVED; else the level above's step, or for the first level its solution clamped to the step's bounds, a tie's
   gradient halved as torch.maximum's and torch.minimum's), each level's adjoint solve on its final active set
   (qp_adjoint, as solve_qp's backward), the level's linear term c = -J^T r to its residuals r, what a level achieved
   (J_j dq_j, an equality of every level below) to that level's step, and each residual row r = gain cost e to its
   task's error and target: a frame's through pose_error_vjp, a centre of mass's and a posture's directly. Writes each
   wanted target's gradient (grad_targets[t] not NULL: contiguous, one target's shape per row); a contact's anchor's and
   the support polygon's normals' and offsets' come from the QP's matrices' gradients (the contact's b, the
   inequalities' G and h), computed as for q.

   Where grad_q is not NULL, also the gradient w.r.t. q (n x nq): each level's QP's matrices' gradients (solve_qp's:
   P, A, G and the bounds, from the level's saved solution and multipliers), taken to the rows they were built from
   (the levels' weighted rows, the contacts', the support polygon's, the bounds), from those to the kinematics they
   read (wb_kinematics_size) and to q (wb_kinematics_vjp), with the integration's derivative w.r.t. q
   (wb_integrate_q_vjp). Returns 0, or -1 where an adjoint solve had no scratch. */
static long KERNEL(wb_backward_chunk)(long lo, long hi, const long long *plan, const double *settings,
                                      const void *const *arrays, const void *const *targets,
                                      const long long *strides, const REAL *q0, const REAL *dq,
                                      const double *saved, const signed char *status, const REAL *grad_q_next,
                                      const REAL *grad_dq, void *const *grad_targets,
                                      const long long *target_sizes, REAL *grad_q, REAL *real_block,
                                      double *block, long *longs) {
    long n = hi - lo, nq = plan[WB_NQ], nv = plan[WB_NV], base_nv = plan[WB_BASE_NV];
    long base_nq = plan[WB_FLOATING] ? 7 : 0;
    long levels = plan[WB_LEVELS], frames = plan[WB_FRAMES], me = plan[WB_ME], mi = plan[WB_MI], F = mi + 2 * nv;
    const long long *level_rows = plan + WB_HEADER + 2 * frames, *records = level_rows + levels, *record = records;
    long total_rows = 0, level_start[64];
    for (long k = 0; k < levels; k++) level_start[k] = total_rows, total_rows += level_rows[k];
    long most_eq = me + total_rows, per_row = WB_SAVED_DOUBLES(nv, most_eq, mi, levels);
    long L = WB_SOLUTION_DOUBLES(nv, most_eq, mi), KS = KERNEL(wb_kinematics_size)(plan);
    /* the QP's matrices' gradients: for q, and for the contacts' anchors and the polygon's edges */
    int rows = grad_q != 0 || KERNEL(wb_constraint_targets_wanted)(plan, grad_targets);
    KERNEL(wb_scratch) S;
    double *d = KERNEL(wb_layout)(n, plan, real_block, block, longs, &S);
    KERNEL(wb_row_columns)(plan, settings, S.column);
    /* the rest of the scratch, as wb_backward_doubles counts it */
    double *gD = d, *gx = gD + n * levels * nv, *ls = gx + n * nv, *lx = ls + n * nv, *ly = lx + n * nv;
    double *lz = ly + n * most_eq, *flags = lz + n * mi, *exact = flags + n * F, *grad_r = exact + n;
    double *gJ = grad_r + n * total_rows, *gA = gJ + n * total_rows * nv, *gb = gA + n * me * nv, *gG = gb + n * me;
    double *gh = gG + n * mi * nv, *glb = gh + n * mi, *gub = glb + n * nv, *level_dq = gub + n * nv;
    double *gk = level_dq + n * levels * nv, *kinematics_work = gk + n * KS;
    for (long e = 0; e < n * nq; e++) S.q[e] = q0[lo * nq + e];
    KERNEL(wb_tree_pass)(n, plan, arrays, &S, 1);
    for (long i = 0; i < n; i++) /* the pose errors where the matrices' gradients read the residuals (c = -J^T r) */
        KERNEL(wb_assemble)(i, lo + i, n, plan, settings, arrays, targets, strides, &S, total_rows, rows);
    for (long e = 0; e < n * levels * nv; e++) gD[e] = 0;
    if (rows) {
        for (long e = 0; e < n * (total_rows * nv + me * (nv + 1) + mi * (nv + 1) + 2 * nv); e++) gJ[e] = 0;
        for (long i = 0; i < n; i++) { /* each level's step, as the forward selected it */
            const double *keep = saved + (lo + i) * per_row;
            for (long k = 0; k < levels; k++) {
                const double *x = keep + k * L, *lb = S.lb + i * nv, *ub = S.ub + i * nv;
                double *step = level_dq + (i * levels + k) * nv;
                int solved = status[(lo + i) * levels + k] == 0;
                for (long e = 0; e < nv; e++) {
                    double v = x[e];
                    if (k == 0 && !solved) v = v > lb[e] ? v : lb[e], v = v < ub[e] ? v : ub[e];
                    step[e] = k == 0 || solved ? v : step[e - nv];
                }
            }
        }
    }
    for (long i = 0; i < n; i++) { /* the step's gradient: its own and through q_next = integrate(q, dq) */
        double *g = gD + (i * levels + levels - 1) * nv;
        for (long e = 0; e < nv; e++) g[e] = grad_dq ? (double)grad_dq[(lo + i) * nv + e] : 0.0;
        KERNEL(wb_integrate_vjp)(nq, plan[WB_FLOATING], q0 + (lo + i) * nq, dq + (lo + i) * nv,
                                 grad_q_next + (lo + i) * nq, g);
    }
    double damping_sq = settings[WB_DAMPING] * settings[WB_DAMPING], elastic = settings[WB_ELASTIC];
    long refinements = plan[WB_REFINEMENTS] > 2 ? plan[WB_REFINEMENTS] : 2; /* as solve_qp's backward */
    for (long k = levels - 1; k >= 0; k--) {
        long start = level_start[k], mk = level_rows[k], me_k = me + start;
        long rank = KERNEL(wb_low_rank)(plan, k); /* the Hessian as the forward gave it to the polish */
        rank = rank + me_k + mi <= nv ? rank : -1;
        for (long i = 0; i < n; i++) {
            double *Ak = S.Ak + i * me_k * nv, *g = gD + (i * levels + k) * nv;
            const double *J = S.J + i * total_rows * nv, *keep = saved + (lo + i) * per_row;
            const unsigned char *bytes = (const unsigned char *)(keep + levels * L) + k * (F + 1);
            KERNEL(wb_level_hessian)(nv, mk, J + start * nv, 0, S.column + start, damping_sq, rank, &S, i);
            for (long e = 0; e < me * nv; e++) Ak[e] = S.A[i * me * nv + e];
            for (long e = 0; e < start * nv; e++) Ak[me * nv + e] = J[e];
            for (long e = 0; e < F; e++) flags[i * F + e] = bytes[e];
            exact[i] = bytes[F];
            int solved = status[(lo + i) * levels + k] == 0;
            if (k == 0 && !solved) { /* the least-violation step clamped: min(max(x, lb), ub) */
                const double *x = keep, *lb = S.lb + i * nv, *ub = S.ub + i * nv;
                for (long e = 0; e < nv; e++) {
                    double low = x[e] > lb[e] ? x[e] : lb[e];
                    double up = KERNEL(wb_extremum_share)(low, ub[e], -1.0);
                    double down = KERNEL(wb_extremum_share)(x[e], lb[e], 1.0);
                    gx[i * nv + e] = g[e] * up * down;
                    if (grad_q) { /* and to the bounds it was clamped to */
                        gub[i * nv + e] += g[e] * KERNEL(wb_extremum_share)(ub[e], low, -1.0);
                        glb[i * nv + e] += g[e] * up * KERNEL(wb_extremum_share)(lb[e], x[e], 1.0);
                    }
                }
            } else {
                for (long e = 0; e < nv; e++) gx[i * nv + e] = solved ? g[e] : 0.0;
                if (!solved) { /* the level above's step was handed on */
                    double *above = gD + (i * levels + k - 1) * nv;
                    for (long e = 0; e < nv; e++) above[e] += g[e];
                }
            }
        }
        long code = rank >= 0 ? qp_adjoint_structured_double(n, 1, nv, me_k, mi, refinements, rank, &elastic, S.p, S.U,
                                                             S.Ak, S.G, flags, exact, gx, ls, lx, ly, lz)
                              : qp_adjoint_double(n, 1, nv, me_k, mi, refinements, nv * nv, &elastic, S.P, S.Ak, S.G,
                                                  flags, exact, gx, ls, lx, ly, lz);
        if (code < 0) return -1;
        for (long i = 0; i < n; i++) {
            const double *J = S.J + i * total_rows * nv, *l = ls + i * nv, *y = ly + i * me_k;
            for (long j = start; j < start + mk; j++) { /* c = -J^T r: d/dr = J l_s */
                double value = 0;
                if (S.column[j] >= 0) value = J[j * nv + S.column[j]] * l[S.column[j]]; /* a posture's row */
                else
                    for (long e = 0; e < nv; e++) value += J[j * nv + e] * l[e];
                grad_r[i * total_rows + j] = value;
            }
            for (long a = 0, j = 0; a < k; a++) /* b = J_a dq_a of every level a above: d/d(dq_a) = J_a^T l_y */
                for (long end = level_start[a] + level_rows[a]; j < end; j++) {
                    double *g = gD + (i * levels + a) * nv, v = y[me + j];
                    for (long e = 0; e < nv; e++) g[e] += J[j * nv + e] * v;
                }
            if (!rows) continue;
            /* the QP's matrices (kinematics.qp.gradient): P = J^T J + damping^2 I, c = -J^T r, A = [contacts; the
               rows above], b = [their errors; J_a dq_a], G, h and the bounds, from the level's solution [x; y; z] */
            const double *x = saved + (lo + i) * per_row + k * L, *ye = x + nv, *z = x + nv + most_eq;
            const double *lyi = ly + i * me_k, *lzi = lz + i * mi, *lxi = lx + i * nv, *r = S.r + i * total_rows;
            const unsigned char *bytes = (const unsigned char *)(saved + (lo + i) * per_row + levels * L) + k * (F + 1);
            double *gJi = gJ + i * total_rows * nv;
            for (long j = start; j < start + mk; j++) { /* -(J l_s x^T + J x l_s^T) + r l_s^T */
                if (S.column[j] >= 0) continue; /* a posture's row is constant */
                const double *row = J + j * nv;
                double a = 0, b = 0;
                for (long e = 0; e < nv; e++) a += row[e] * l[e], b += row[e] * x[e];
                for (long e = 0; e < nv; e++) gJi[j * nv + e] += -(a * x[e] + b * l[e]) + r[j] * l[e];
            }
            for (long e = 0; e < me; e++) { /* the contacts' rows: -(l_y x^T + y l_s^T), b: l_y */
                double *row = gA + (i * me + e) * nv;
                for (long c = 0; c < nv; c++) row[c] -= lyi[e] * x[c] + ye[e] * l[c];
                gb[i * me + e] += lyi[e];
            }
            for (long j = 0, a = 0; j < start; j++) { /* the rows above: A's -(l_y x^T + y l_s^T), b = J_a dq_a's l_y dq_a^T */
                while (j >= level_start[a] + level_rows[a]) a++; /* row j's level */
                if (S.column[j] >= 0) continue;
                const double *step = level_dq + (i * levels + a) * nv;
                double v = lyi[me + j], w = ye[me + j];
                for (long c = 0; c < nv; c++) gJi[j * nv + c] += -(v * x[c] + w * l[c]) + v * step[c];
            }
            for (long e = 0; e < mi; e++) gh[i * mi + e] += lzi[e];
            KERNEL(wb_outer_pair)(mi, nv, lzi, x, z, l, gG + i * mi * nv); /* -(l_z x^T + z l_s^T), negated below */
            for (long e = 0; e < nv; e++) { /* a variable fixed at a bound: l_x, halved between contradictory ones */
                int upper = bytes[mi + e] > 0, lower = bytes[mi + nv + e] > 0;
                double share = upper && lower ? 0.5 * lxi[e] : lxi[e];
                if (upper) gub[i * nv + e] += share;
                if (lower) glb[i * nv + e] += share;
            }
        }
    }
    long level_fill[64];
    for (long k = 0; k < levels; k++) level_fill[k] = level_start[k];
    for (long b = 0; b < plan[WB_BLOCKS]; b++, record += WB_RECORD) { /* the residuals' rows to the targets */
        long type = record[WB_TYPE], t = record[WB_TARGET], level = record[WB_LEVEL];
        if (!WB_IS_TASK(type)) continue;
        const double *param = settings + record[WB_PARAM];
        long first = record[WB_FIRST], count = record[WB_COUNT], size = target_sizes[t], rows = level_fill[level];
        level_fill[level] += record[WB_ROWS]; /* the block's rows, in wb_assemble's order */
        if (!grad_targets[t]) continue;
        for (long i = 0; i < n; i++) {
            long fill = rows;
            REAL *out = (REAL *)grad_targets[t] + (lo + i) * size, error[6] = {0, 0, 0, 0, 0, 0};
            for (long e = 0; e < size; e++) out[e] = 0;
            for (long j = 0; j < count; j++) {
                double cost = param[1 + j];
                if (!(cost > 0)) continue; /* a row of zero cost asks nothing */
                REAL value = (REAL)(grad_r[i * total_rows + fill++] * (param[0] * cost));
                if (WB_IS_POSE_TASK(type)) error[first + j] = value;
                else out[j] = value; /* target - com, target - q */
            }
            if (WB_IS_POSE_TASK(type)) { /* position rows: target - p; rotation rows: log(R_target R^T) */
                const REAL *target = (const REAL *)targets[t] + (lo + i) * strides[t];
                const REAL *pose = S.poses + (record[WB_FRAME] * n + i) * 16;
                REAL relative_pose[16];
                if (type == WB_RELATIVE_FRAME_TASK) {
                    KERNEL(wb_relative)(0, S.poses + (record[WB_ROOT] * n + i) * 16, pose, 0, 0, relative_pose, 0);
                    pose = relative_pose;
                }
                KERNEL(wb_pose_error_to_target)(target, pose, error, settings, out);
            }
        }
    }
    for (long i = 0; i < n && rows; i++) { /* the contacts' anchors and the polygon's edges, where wanted */
        const REAL *com = S.com + i * 3, *com_jacobian = S.com_jacobian + i * 3 * nv;
        long eq = 0, in = 0;
        record = records;
        for (long b = 0; b < plan[WB_BLOCKS]; b++, record += WB_RECORD) {
            long type = record[WB_TYPE], t = record[WB_TARGET];
            if (type == WB_CONTACT) { /* b = its pose error: position target - p, rotation log(R_target R^T) */
                if (grad_targets[t]) {
                    REAL grad_error[6];
                    for (int a = 0; a < 6; a++) grad_error[a] = (REAL)gb[i * me + eq + a];
                    KERNEL(wb_pose_error_to_target)((const REAL *)targets[t] + (lo + i) * strides[t],
                                                    S.poses + (record[WB_FRAME] * n + i) * 16, grad_error, settings,
                                                    (REAL *)grad_targets[t] + (lo + i) * target_sizes[t]);
                }
                eq += 6;
            } else if (type == WB_SUPPORT_POLYGON) { /* G_j = n_j . J_xy, h_j = offset_j - margin - n_j . com_xy */
                const unsigned char *edge = (const unsigned char *)targets[t + 2] + (lo + i) * strides[t + 2];
                REAL *grad_normal = grad_targets[t] ? (REAL *)grad_targets[t] + (lo + i) * target_sizes[t] : 0;
                REAL *grad_offset = grad_targets[t + 1] ? (REAL *)grad_targets[t + 1] + (lo + i) * target_sizes[t + 1] : 0;
                for (long j = 0; j < record[WB_ROWS]; j++, in++) {
                    double gx = 0, gy = 0, gh_j = 0; /* a row that is no edge is constant (G = 0, h = INACTIVE) */
                    if (edge[j]) {
                        const double *row = gG + (i * mi + in) * nv; /* G's gradient negated (negated back below) */
                        gh_j = gh[i * mi + in];
                        for (long e = 0; e < nv; e++) gx -= row[e] * com_jacobian[e], gy -= row[e] * com_jacobian[nv + e];
                        gx -= gh_j * com[0], gy -= gh_j * com[1];
                    }
                    if (grad_normal) grad_normal[2 * j] = (REAL)gx, grad_normal[2 * j + 1] = (REAL)gy;
                    if (grad_offset) grad_offset[j] = (REAL)gh_j;
                }
            }
        }
    }
    if (!grad_q) return 0;
    for (long i = 0; i < n; i++) { /* the rows' gradients to the kinematics they were built from, then to q */
        double *g = gk + i * KS, *gpose = g, *gjac = g + frames * 16, *gcom = gjac + frames * 6 * nv;
        double *gcom_jac = gcom + 3, *gq = gcom_jac + 3 * nv;
        const double *gJi = gJ + i * total_rows * nv, *gr = grad_r + i * total_rows;
        const REAL *q = S.q + i * nq;
        for (long e = 0; e < KS; e++) g[e] = 0;
        for (long e = 0; e < mi * nv; e++) gG[i * mi * nv + e] = -gG[i * mi * nv + e];
        long eq = 0, in = 0, fill[64], bound_blocks[WB_MAX_BOUND_BLOCKS], bounds = 0;
        REAL relative_pose[16];
        double relative_gpose[16], relative_gjac[6 * nv];
        for (long k = 0; k < levels; k++) fill[k] = level_start[k];
        record = records;
        for (long b = 0; b < plan[WB_BLOCKS]; b++, record += WB_RECORD) {
            long type = record[WB_TYPE], f = record[WB_FRAME], t = record[WB_TARGET], level = record[WB_LEVEL];
            const double *param = settings + record[WB_PARAM];
            const REAL *target = t >= 0 ? (const REAL *)targets[t] + (lo + i) * strides[t] : 0;
            const REAL *pose = f >= 0 ? S.poses + (f * n + i) * 16 : 0;
            double grad_error[6] = {0, 0, 0, 0, 0, 0};
            if (type == WB_RELATIVE_FRAME_TASK) { /* its own pose and Jacobian: their gradients, then the frames' */
                long root = record[WB_ROOT];
                const REAL *J_root = S.jacobians + (root * n + i) * 6 * nv, *J_frame = S.jacobians + (f * n + i) * 6 * nv;
                for (long e = 0; e < 16; e++) relative_gpose[e] = 0;
                for (long e = 0; e < 6 * nv; e++) relative_gjac[e] = 0;
                for (long j = 0; j < record[WB_COUNT]; j++) {
                    double cost = param[1 + j];
                    if (!(cost > 0)) continue;
                    long row = fill[level]++, src = record[WB_FIRST] + j;
                    for (long e = 0; e < nv; e++) relative_gjac[src * nv + e] += cost * gJi[row * nv + e];
                    grad_error[src] = gr[row] * (param[0] * cost); /* r = gain cost e */
                }
                KERNEL(wb_relative)(nv, S.poses + (root * n + i) * 16, pose, J_root, J_frame, relative_pose, 0);
                KERNEL(wb_pose_error_to_pose)(target, relative_pose, grad_error, settings, relative_gpose);
                KERNEL(wb_relative_vjp)(nv, S.poses + (root * n + i) * 16, pose, J_root, J_frame, relative_gpose,
                                        relative_gjac, gpose + root * 16, gpose + f * 16, gjac + root * 6 * nv,
                                        gjac + f * 6 * nv);
            } else if (type == WB_FRAME_TASK || type == WB_COM_TASK || type == WB_POSTURE_TASK) {
                for (long j = 0; j < record[WB_COUNT]; j++) {
                    double cost = param[1 + j];
                    if (!(cost > 0)) continue;
                    long row = fill[level]++, src = record[WB_FIRST] + j;
                    double ge = gr[row] * (param[0] * cost); /* r = gain cost e */
                    if (type == WB_POSTURE_TASK) {
                        gq[base_nq + j] -= ge; /* e = target - q */
                        continue;
                    }
                    double *to = type == WB_FRAME_TASK ? gjac + (f * 6 + src) * nv : gcom_jac + src * nv;
                    for (long e = 0; e < nv; e++) to[e] += cost * gJi[row * nv + e];
                    if (type == WB_FRAME_TASK) grad_error[src] = ge;
                    else gcom[src] -= ge; /* e = target - com */
                }
                if (type == WB_FRAME_TASK) KERNEL(wb_pose_error_to_pose)(target, pose, grad_error, settings, gpose + f * 16);
            } else if (type == WB_CONTACT) {
                for (int a = 0; a < 6; a++, eq++) {
                    for (long e = 0; e < nv; e++) gjac[(f * 6 + a) * nv + e] += gA[(i * me + eq) * nv + e];
                    grad_error[a] = gb[i * me + eq];
                }
                KERNEL(wb_pose_error_to_pose)(target, pose, grad_error, settings, gpose + f * 16);
            } else if (type == WB_SUPPORT_POLYGON) {
                const REAL *normal = (const REAL *)targets[t] + (lo + i) * strides[t];
                const unsigned char *edge = (const unsigned char *)targets[t + 2] + (lo + i) * strides[t + 2];
                for (long j = 0; j < record[WB_ROWS]; j++, in++) {
                    if (!edge[j]) continue; /* G = 0, h = INACTIVE */
                    double nx = normal[2 * j], ny = normal[2 * j + 1], gh_j = gh[i * mi + in];
                    const double *row = gG + (i * mi + in) * nv;
                    for (long e = 0; e < nv; e++) gcom_jac[e] += nx * row[e], gcom_jac[nv + e] += ny * row[e];
                    gcom[0] -= nx * gh_j, gcom[1] -= ny * gh_j; /* h = offset - margin - n . com */
                }
            } else if (type == WB_CONFIGURATION_LIMIT || type == WB_STEP_LIMIT) {
                if (bounds == WB_MAX_BOUND_BLOCKS) return -1; /* step_plan builds no plan with more */
                bound_blocks[bounds++] = b;
            }
        }
        /* the bounds: lb = max over the bounds' blocks in order (ub: min), torch.maximum's ties halved; the
           configuration limit's gain (limit - q) to q */
        for (long e = base_nv; e < nv && bounds; e++) {
            for (int side = 0; side < 2; side++) {
                double sign = side ? -1.0 : 1.0, value[WB_MAX_BOUND_BLOCKS], running[WB_MAX_BOUND_BLOCKS];
                for (long u = 0; u < bounds; u++) {
                    const long long *rec = records + bound_blocks[u] * WB_RECORD;
                    const double *param = settings + rec[WB_PARAM];
                    if (rec[WB_TYPE] == WB_STEP_LIMIT) {
                        value[u] = -sign * (double)(REAL)param[e];
                    } else {
                        const REAL *limit = side ? arrays[WB_UPPER] : arrays[WB_LOWER];
                        value[u] = (double)(REAL)((REAL)param[0] * (limit[e - base_nv] - q[base_nq + e - base_nv]));
                    }
                    running[u] = u == 0 ? value[u] : sign * (value[u] - running[u - 1]) > 0 ? value[u] : running[u - 1];
                }
                double grad = side ? gub[i * nv + e] : glb[i * nv + e];
                for (long u = bounds - 1; u >= 0 && grad != 0; u--) {
                    double share = u == 0 ? 1.0 : KERNEL(wb_extremum_share)(value[u], running[u - 1], sign);
                    const long long *rec = records + bound_blocks[u] * WB_RECORD;
                    if (rec[WB_TYPE] == WB_CONFIGURATION_LIMIT)
                        gq[base_nq + e - base_nv] -= settings[rec[WB_PARAM]] * grad * share;
                    if (u > 0) grad *= KERNEL(wb_extremum_share)(running[u - 1], value[u], sign);
                }
            }
        }
        KERNEL(wb_kinematics_vjp)(i, n, plan, arrays, &S, g, kinematics_work + i * 12 * (plan[WB_M] + 1), gq);
        KERNEL(wb_integrate_q_vjp)(nq, plan[WB_FLOATING], q0 + (lo + i) * nq, dq + (lo + i) * nv,
                                   grad_q_next + (lo + i) * nq, gq);
        for (long e = 0; e < nq; e++) grad_q[(lo + i) * nq + e] = (REAL)gq[e];
    }
    return 0;
}

/* The backward's work on a chunk (wb_in_chunks' runner). */
static long KERNEL(wb_backward_runner)(long lo, long hi, const KERNEL(wb_job) *job, REAL *real_block, double *block,
                                       long *long_block) {
    return KERNEL(wb_backward_chunk)(lo, hi, job->plan, job->settings, job->arrays, job->targets, job->strides, job->q,
                                     job->dq_in, job->saved_in, job->status_in, job->grad_q_next, job->grad_dq,
                                     job->grad_targets, job->target_sizes, job->grad_q, real_block, block, long_block);
}

/* One step's backward from q to its step dq (wb_backward_chunk): the gradients of the wanted targets (grad_targets[t]
   not NULL, target_sizes[t] values per row: the tasks' targets, the contacts' anchors, the polygon's normals and
   offsets) for the upstream gradients grad_q_next (n x nq) and grad_dq (n x nv, NULL: zero) and,
   where grad_q is not NULL, the gradient w.r.t. q (n x nq). */
DISPATCH long KERNEL(wholebody_step_backward)(long n, long threads, const long long *restrict plan,
                                              const double *restrict settings, const void *const *arrays,
                                              const void *const *targets, const long long *restrict strides,
                                              const REAL *restrict q, const REAL *restrict dq,
                                              const double *restrict saved, const signed char *restrict status,
                                              const REAL *restrict grad_q_next, const REAL *restrict grad_dq,
                                              void *const *grad_targets, const long long *restrict target_sizes,
                                              REAL *restrict grad_q) {
    KERNEL(wb_job) job = {1, plan, settings, arrays, targets, strides, q, 0, 0, 0, 0, 0, 0, 0, 0, saved, status, dq,
                          grad_q_next, grad_dq, grad_targets, target_sizes, grad_q};
    int rows = grad_q != 0 || KERNEL(wb_constraint_targets_wanted)(plan, grad_targets);
    return KERNEL(wb_in_chunks)(n, threads, &job, KERNEL(wb_backward_doubles)(plan, rows),
                                 KERNEL(wb_backward_runner));
}


#endif /* REAL */
