"""Every entry point waits passively in OpenMP: ``OMP_WAIT_POLICY`` is ``PASSIVE`` at the moment torch is first
imported in a fresh interpreter that imports the entry point's module (``python -m`` imports its packages first, as
here). OpenMP reads the policy once, when torch loads its runtime; set any later, it has no effect."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a fresh interpreter per entry point: about 3 s each
ROOT = Path(__file__).resolve().parents[1]
ENTRY_POINTS = (
    "app.__main__",
    "app.counterweight.latency",
    "learning.__main__",
    "learning.benchmark.__main__",
    "learning.benchmark.memory_probe",
    "learning.counterweight.executor_benchmark",
    "learning.counterweight.study.__main__",
)

# records the environment's policy when torch is first imported, then imports the entry point's module
PROBE = """
import importlib, importlib.abc, os, sys
seen = []
class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not seen:
            seen.append(os.environ.get("OMP_WAIT_POLICY"))
        return None
sys.meta_path.insert(0, Watch())
importlib.import_module(sys.argv[1])
print("torch not imported" if not seen else seen[0])
"""


def _policy_at_torch_import(module: str, environment: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, module], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_every_entry_point_sets_passive_waiting_before_torch_is_imported(module):
    environment = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    assert _policy_at_torch_import(module, environment) == "PASSIVE"


def test_a_users_own_policy_is_kept():
    environment = {**os.environ, "OMP_WAIT_POLICY": "ACTIVE"}
    assert _policy_at_torch_import("app.__main__", environment) == "ACTIVE"
