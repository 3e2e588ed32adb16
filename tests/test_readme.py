"""The README: its example runs as printed."""

from __future__ import annotations

import json
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


def test_the_whole_body_example_runs_and_its_gradient_arrives(capsys) -> None:
    title = "Whole body: a URDF tree, tasks, a QP cascade, on the Unitree G1"
    (code,) = re.findall(r"```python\n(.*?)```", section(title), re.S)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    result, hand = namespace["result"], namespace["hand"]
    assert bool(result.success["right_hand"].all())
    assert all(float(v.max()) < 1e-6 for v in result.violations.values())
    assert hand.grad is not None and torch.isfinite(hand.grad).all() and float(hand.grad.abs().sum()) > 0


RESULTS = README.parent / "docs" / "results"
MEASURED_SECTIONS = (
    "The experiment",
    "Beside the seed's own system: its protocol as `--preset reference`",
    "Measured speed",
    "Beyond the docs: constraints, implicit gradients and R^9",
    "Measured: whole-body kinematics",
    "Measured: the whole-body layer and its QP",
    "The counterweight experiment: a humanoid learns to reach past its balance limit",
)
NUMBER = r"(?<![\w.])\d+\.\d+(?!\d)(?!\.\d)"


def tables(text: str) -> list[str]:
    """Every markdown table of ``text``: runs of consecutive lines that start with ``|``."""
    found, block = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
        elif block:
            found.append("\n".join(block))
            block = []
    return found


def results_text() -> str:
    return "\n".join(path.read_text() for path in sorted(RESULTS.rglob("*")) if path.suffix in (".md", ".json"))


def test_every_results_markdown_is_what_the_code_renders_from_its_json() -> None:
    from learning.benchmark import constrained_suite, qp_suite, report, tree_suite, wholebody_suite
    from learning.benchmark.provenance import provenance_line
    from learning.counterweight.report import render_markdown as counterweight_markdown
    from learning.distribution import distribution_markdown
    from learning.report import render_markdown

    renderers = {
        "benchmark/fk": report.fk_markdown,
        "benchmark/ik": report.ik_markdown,
        "benchmark/constrained": constrained_suite.markdown,
        "benchmark/tree": tree_suite.markdown,
        "benchmark/qp": qp_suite.markdown,
        "benchmark/wholebody": wholebody_suite.markdown,
        "benchmark-torch-ops/ik": report.ik_markdown,
        "experiment/report": render_markdown,
        "reference/report": render_markdown,
        "counterweight/report": counterweight_markdown,
        "experiment/check-distribution": lambda doc: (
            f"{provenance_line(doc['provenance'])}\n\n{distribution_markdown(doc['methods'])}"
        ),
    }
    for name, render in renderers.items():
        doc = json.loads((RESULTS / f"{name}.json").read_text())
        assert (RESULTS / f"{name}.md").read_text() == render(doc), f"docs/results/{name}.md is stale"
        commit = doc.get("provenance", doc.get("meta", {}).get("provenance", {})).get("commit", "")
        assert re.fullmatch(r"[0-9a-f]{40}", commit), f"docs/results/{name}.json: measured at a committed state"


def test_every_table_of_the_readme_measurements_is_in_a_results_file() -> None:
    committed = [path.read_text() for path in sorted(RESULTS.rglob("*.md"))]
    for title in MEASURED_SECTIONS:
        for table in tables(section(title)):
            assert any(table in text for text in committed), f"README table not in docs/results:\n{table}"


def test_every_measured_number_of_the_readme_is_in_a_results_file() -> None:
    """Every decimal number in the measured sections' prose (times, rates, ratios, settings) is a value that a
    committed results file holds (compared as numbers: 0.30 in the README matches 0.3 in a JSON)."""
    available = {float(token) for token in re.findall(NUMBER, results_text())}
    missing = []
    for title in MEASURED_SECTIONS:
        prose = "\n".join(line for line in section(title).splitlines() if not line.startswith("|"))
        prose = re.sub(r"```.*?```", "", prose, flags=re.S)
        missing += [f"{title}: {n}" for n in re.findall(NUMBER, prose) if float(n) not in available]
    assert not missing, "numbers in the README that no results file holds: " + ", ".join(missing)
