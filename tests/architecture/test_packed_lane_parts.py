"""The packed arrays of a lane are composed, not inherited: each part of
:class:`vq.executors.scheduler.packed.PackedLane` is its own class in its own module,
receiving its collaborators; none derives from a class of another module, none hides an
import behind ``TYPE_CHECKING`` or inside a function, and none imports the lane's own
modules (the owning lane is a :class:`~vq.executors.scheduler.packed_ports.PackHost`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SCHEDULER = Path(__file__).parent.parent.parent / "src" / "vq" / "executors" / "scheduler"
PARTS = sorted(SCHEDULER.glob("packed*.py"))
#: The lane engine's own modules: the packed parts reach the lane through PackHost only.
LANE_MODULES = {"lane", "submission", "observe", "recovery", "control", "lane_set"}


def _imports(tree: ast.Module) -> list[tuple[ast.ImportFrom | ast.Import, bool]]:
    """Every import with whether it sits at the module's top level."""
    top = {id(node) for node in tree.body}
    return [
        (node, id(node) in top)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    ]


def test_the_parts_are_there() -> None:
    names = {path.stem for path in PARTS}
    assert {"packed", "packed_ports", "packed_state", "packed_submit"} <= names
    assert {"packed_observe", "packed_recovery"} <= names


@pytest.mark.parametrize("path", PARTS, ids=lambda p: p.name)
def test_a_part_imports_at_its_top_and_never_the_lane(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    problems = []
    for node, at_top in _imports(tree):
        module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
        if not at_top:
            problems.append(f"line {node.lineno}: an import below the module's top")
        if isinstance(node, ast.ImportFrom) and node.level == 1 and module in LANE_MODULES:
            problems.append(f"line {node.lineno}: imports the lane's .{module}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "TYPE_CHECKING":
            problems.append(f"line {node.lineno}: TYPE_CHECKING")
    assert not problems, problems


@pytest.mark.parametrize("path", PARTS, ids=lambda p: p.name)
def test_no_class_derives_from_another_modules_class(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    local = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    allowed = local | {"Protocol", "Exception", "ValueError", "NamedTuple"}
    bases = [
        (cls.name, base.id)
        for cls in tree.body
        if isinstance(cls, ast.ClassDef)
        for base in cls.bases
        if isinstance(base, ast.Name) and base.id not in allowed
    ]
    assert not bases, bases
