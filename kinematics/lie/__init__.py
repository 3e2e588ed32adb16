"""Lie groups and their parameterisations: SO(3)/SE(3) maps, the free flyer, R^9 -> SE(3), the pose error."""
