"""The project's error base and the error for a robot description that is not installed.

``ProjectError`` lives here, not in ``kinematics``, because assets is the one package every other imports and that
imports none of them; ``kinematics.errors`` re-exports both, so ``from kinematics import ProjectError`` is the same
class.
"""

from __future__ import annotations


class ProjectError(Exception):
    """Base class of every error this project raises on purpose."""


class MissingAssetError(ProjectError, FileNotFoundError):
    """A robot description the project needs is not installed."""
