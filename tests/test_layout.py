"""The layout: the packages import each other only the way it says (app -> learning -> kinematics; assets, robots as
data, for the lab), no module imports itself back through others, the library names no robot, and the two scenes of
the viewer do not know each other. Read from the source files (every import statement, also inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "learning", "kinematics", "assets")
ALLOWED = {  # what each package may import of the project
    "assets": {"assets"},
    "kinematics": {"kinematics"},
    "learning": {"learning", "kinematics", "assets"},
    "app": {"app", "learning", "kinematics", "assets"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def imported(path: Path) -> set[str]:
    """The project modules ``path`` imports: ``from a.b import c`` counts as ``a.b.c`` where that is a module, else as
    ``a.b``; third-party names are left out."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(name if name in MODULES else node.module)
    return {name for name in found if name.split(".")[0] in PACKAGES}


GRAPH = {name: imported(path) - {name} for name, path in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_the_way_the_layout_says(package: str) -> None:
    wrong = {}
    for name, imports in GRAPH.items():
        if name.split(".")[0] != package:
            continue
        bad = {module.split(".")[0] for module in imports} - ALLOWED[package]
        if package == "learning" and "viser" in {m.split(".")[0] for m in _all_imports(MODULES[name])}:
            bad.add("viser")
        if bad:
            wrong[name] = sorted(bad)
    assert not wrong, f"{package} imports what it must not: {wrong}"


def _all_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


WINGS = {  # a wing may not import these (module prefixes): the shell knows no scene, the scenes and the experiments
    # do not know each other
    "app.shell": ("app.grasp_yaw", "app.counterweight", "learning.grasp_yaw", "learning.counterweight"),
    "app.grasp_yaw": ("app.counterweight", "learning.counterweight"),
    "app.counterweight": ("app.grasp_yaw", "learning.grasp_yaw"),
    "learning.common": ("learning.grasp_yaw", "learning.counterweight", "learning.benchmark"),
    "learning.grasp_yaw": ("learning.counterweight", "learning.benchmark"),
    "learning.counterweight": ("learning.grasp_yaw", "learning.benchmark"),
    "learning.benchmark": ("learning.grasp_yaw", "learning.counterweight"),
}


def test_the_wings_do_not_know_each_other() -> None:
    wrong = {}
    for name, imports in GRAPH.items():
        for wing, forbidden in WINGS.items():
            if name == wing or name.startswith(wing + "."):
                bad = sorted(m for m in imports if any(m == f or m.startswith(f + ".") for f in forbidden))
                if bad:
                    wrong[name] = bad
    assert not wrong, f"wings importing what they must not: {wrong}"
    assert set(WINGS) <= set(MODULES), "every wing named is a package"


def test_no_module_imports_itself_back() -> None:
    assert not cycles(GRAPH), f"import circles: {cycles(GRAPH)}"


def test_the_circle_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert not cycles({"a": {"b"}, "b": set()})


def test_no_robot_names_inside_kinematics() -> None:
    import assets

    robots = list(assets.ROBOTS.values())
    names = {robot.root_link for robot in robots} | {"panda", "g1_", "talos"}
    found = {}
    for path in sorted((ROOT / "kinematics").rglob("*.py")):
        text = path.read_text().lower()
        hits = sorted(name for name in names if name.lower() in text)
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    assert not found, f"robot-specific names in kinematics/: {found}"
