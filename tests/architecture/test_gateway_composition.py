"""The gateway is composed, not inherited across files (an AST check).

:class:`vq.gateway.Gateway` holds a daemon link, a disk-verbs object and a disk-fallback
object, each a class in its own module of ``vq.gateway``; no class of the package
derives from a class another module of the package defines, and the package's modules
import one another without a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

GATEWAY = Path(__file__).parent.parent.parent / "src" / "vq" / "gateway"


def _sibling_names(tree: ast.Module) -> dict[str, str]:
    """Names this module imports from another module of the gateway → that module."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = node.module or ""
        if node.level == 1:
            sibling = module or "__init__"
        elif module.startswith("vq.gateway"):
            sibling = module.removeprefix("vq.gateway").lstrip(".") or "__init__"
        else:
            continue
        for alias in node.names:
            names[alias.asname or alias.name] = sibling
    return names


def inheritance_across_files(sources: dict[str, str]) -> list[str]:
    """``module.Class(Base from other)`` for each class deriving from a sibling's class."""
    found = []
    for module, text in sorted(sources.items()):
        tree = ast.parse(text)
        siblings = _sibling_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    if isinstance(base, ast.Name) and base.id in siblings:
                        found.append(f"{module}.{node.name}({base.id} from {siblings[base.id]})")
    return found


def import_circles(sources: dict[str, str]) -> list[list[str]]:
    """Every circle of imports among the gateway's modules (each as a path of names)."""
    graph = {
        module: set(_sibling_names(ast.parse(text)).values()) for module, text in sources.items()
    }
    circles = []

    def walk(module: str, path: list[str]) -> None:
        for target in sorted(graph.get(module, ())):
            if target == path[0]:
                circles.append([*path, target])
            elif target not in path:
                walk(target, [*path, target])

    for start in sorted(graph):
        walk(start, [start])
    return circles


def _gateway_sources() -> dict[str, str]:
    return {path.stem: path.read_text() for path in sorted(GATEWAY.glob("*.py"))}


def test_no_gateway_class_inherits_from_another_file() -> None:
    assert inheritance_across_files(_gateway_sources()) == []


def test_the_gateway_modules_import_without_a_circle() -> None:
    assert import_circles(_gateway_sources()) == []


def test_the_gateway_composes_its_link_disk_and_fallback() -> None:
    tree = ast.parse((GATEWAY / "__init__.py").read_text())
    gateway = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Gateway")
    assert gateway.bases == []
    built = {
        node.func.id
        for node in ast.walk(gateway)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert {"DaemonLink", "DiskVerbs", "DiskFallbacks"} <= built


def test_the_checks_see_inheritance_and_circles() -> None:
    sources = {
        "__init__": "from .a import A\nclass G(A):\n    pass\n",
        "a": "from vq.gateway.b import B\nclass A(B):\n    pass\n",
        "b": "from . import G\nclass B:\n    pass\n",
    }
    assert inheritance_across_files(sources) == ["__init__.G(A from a)", "a.A(B from b)"]
    assert ["__init__", "a", "b", "__init__"] in import_circles(sources)
