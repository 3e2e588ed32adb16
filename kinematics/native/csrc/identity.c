/* The library's identity: the hash of the sources it was built from (kinematics.native.build.source_hash), passed
   by the build as -DKINEMATICS_NATIVE_SOURCE_HASH="...". The loader compares it with the hash of the sources beside
   it and builds afresh where they differ (a developer checkout edited after its install). Its own unit, so that a
   new hash recompiles this file only. */
#include "kernels.h"

#ifndef KINEMATICS_NATIVE_SOURCE_HASH
#define KINEMATICS_NATIVE_SOURCE_HASH "unknown"
#endif

const char *kinematics_native_source_hash(void) { return KINEMATICS_NATIVE_SOURCE_HASH; }
