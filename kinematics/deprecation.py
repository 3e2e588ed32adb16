"""Renamed public names: each old name keeps working for one release and says what replaced it."""

from __future__ import annotations

import warnings


def warn_renamed(old: str, new: str) -> None:
    """A ``DeprecationWarning`` at the caller of the deprecated name."""
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release; use {new}", DeprecationWarning, stacklevel=3
    )
