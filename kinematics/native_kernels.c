/* The compiled CPU kernels of kinematics.native: the chain pass (FK + Jacobian), the DLS step's products, the pose
   error and the closed-form backward passes, each once for float and once for double (native_kernels.h).

   Users build it with the flags in kinematics/native.py; the test suite also compiles it with
   -Wall -Wextra -Werror. */
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

#define FABS_DOUBLE fabs

#define REAL float
#define KERNEL(name) name##_float
#define SQRT sqrtf
#define SIN sinf
#define COS cosf
#define ATAN2 atan2f
#define FABS fabsf
#define QP_LANES 8 /* rows per tile of qp_ipm: one AVX2 vector */
#include "native_kernels.h"
#undef REAL
#undef KERNEL
#undef SQRT
#undef SIN
#undef COS
#undef ATAN2
#undef FABS
#undef QP_LANES

#define REAL double
#define KERNEL(name) name##_double
#define SQRT sqrt
#define SIN sin
#define COS cos
#define ATAN2 atan2
#define FABS fabs
#define QP_LANES 4
#include "native_kernels.h"
