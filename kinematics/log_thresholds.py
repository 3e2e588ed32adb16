"""The SO(3) log's branch thresholds, shared by the torch functions (``kinematics.lie``) and the compiled kernels
(``kinematics.native``), which read them from here so that neither imports the other's package."""

# Below this squared sine the log uses its Taylor expansion (theta / sin(theta) ~ 1 + theta^2 / 6).
SMALL_SIN_SQ = 1e-12
# Cosine below which the log reads the axis from the symmetric part (angle above ~3.0 rad).
NEAR_PI_COS = -0.99
