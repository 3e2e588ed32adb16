"""Optional test dependencies: a missing one skips its tests locally and fails them under ``CI=true``.

CI installs the ``dev`` extra (Pinocchio, pytorch_kinematics, Playwright), so a test it reports as passing must
have run: there a missing dependency is an error, not a skip.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    """Skip the calling test or module for ``reason``; under ``CI=true`` fail it instead."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (required when CI=true)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require_module(name: str, install: str) -> ModuleType:
    """``import name``, or ``unavailable`` with the import error and the command that installs it."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        unavailable(f"{name} is not importable ({error}); {install}")
