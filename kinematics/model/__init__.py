"""Kinematic models read from a URDF: the serial chain and the kinematic tree, their kernels, the payload."""
