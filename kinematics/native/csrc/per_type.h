/* The per-type template. A unit (chain.c, tree.c, ...) is written once, for REAL: it starts with

       #ifndef REAL
       #define KINEMATICS_UNIT "chain.c"
       #include "per_type.h"
       #else
       ... the kernels, in terms of REAL, KERNEL(name), SQRT, SIN, COS, ATAN2, FABS, QP_LANES ...
       #endif

   and this header includes the unit back once with REAL float (every kernel named name_float) and once with REAL
   double (name_double). kernels.h declares the functions it exports; the compiler checks each definition against
   its declaration. The build (build.py) compiles each unit once per type, as two objects that compile in parallel:
   -DKINEMATICS_ONLY_FLOAT or -DKINEMATICS_ONLY_DOUBLE keeps that half alone (a unit calls the other type's kernels
   only through their kernels.h declarations). */
#include "common.h"
#include "kernels.h"

#ifndef KINEMATICS_ONLY_DOUBLE
#define REAL float
#define KERNEL(name) name##_float
#define SQRT sqrtf
#define SIN sinf
#define COS cosf
#define ATAN2 atan2f
#define FABS fabsf
#define QP_LANES 8 /* rows per tile of qp_ipm: one AVX2 vector */
#include KINEMATICS_UNIT
#undef REAL
#undef KERNEL
#undef SQRT
#undef SIN
#undef COS
#undef ATAN2
#undef FABS
#undef QP_LANES
#endif

#ifndef KINEMATICS_ONLY_FLOAT
#define REAL double
#define KERNEL(name) name##_double
#define SQRT sqrt
#define SIN sin
#define COS cos
#define ATAN2 atan2
#define FABS fabs
#define QP_LANES 4
#include KINEMATICS_UNIT
#undef REAL
#undef KERNEL
#undef SQRT
#undef SIN
#undef COS
#undef ATAN2
#undef FABS
#undef QP_LANES
#endif
