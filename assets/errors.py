"""The error for a robot description that is not installed.

It is a ``FileNotFoundError``, not a ``kinematics.ProjectError``: assets imports no other package of the project, so
the entry points catch both.
"""

from __future__ import annotations


class MissingAssetError(FileNotFoundError):
    """A robot description the project needs is not installed."""
