/* The support polygon's hull edges. ISO rounding (no contraction). */
#ifndef REAL
#define KINEMATICS_UNIT "hull.c"
#include "per_type.h"
#else

/* The support polygon's hull edges (kinematics.wholebody.constraints.support_polygon's reference, the same tests): xy (n, k, 2)
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

#endif /* REAL */
