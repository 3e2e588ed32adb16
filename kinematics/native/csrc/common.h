/* What every unit of the kinematics native library shares: the C headers, the macros that select the x86-64-v3
   clones, vectorisation and inlining hints, and the OpenMP row split (or its one-thread stand-in). The kernels
   themselves are written once per floating-point type through per_type.h. */
#ifndef KINEMATICS_NATIVE_COMMON_H
#define KINEMATICS_NATIVE_COMMON_H
#include <math.h>
#include <stdlib.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define DISPATCH __attribute__((target_clones("arch=x86-64-v3", "default"))) /* AVX2 + FMA, chosen at load time */
#else
#define DISPATCH
#endif

#if defined(__clang__)
#define IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define IVDEP _Pragma("GCC ivdep")
#else
#define IVDEP
#endif

#if defined(__GNUC__) && !defined(__clang__)
/* qp_ipm's lane loops: kept whole for the loop vectoriser (one vector op each) instead of unrolled first and
   then vectorised along the loop outside them with shuffles (three times slower) */
#define NOUNROLL _Pragma("GCC unroll 1")
#else
#define NOUNROLL
#endif

#if defined(__GNUC__)
#define QP_INLINE inline __attribute__((always_inline)) /* into qp_ipm's and ik_solve's AVX2 clones (their target) */
#else
#define QP_INLINE inline
#endif

#ifdef _OPENMP
#include <omp.h>
/* `call` on each of `threads` OpenMP threads (at most one per min_rows rows) for its share [lo, hi) of nb rows, the
   shares' bounds multiples of `align`. Where this library shares torch's OpenMP runtime (libgomp.so.1, which torch's
   wheels load first), the team is torch's intra-op threads: the kernel neither waits for sleeping threads nor competes
   with threads that spin after torch's last parallel op. A team of one runs on the caller's thread, outside any
   parallel region (libgomp's region of one thread still ends in a barrier's futex call: about 0.35 us each). */
#define ROWS_IN_PARALLEL(nb, threads, min_rows, align, call)                                                         \
    do {                                                                                                            \
        long most_ = (nb) / (min_rows), team_ = (threads);                                                          \
        team_ = team_ < most_ ? team_ : most_;                                                                       \
        if (team_ <= 1) {                                                                                           \
            long lo = 0, hi = (nb);                                                                                 \
            if (lo < hi) { call; }                                                                                  \
        } else                                                                                                      \
        _Pragma("omp parallel num_threads(team_)") {                                                                 \
            long t_ = omp_get_thread_num(), size_ = omp_get_num_threads();                                          \
            long lo = ((nb) * t_ / size_ + (align) - 1) / (align) * (align);                                       \
            long hi = ((nb) * (t_ + 1) / size_ + (align) - 1) / (align) * (align);                                 \
            lo = lo < (nb) ? lo : (nb), hi = hi < (nb) ? hi : (nb);                                                 \
            if (lo < hi) { call; }                                                                                  \
        }                                                                                                           \
    } while (0)
#define ATOMIC_WRITE _Pragma("omp atomic write")
#define ATOMIC_UPDATE _Pragma("omp atomic update")
#else
#define ROWS_IN_PARALLEL(nb, threads, min_rows, align, call)                                                         \
    do {                                                                                                            \
        long lo = 0, hi = (nb);                                                                                     \
        (void)(threads);                                                                                            \
        if (lo < hi) { call; }                                                                                      \
    } while (0)
#define ATOMIC_WRITE
#define ATOMIC_UPDATE
#endif

/* ROWS_IN_PARALLEL for a row function returning a count (>= 0) or -1 (no scratch): `result` = the counts' sum, or -1
   where any share failed */
#define COUNTED_ROWS_IN_PARALLEL(result, nb, threads, min_rows, call)                                                \
    do {                                                                                                            \
        long failed_ = 0, total_ = 0;                                                                               \
        ROWS_IN_PARALLEL(nb, threads, min_rows, 1, {                                                                \
            long code_ = (call);                                                                                    \
            if (code_ < 0) {                                                                                        \
                ATOMIC_WRITE failed_ = 1;                                                                           \
            } else {                                                                                                \
                ATOMIC_UPDATE total_ += code_;                                                                      \
            }                                                                                                       \
        });                                                                                                         \
        (result) = failed_ ? -1 : total_;                                                                           \
    } while (0)

#define FABS_DOUBLE fabs
#endif
