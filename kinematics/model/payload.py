"""A payload held by a link: a point mass added to the link's inertial (mass and centre of mass), so the tree's
centre of mass and its Jacobian carry it. Rotational inertia does not enter kinematics, so it is not modelled."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from kinematics.errors import ConfigError, FrameNotFoundError
from kinematics.model.urdf import TreeDescription, close_names


def with_payload(
    description: TreeDescription, link: str, mass: float, point: Sequence[float] = (0.0, 0.0, 0.0)
) -> TreeDescription:
    """``description`` with ``mass`` kg added at ``point`` (m, in ``link``'s frame) to ``link``'s inertial."""
    if link not in description.frame_names:
        raise FrameNotFoundError(
            f"no link {link!r} to carry a payload; close: {close_names(link, description.frame_names)}"
        )
    if not (np.isfinite(mass) and mass >= 0):
        raise ConfigError(f"a payload's mass must be a finite number >= 0 kg, got {mass!r}")
    point = np.asarray(point, dtype=float)
    if point.shape != (3,) or not np.isfinite(point).all():
        raise ConfigError(f"a payload's point must be 3 finite numbers (m, in the link's frame), got {point.tolist()}")
    f = description.frame_names.index(link)
    masses, coms = description.mass.copy(), description.com_local.copy()
    total = masses[f] + mass
    if total > 0:
        coms[f] = (masses[f] * coms[f] + mass * point) / total
    masses[f] = total
    return dataclasses.replace(description, mass=masses, com_local=coms)
