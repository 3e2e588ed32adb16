"""A missing optional dependency skips locally and fails under ``CI=true``."""

from __future__ import annotations

import pytest
from optional_dependencies import require_module


def test_missing_module_skips_locally(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no_such_module_xyz is not importable.*pip install it"):
        require_module("no_such_module_xyz", "pip install it")


def test_missing_module_fails_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required when CI=true"):
        require_module("no_such_module_xyz", "pip install it")


def test_present_module_is_returned(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert require_module("math", "").sqrt(4.0) == 2.0
