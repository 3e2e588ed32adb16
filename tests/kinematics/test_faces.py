"""Each wing of ``kinematics`` names its API on its face (``__init__``'s ``__all__``), and every public name the
library's pages mention is importable from its wing's face."""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FACES = (
    "kinematics",
    "kinematics.ik",
    "kinematics.lie",
    "kinematics.model",
    "kinematics.qp",
    "kinematics.wholebody",
    "kinematics.wholebody.tasks",
    "kinematics.wholebody.constraints",
)
WINGS = ("ik", "lie", "model", "qp", "wholebody")
# the library's pages: what a user of kinematics reads (the implementation and results pages are not API)
PAGES = ("README.md", "docs/arm-ik-layer.md", "docs/kinematic-trees.md", "docs/qp.md", "docs/wholebody-layer.md")
OTHER_LIBRARIES = {"QPFunction"}  # qp.md's `QPFunction` is proxsuite's QPLayer, not our internal autograd Function


@functools.cache
def _definitions() -> dict[str, list[str]]:
    """Public module-level names of the wings' modules: ``{name: [module, ...]}``."""
    out: dict[str, list[str]] = {}
    for wing in WINGS:
        for path in sorted((ROOT / "kinematics" / wing).rglob("*.py")):
            if path.name == "__init__.py":
                continue
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.FunctionDef | ast.ClassDef):
                    names = [node.name]
                elif isinstance(node, ast.Assign):
                    names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                else:
                    names = []
                for name in names:
                    if not name.startswith("_"):
                        out.setdefault(name, []).append(module)
    return out


def _mentioned() -> set[str]:
    """Names a page mentions as API: a code span that is the name alone or called (``FrameTask``,
    ``solve_qp(...)``), or ``kinematics.<wing>.<name>``; and the names its Python examples import from kinematics."""
    names = set()
    for page in PAGES:
        text = (ROOT / page).read_text()
        for span in re.findall(r"`([^`\n]+)`", text):
            if m := re.fullmatch(r"([A-Za-z_]\w*)(\(.*\))?", span):
                names.add(m.group(1))
            elif m := re.fullmatch(r"kinematics(?:\.\w+)+\.([A-Za-z_]\w*)", span):
                names.add(m.group(1))
        for block in re.findall(r"```python\n(.*?)```", text, re.S):
            for node in ast.walk(ast.parse(block)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kinematics"):
                    names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("face", FACES)
def test_every_name_a_face_lists_imports_from_it(face):
    module = importlib.import_module(face)
    assert module.__all__, face
    assert len(set(module.__all__)) == len(module.__all__), face
    for name in module.__all__:
        assert hasattr(module, name), f"{face}.{name}"


def test_every_public_name_the_pages_mention_is_on_its_wings_face():
    faces = {face: importlib.import_module(face) for face in FACES}
    exported = {name for face in faces.values() for name in face.__all__}
    namespaces = {  # modules a face exports whole (``kinematics.lie.free_flyer``)
        f"{face.__name__}.{name}" for face in faces.values() for name in face.__all__
    }
    definitions = _definitions()
    mentioned = sorted(set(definitions) & _mentioned() - OTHER_LIBRARIES)
    assert len(mentioned) > 20  # the pages do mention the API
    missing = [
        f"{name} ({', '.join(definitions[name])})"
        for name in mentioned
        if name not in exported and not any(module in namespaces for module in definitions[name])
    ]
    assert not missing, f"mentioned in the docs, not on a face: {missing}"
    for name in mentioned:
        if name in exported:
            face = next(f for f in faces.values() if name in f.__all__)
            exec(f"from {face.__name__} import {name}", {})


def test_the_project_imports_the_wings_public_names_through_their_faces():
    """Outside ``kinematics`` (the lab, the viewer), a public name of a wing is imported from its face, never from
    the module inside the wing that defines it."""
    faces = {face: importlib.import_module(face) for face in FACES}
    exported = {name for face in faces.values() for name in face.__all__}
    inner_modules = {module for modules in _definitions().values() for module in modules}
    reached_in = []
    for package in ("learning", "app"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.ImportFrom) or node.module not in inner_modules:
                    continue
                inner = [alias.name for alias in node.names if alias.name in exported]
                if inner:
                    reached_in.append(f"{path.relative_to(ROOT)}: from {node.module} import {', '.join(inner)}")
    assert not reached_in, reached_in
