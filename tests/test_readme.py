"""The README and the pages under docs/: the README's examples run as printed, it stays short and opens with its
two commands, every relative link resolves, and every measured number or table they quote is in docs/results/."""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


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
    assert all(float(v.detach().max()) < 1e-6 for v in result.violations.values())
    assert hand.grad is not None and torch.isfinite(hand.grad).all() and float(hand.grad.abs().sum()) > 0


RESULTS = DOCS / "results"
# The texts that quote measurements, each checked whole: the README and every page under docs/.
MEASURED_PAGES = (
    "README.md",
    "docs/arm-ik-layer.md",
    "docs/benchmarks.md",
    "docs/cluster.md",
    "docs/counterweight-experiment.md",
    "docs/counterweight-study.md",
    "docs/grasp-experiment.md",
    "docs/kinematic-trees.md",
    "docs/native-kernels.md",
    "docs/qp.md",
    "docs/viewer.md",
    "docs/wholebody-layer.md",
)
# Decimal numbers of a page that are settings of the code, not measurements, so that no results file holds them.
NOT_MEASURED = {
    "docs/viewer.md": {"0.78"},  # the radius of the Panda's top-down reach, a constant of its description in assets
}
# Pages whose numbers are a plan's settings, fixed before any measurement (a pre-registration).
PLANNED = {"docs/counterweight-study.md"}
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
    from app.counterweight import latency
    from learning.benchmark import (
        constrained_suite,
        device_suite,
        qp_suite,
        report,
        step_profile,
        tree_suite,
        wholebody_suite,
    )
    from learning.common.provenance import fingerprint_at, provenance_line
    from learning.counterweight.executor_benchmark import markdown as executors_markdown
    from learning.counterweight.report import render_markdown as counterweight_markdown
    from learning.grasp_yaw import throughput
    from learning.grasp_yaw.distribution import distribution_markdown
    from learning.grasp_yaw.report import render_markdown

    renderers = {
        "benchmark/fk": report.fk_markdown,
        "benchmark/ik": report.ik_markdown,
        "benchmark/constrained": constrained_suite.markdown,
        "benchmark/tree": tree_suite.markdown,
        "benchmark/qp": qp_suite.markdown,
        "benchmark/wholebody": wholebody_suite.markdown,
        "benchmark-amd-epyc/wholebody": wholebody_suite.markdown,
        "benchmark/wholebody-profile": step_profile.markdown,
        "benchmark/device-cpu": device_suite.markdown,
        "experiment/throughput-profile": lambda doc: (
            f"{provenance_line(doc['provenance'])}\n\n{throughput.markdown(doc)}"
        ),
        "viewer/g1_latency": latency.markdown,
        "benchmark-torch-ops/ik": report.ik_markdown,
        "benchmark-torch-ops/device-cpu": device_suite.markdown,
        "experiment/report": render_markdown,
        "reference/report": render_markdown,
        "counterweight/report": counterweight_markdown,
        "counterweight-executors/executors": executors_markdown,
        "experiment/check-distribution": lambda doc: (
            f"{provenance_line(doc['provenance'])}\n\n{distribution_markdown(doc['methods'])}"
        ),
    }
    for name, render in renderers.items():
        doc = json.loads((RESULTS / f"{name}.json").read_text())
        assert (RESULTS / f"{name}.md").read_text() == render(doc), f"docs/results/{name}.md is stale"
        made = doc.get("provenance", doc.get("meta", {}).get("provenance", {}))
        commit = made.get("commit", "")
        assert re.fullmatch(r"[0-9a-f]{40}", commit), f"docs/results/{name}.json: measured at a committed state"
        if made.get("commit_stated_by"):  # a copied checkout's (a lent machine's): its files were that commit's
            assert made["source_fingerprint"] == fingerprint_at(commit), (
                f"docs/results/{name}.json: not {commit}'s code"
            )


def test_every_page_under_docs_is_checked_as_measured() -> None:
    pages = {"README.md", *(f"docs/{path.name}" for path in DOCS.glob("*.md"))}
    assert set(MEASURED_PAGES) == pages


def test_every_table_of_the_measured_pages_is_in_a_results_file() -> None:
    committed = [path.read_text() for path in sorted(RESULTS.rglob("*.md"))]
    for page in set(MEASURED_PAGES) - PLANNED:
        for table in tables((ROOT / page).read_text()):
            assert any(table in text for text in committed), f"{page}: table not in docs/results:\n{table}"


def test_every_measured_number_of_the_pages_is_in_a_results_file() -> None:
    """Every decimal number in the measured pages' prose (times, rates, ratios, settings) is a value that a
    committed results file holds (compared as numbers: 0.30 on a page matches 0.3 in a JSON)."""
    available = {float(token) for token in re.findall(NUMBER, results_text())}
    missing = []
    for page in MEASURED_PAGES:
        if page in PLANNED:
            continue
        prose = "\n".join(line for line in (ROOT / page).read_text().splitlines() if not line.startswith("|"))
        prose = re.sub(r"```.*?```", "", prose, flags=re.S)
        exempt = NOT_MEASURED.get(page, set())
        missing += [f"{page}: {n}" for n in re.findall(NUMBER, prose) if float(n) not in available and n not in exempt]
    assert not missing, "numbers on the pages that no results file holds: " + ", ".join(missing)


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced code block of ``text``: (its language, its body)."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)


def test_the_readme_is_short_and_opens_with_its_two_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    (viewer_language, viewer), (tests_language, tests), *_ = fenced_blocks(text)
    assert viewer_language == tests_language == "bash"
    assert viewer.startswith("python3 -m venv .venv") and "-m app --port 8101" in viewer
    assert tests.startswith("python3 -m venv .venv") and "-m pytest" in tests


def test_every_relative_link_points_to_an_existing_file() -> None:
    """Every relative markdown link or image of the README and of the pages under docs/, outside code, names a file
    that exists (relative to the page; an ``#anchor`` is not checked)."""
    checked, broken = 0, []
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            checked += 1
            if not (page.parent / target.split("#", 1)[0]).is_file():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert checked > 0
    assert not broken, "links to files that do not exist: " + ", ".join(broken)


def test_the_readme_links_every_page_under_docs() -> None:
    text = README.read_text()
    assert [path.name for path in sorted(DOCS.glob("*.md")) if f"](docs/{path.name})" not in text] == []
