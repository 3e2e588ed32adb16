"""The README: its example runs as printed."""

from __future__ import annotations

import re
from pathlib import Path

import torch

README = Path(__file__).resolve().parents[1] / "README.md"


def section(title: str) -> str:
    """The text of the README section headed ``## title`` (up to the next ``## ``)."""
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_ten_line_example_runs_and_its_gradients_arrive() -> None:
    (code,) = re.findall(r"```python\n(.*?)```", section("The IK layer in ten lines"), re.S)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    result, seed, target = namespace["result"], namespace["seed"], namespace["target"]
    assert bool(result.success.all())
    assert seed.grad is not None and target.grad is not None
    assert torch.isfinite(seed.grad).all() and torch.isfinite(target.grad).all()
    assert float(seed.grad.abs().sum()) > 0 and float(target.grad.abs().sum()) > 0
