"""The import graph of ``vq`` has no circle, and every part of it has a layer.

grimp (import-linter's own graph library) sees every import: module level, inside
functions and under ``TYPE_CHECKING`` alike, so a circle hidden behind a function-level
import is still a circle here. import-linter (``make check``) checks the direction of the
imports between the layers of ``pyproject.toml``; these tests check what it cannot: that
no module imports itself back through others (inside a package too), and that no package
or module of ``src/vq`` is left outside the layers.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).parent.parent.parent
SRC = ROOT / "src" / "vq"
LAYERS_CONTRACT = "Layers flow one way"

#: The circles still known, each the exact set of modules one circle runs through: none
#: is left. The list only shrinks: no circle may join it.
KNOWN_CYCLES: frozenset[frozenset[str]] = frozenset()


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """Every set of two or more nodes that reach each other (Tarjan, iterative), and
    every node that imports itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[frozenset[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                members: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.add(member)
                    if member == node:
                        break
                if len(members) > 1 or node in graph.get(node, ()):
                    found.append(frozenset(members))
    return found


def _vq_graph() -> dict[str, set[str]]:
    graph = grimp.build_graph("vq")
    return {
        module: {
            target
            for target in graph.find_modules_directly_imported_by(module)
            if target == "vq" or target.startswith("vq.")
        }
        for module in graph.modules
        if module == "vq" or module.startswith("vq.")
    }


def test_the_circle_finder_finds_circles_and_only_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert sorted(map(sorted, strongly_connected(graph))) == [["a", "b", "c"], ["e"]]


def test_no_import_circle_outside_the_known_ones() -> None:
    cycles = set(strongly_connected(_vq_graph()))
    new = sorted(sorted(cycle) for cycle in cycles - KNOWN_CYCLES)
    assert new == [], f"import circles (function-level imports count): {new}"


def test_the_known_circles_are_still_there() -> None:
    """A known circle that is gone leaves the list (it only shrinks)."""
    cycles = set(strongly_connected(_vq_graph()))
    gone = sorted(sorted(cycle) for cycle in KNOWN_CYCLES - cycles)
    assert gone == [], f"these circles are gone: remove them from KNOWN_CYCLES: {gone}"


def test_known_circles_are_only_in_the_scheduler_lanes() -> None:
    outside = sorted(
        module
        for cycle in KNOWN_CYCLES
        for module in cycle
        if not module.startswith("vq.executors.scheduler.")
    )
    assert outside == []


def _layers_contract() -> dict[str, object]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (contract,) = (c for c in contracts if c["name"] == LAYERS_CONTRACT)
    assert isinstance(contract, dict)
    return contract


def _layered_names() -> set[str]:
    layers = _layers_contract()["layers"]
    assert isinstance(layers, list)
    names: set[str] = set()
    for layer in layers:
        names.update(part.strip() for part in layer.replace(":", "|").split("|"))
    return names


def _top_level_parts() -> list[str]:
    """Every package and module directly under src/vq (its ``__init__`` aside)."""
    parts = [
        f"vq.{path.name}"
        for path in SRC.iterdir()
        if path.is_dir() and (path / "__init__.py").is_file()
    ]
    parts += [f"vq.{path.stem}" for path in SRC.glob("*.py") if path.name != "__init__.py"]
    return sorted(parts)


def _children(package: str) -> list[str]:
    """The modules and packages directly inside ``package`` (its ``__init__`` aside)."""
    base = SRC.parent.joinpath(*package.split("."))
    if not base.is_dir():
        return []
    parts = [
        f"{package}.{path.name}"
        for path in base.iterdir()
        if path.is_dir() and (path / "__init__.py").is_file()
    ]
    parts += [f"{package}.{path.stem}" for path in base.glob("*.py") if path.name != "__init__.py"]
    return sorted(parts)


def _exists(name: str) -> bool:
    base = SRC.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


@pytest.mark.parametrize("part", _top_level_parts())
def test_every_package_and_module_has_a_layer(part: str) -> None:
    """A part is in one layer, or (a feature package whose pure core and use cases sit
    in different layers, like packing) every module directly inside it is."""
    layered = _layered_names()
    unlayered = [] if part in layered else [c for c in _children(part) if c not in layered]
    if part not in layered and not _children(part):
        unlayered = [part]
    assert unlayered == [], f"{unlayered} in no layer of {LAYERS_CONTRACT!r}"


def test_the_layers_name_only_what_exists() -> None:
    missing = sorted(name for name in _layered_names() if not _exists(name))
    assert missing == [], f"layers that name no package or module: {missing}"


def test_the_layers_ignore_no_import() -> None:
    """A layering exception is fixed by moving code, never by ignoring the import."""
    assert "ignore_imports" not in _layers_contract()
