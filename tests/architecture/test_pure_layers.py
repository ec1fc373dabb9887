"""The pure layers stay pure: no environment, files, processes, sockets or clocks.

import-linter (``make check``) forbids the imports; this AST check catches what an
import ban cannot see: ``os.environ``, ``open(...)``, ``os.*`` file or process calls.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PURE = ("domain", "protocol", "campaign", "dialects", "packing")
SRC = Path(__file__).parent.parent.parent / "src" / "vq"
FORBIDDEN_CALLS = {"open", "input", "print", "exec", "eval"}
FORBIDDEN_OS = {
    "environ",
    "getenv",
    "open",
    "remove",
    "unlink",
    "rename",
    "replace",
    "mkdir",
    "makedirs",
    "listdir",
    "scandir",
    "stat",
    "system",
    "fork",
    "kill",
    "killpg",
    "chdir",
    "getcwd",
    "walk",
}


#: Packing's use cases (the layer of the services) beside its pure core.
IMPURE = (SRC / "packing" / "cases",)


def _pure_modules() -> list[Path]:
    return sorted(
        path
        for package in PURE
        for path in (SRC / package).rglob("*.py")
        if not any(path.is_relative_to(impure) for impure in IMPURE)
    )


@pytest.mark.parametrize("path", _pure_modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_module_does_no_io(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in FORBIDDEN_CALLS:
                problems.append(f"line {node.lineno}: {node.func.id}()")
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
            and node.attr in FORBIDDEN_OS
        ):
            problems.append(f"line {node.lineno}: os.{node.attr}")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            if any(n.split(".")[0] in {"os", "subprocess", "socket", "time"} for n in names):
                problems.append(f"line {node.lineno}: imports {names}")
    assert problems == [], f"{path.relative_to(SRC)} does I/O: {problems}"


def test_there_are_pure_modules_to_check() -> None:
    assert len(_pure_modules()) >= 10
