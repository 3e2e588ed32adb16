/* The support polygon's hull edges. ISO rounding (no contraction). */
#ifndef REAL
#define KINEMATICS_UNIT "hull.c"
#include "per_type.h"
#else

/* One row of the support polygon's hull edges (kinematics.wholebody.constraints.support_polygon's reference, the same
   tests): the k ground points pt (k, 2), the candidate edges' corner pairs first[p], second[p], the pairs' scratch pair
   (4 p). The k output rows are the hull edges in pair order, then the other pairs in pair order: nr (k, 2) outward
   unit normals, orow (k) with n . x <= offset inside, er (k) 1 / 0, and (where which is not NULL) each row's pair. */
static void KERNEL(hull_row)(long k, long p, const REAL *restrict pt, const long *restrict first,
                             const long *restrict second, REAL *restrict pair, REAL *restrict nr, REAL *restrict orow,
                             REAL *restrict er, long *restrict which) {
    const REAL tol = (REAL)(sizeof(REAL) == 4 ? 1e-5 : 1e-9);
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
    long out = 0;
    for (int pass = 0; pass < 2; pass++) /* the edges, then the other pairs, each in pair order */
        for (long e = 0; e < p && out < k; e++) {
            const REAL *in = pair + 4 * e;
            if ((in[3] > 0) != (pass == 0)) continue;
            if (which) which[out] = e;
            nr[2 * out] = in[0], nr[2 * out + 1] = in[1], orow[out] = in[2], er[out++] = in[3];
        }
}

/* Each corner's world (x, y) (k, 2) from its sole's pose in T (s, 4, 4): the pose's top two rows applied to the
   corner in homogeneous coordinates. */
static void KERNEL(pose_corners)(long k, const REAL *restrict T, const REAL *restrict corners,
                                 const long *restrict owner, REAL *restrict pt) {
    for (long c = 0; c < k; c++) {
        const REAL *pose = T + owner[c] * 16, *corner = corners + 4 * c;
        for (int axis = 0; axis < 2; axis++) {
            const REAL *row = pose + 4 * axis;
            pt[2 * c + axis] = row[0] * corner[0] + row[1] * corner[1] + row[2] * corner[2] + row[3] * corner[3];
        }
    }
}

/* The hull edges of the soles' corners where the soles are posed (SupportPolygon's SUPPORT_EDGES): T (n, s, 4, 4) each
   row's s sole poses in the world, corners (k, 4) homogeneous in their sole's frame, owner[k] each corner's sole;
   each corner's world (x, y) is its sole's top two rows applied to it, then hull_row's outputs, edge as bytes (NaN
   and no edge everywhere where an owner is not a sole). */
DISPATCH void KERNEL(support_edges)(long n, long s, long k, long p, const REAL *restrict T,
                                    const REAL *restrict corners, const long *restrict owner,
                                    const long *restrict first, const long *restrict second, REAL *restrict normal,
                                    REAL *restrict offset, unsigned char *restrict edge) {
    /* the pairs', the points, then one row's edge flags */
    REAL *pair = malloc(sizeof(REAL) * (4 * p + 3 * k)), *pt = pair + 4 * p, *flags = pt + 2 * k;
    int unusable = pair == 0;
    for (long c = 0; c < k; c++) unusable |= owner[c] < 0 || owner[c] >= s;
    if (unusable) { /* out of memory, or no such sole: NaN everywhere and no edge, nothing read out of bounds */
        for (long i = 0; i < n * k; i++) normal[2 * i] = normal[2 * i + 1] = offset[i] = (REAL)NAN, edge[i] = 0;
        free(pair);
        return;
    }
    for (long r = 0; r < n; r++) {
        KERNEL(pose_corners)(k, T + r * s * 16, corners, owner, pt);
        KERNEL(hull_row)(k, p, pt, first, second, pair, normal + r * k * 2, offset + r * k, flags, 0);
        for (long c = 0; c < k; c++) edge[r * k + c] = flags[c] > 0;
    }
    free(pair);
}


/* support_edges' vector-Jacobian product (its torch reference's gradient): for the upstream gradients grad_normal
   (n, k, 2) and grad_offset (n, k) on its outputs, grad_T (n, s, 4, 4), written whole. Each output row is a pair
   (a, b)'s normal sign R u / max(|u|, 1e-12) (u = b - a, R u = (u_y, -u_x), sign -1 where the hull lies on its
   outer side) and offset normal . a, found again as the forward finds it; a corner's (x, y) is its sole's top two
   rows applied to it. Returns 0, or -1 without scratch or where an owner is not a sole. */
DISPATCH long KERNEL(support_edges_vjp)(long n, long s, long k, long p, const REAL *restrict T,
                                        const REAL *restrict corners, const long *restrict owner,
                                        const long *restrict first, const long *restrict second,
                                        const REAL *restrict grad_normal, const REAL *restrict grad_offset,
                                        REAL *restrict grad_T) {
    for (long c = 0; c < k; c++)
        if (owner[c] < 0 || owner[c] >= s) return -1;
    REAL *pair = malloc(sizeof(REAL) * (4 * p + 6 * k)), *pt = pair + 4 * p, *out = pt + 2 * k;
    long *which = malloc(sizeof(long) * k);
    double *grad_pt = malloc(sizeof(double) * 2 * k);
    if (!pair || !which || !grad_pt) {
        free(pair), free(which), free(grad_pt);
        return -1;
    }
    for (long i = 0; i < n * s * 16; i++) grad_T[i] = 0;
    for (long r = 0; r < n; r++) {
        KERNEL(pose_corners)(k, T + r * s * 16, corners, owner, pt);
        KERNEL(hull_row)(k, p, pt, first, second, pair, out, out + 2 * k, out + 3 * k, which);
        for (long c = 0; c < 2 * k; c++) grad_pt[c] = 0;
        for (long j = 0; j < k; j++) {
            long e = which[j], a = first[e], b = second[e];
            double ux = (double)pt[2 * b] - pt[2 * a], uy = (double)pt[2 * b + 1] - pt[2 * a + 1];
            double length = sqrt(ux * ux + uy * uy);
            double nx = out[2 * j], ny = out[2 * j + 1]; /* the row's normal: sign (u_y, -u_x) / length */
            double gnx = grad_normal[(r * k + j) * 2], gny = grad_normal[(r * k + j) * 2 + 1];
            double go = grad_offset[r * k + j];
            gnx += go * pt[2 * a], gny += go * pt[2 * a + 1]; /* offset = n . a */
            grad_pt[2 * a] += go * nx, grad_pt[2 * a + 1] += go * ny;
            /* n = sign R u / max(|u|, 1e-12): d/du = sign (R^T g - (g . R u) u / |u|^2) / |u|, and sign R^T g / 1e-12
               where the length is clamped (coincident corners) */
            double sign = (nx * uy - ny * ux) >= 0 ? 1.0 : -1.0; /* n . R u = sign |u| */
            double gux, guy;
            if (length > 1e-12) {
                double g_ru = gnx * uy - gny * ux, l2 = length * length;
                gux = sign * (-gny - g_ru * ux / l2) / length, guy = sign * (gnx - g_ru * uy / l2) / length;
            } else {
                gux = -sign * gny / 1e-12, guy = sign * gnx / 1e-12;
            }
            grad_pt[2 * b] += gux, grad_pt[2 * b + 1] += guy;
            grad_pt[2 * a] -= gux, grad_pt[2 * a + 1] -= guy;
        }
        for (long c = 0; c < k; c++) { /* pt[c, axis] = T[owner, axis, :] . corner */
            REAL *g = grad_T + (r * s + owner[c]) * 16;
            const REAL *corner = corners + 4 * c;
            for (int axis = 0; axis < 2; axis++)
                for (int e = 0; e < 4; e++) g[4 * axis + e] += (REAL)(grad_pt[2 * c + axis] * corner[e]);
        }
    }
    free(pair), free(which), free(grad_pt);
    return 0;
}

#endif /* REAL */
