"""One engine protocol, lanes composed of parts, no circles (an AST check).

* No executor, engine or job-control method exists only to raise or to return a
  constant: every class in ``vq.executors`` and ``vq.daemon`` that implements a method of
  :class:`~vq.executors.base.JobControl`, :class:`~vq.executors.base.Engine` or
  :class:`~vq.executors.base.AdoptingEngine` gives it a body that does something.
* The daemon loop ticks one list of engines: only the local engine runs the dispatcher's
  pass, only :meth:`vq.daemon.app.Daemon.engines` lists the lanes for the loop, and only
  the recovery pass asks an engine to adopt its jobs at a start.
* ``vq.executors.scheduler`` has no import circle, counting imports under
  ``TYPE_CHECKING`` and inside functions, and no function-level import of ``vq``; no
  class there inherits from a class of another module of the package (a lane is
  composed of its parts, not spread over files by inheritance).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from vq.executors import base

SRC = Path(__file__).parent.parent.parent / "src" / "vq"
SCHEDULER = SRC / "executors" / "scheduler"
PACKAGE = "vq.executors.scheduler"


#: Methods of the engine and job-control protocols (what the daemon asks of any backend).
SEAM_METHODS = frozenset(
    name
    for protocol in (
        base.JobControl,
        base.Engine,
        base.AdoptingEngine,
        base.Executor,
        base.HostExecutor,
    )
    for name, value in vars(protocol).items()
    if callable(value) and not name.startswith("_")
)

#: Reviewed bodies that return a constant because that IS the answer, with the reason.
TRUE_CONSTANTS = {
    ("LocalExecutor", "check_pausable"): "SIGSTOP works on any live group: nothing to refuse",
}


def _body(node: ast.FunctionDef) -> list[ast.stmt]:
    """The statements of ``node`` after its docstring."""
    body = node.body
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        body = body[1:]
    return body


def _constant(node: ast.expr | None) -> bool:
    """``None``, a literal, or an empty container: an answer that ignores everything."""
    if node is None or isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
        return not any(True for _ in ast.iter_child_nodes(node) if not isinstance(_, ast.Load))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in {"set", "dict", "list", "frozenset", "tuple"} and not node.args
    return False


def stub_kind(node: ast.FunctionDef) -> str | None:
    """Why ``node``'s body is a stub (``pass``, ``...``, a bare constant return, or only
    a raise), or None when it does something."""
    body = _body(node)
    if not body:
        return "only a docstring"
    if len(body) != 1:
        return None
    only = body[0]
    if isinstance(only, ast.Pass):
        return "pass"
    if isinstance(only, ast.Expr) and isinstance(only.value, ast.Constant):
        return "..."
    if isinstance(only, ast.Return) and _constant(only.value):
        return "returns a constant"
    if isinstance(only, ast.Raise):
        return "only raises"
    return None


def _is_protocol(node: ast.ClassDef) -> bool:
    return any(
        (isinstance(b, ast.Name) and b.id == "Protocol")
        or (isinstance(b, ast.Attribute) and b.attr == "Protocol")
        for b in node.bases
    )


def seam_stubs(source: str) -> list[str]:
    """Engine and job-control methods of concrete classes in ``source`` whose body is a
    stub (see :func:`stub_kind`)."""
    problems = []
    for cls in ast.walk(ast.parse(source)):
        if not isinstance(cls, ast.ClassDef) or _is_protocol(cls):
            continue
        for node in cls.body:
            if not isinstance(node, ast.FunctionDef) or node.name not in SEAM_METHODS:
                continue
            if (cls.name, node.name) in TRUE_CONSTANTS:
                continue
            kind = stub_kind(node)
            if kind is not None:
                problems.append(f"line {node.lineno}: {cls.name}.{node.name} {kind}")
    return problems


def _modules(*under: Path) -> list[Path]:
    return sorted(path for root in under for path in root.rglob("*.py"))


@pytest.mark.parametrize(
    "path",
    _modules(SRC / "executors", SRC / "daemon"),
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_no_engine_or_control_method_is_a_stub(path: Path) -> None:
    problems = seam_stubs(path.read_text())
    assert not problems, "a backend gives what it has, never a stub: " + "; ".join(problems)


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ("return None", "returns a constant"),
        ("return False", "returns a constant"),
        ("return {}", "returns a constant"),
        ("return set()", "returns a constant"),
        ("raise LaunchError('no')", "only raises"),
        ("pass", "pass"),
        ("...", "..."),
        ("'''Docstring only.'''", "only a docstring"),
    ],
)
def test_the_stub_check_sees_each_form(body: str, kind: str) -> None:
    source = f"class Lane:\n    def cancel(self, handle):\n        {body}\n"
    assert seam_stubs(source) == [f"line 2: Lane.cancel {kind}"]


def test_a_body_that_answers_is_not_a_stub() -> None:
    source = (
        "class Lane:\n"
        "    def started(self, spec):\n"
        "        return spec.scheduler_job_id is not None\n"
        "    def cancel(self, handle):\n"
        "        '''Doc.'''\n"
        "        self.queue(handle)\n"
        "        return True\n"
    )
    assert seam_stubs(source) == []


# --- one engine list -------------------------------------------------------------------------
def _calls(path: Path, name: str) -> list[int]:
    """Lines calling ``X.name()`` in ``path`` (``lanes.active()``, not a throttle's)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
        and (name != "active" or "lanes" in ast.unparse(node.func.value))
    ]


def test_the_loop_ticks_one_list_of_engines() -> None:
    daemon = SRC / "daemon"
    callers = {
        name: sorted(str(p.relative_to(daemon)) for p in _modules(daemon) if _calls(p, name))
        for name in ("run_pass", "active", "adopt", "tick")
    }
    assert callers["run_pass"] == ["local_engine.py"]  # the dispatcher is the local engine
    assert callers["active"] == ["app.py"]  # Daemon.engines: the lanes, after the local one
    assert callers["adopt"] == ["recovery.py"]  # every engine adopts at the recovery pass
    ticks = ast.parse((daemon / "app.py").read_text())
    engine_ticks = [
        node
        for node in ast.walk(ticks)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "tick"
    ]
    ticked = {ast.unparse(n.func.value) for n in engine_ticks}  # type: ignore[attr-defined]
    assert "engine" in ticked and not [t for t in ticked if "lane" in t or "dispatch" in t]


# --- the scheduler package's imports -------------------------------------------------------------
def _module_name(path: Path) -> str:
    return path.stem


def _imports(path: Path) -> Iterator[tuple[str, int, bool]]:
    """(module of the package imported, line, at function level) for every import in
    ``path``, under ``TYPE_CHECKING`` or inside a function included."""
    tree = ast.parse(path.read_text())
    nested: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nested |= {id(child) for child in ast.walk(node) if child is not node}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                targets = [node.module] if node.module else [a.name for a in node.names]
            elif node.level == 0 and (node.module or "").startswith(PACKAGE + "."):
                targets = [(node.module or "")[len(PACKAGE) + 1 :]]
            elif node.level == 0 and node.module == PACKAGE:
                targets = [a.name for a in node.names]
            else:
                targets = []
            for target in targets:
                yield target.split(".")[0], node.lineno, id(node) in nested
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    target = alias.name[len(PACKAGE) + 1 :].split(".")[0]
                    yield target, node.lineno, id(node) in nested


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in SCHEDULER.glob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target, _, _ in _imports(path):
            if target in modules and target != name:
                graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (module → modules it imports), or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found is not None:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found is not None:
                return found
    return None


def test_the_scheduler_package_has_no_import_circle() -> None:
    cycle = find_cycle(_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_cycle_check_sees_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a"}}) is None


@pytest.mark.parametrize(
    "path",
    sorted(SCHEDULER.glob("*.py")),
    ids=lambda p: p.name,
)
def test_no_function_level_vq_import_in_the_scheduler_package(path: Path) -> None:
    tree = ast.parse(path.read_text())
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom) and (
                node.level > 0 or (node.module or "").split(".")[0] == "vq"
            ):
                found.append(f"line {node.lineno}: from {'.' * node.level}{node.module}")
            elif isinstance(node, ast.Import) and any(
                a.name.split(".")[0] == "vq" for a in node.names
            ):
                found.append(f"line {node.lineno}: import")
    assert not found, "import at the top of the module: " + "; ".join(found)


@pytest.mark.parametrize(
    "path",
    sorted(SCHEDULER.glob("*.py")),
    ids=lambda p: p.name,
)
def test_no_class_of_the_scheduler_package_inherits_across_its_files(path: Path) -> None:
    """A base class from another module of the package would spread one class over
    files (``SchedulerLane(SubmittingLane(ObservingLane))`` was)."""
    imported = {
        alias.asname or alias.name
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level == 1
        for alias in node.names
    }
    found = [
        f"{node.name}({ast.unparse(b)})"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
        for b in node.bases
        if isinstance(b, ast.Name) and b.id in imported
    ]
    assert not found, "compose the parts instead: " + ", ".join(found)
