"""The pure layers stay pure: no environment, files, processes, sockets or clocks.

import-linter (``make check``) forbids the imports; this AST check catches what an
import ban cannot see: ``os.environ``, ``open(...)``, ``os.*`` file or process calls.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent
SRC = ROOT / "src" / "vq"
PURE_CONTRACT = "Pure layers do no I/O and know nothing above them"
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


def _pure_names() -> list[str]:
    """The source modules of the pure-layers import contract (pyproject.toml): one list
    for both checks, so a module named pure there is also checked for I/O here."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (contract,) = (c for c in contracts if c["name"] == PURE_CONTRACT)
    return list(contract["source_modules"])


def _pure_modules() -> list[Path]:
    paths: set[Path] = set()
    for name in _pure_names():
        base = SRC.parent.joinpath(*name.split("."))
        if base.is_dir():
            paths.update(base.rglob("*.py"))
        else:
            paths.add(base.with_suffix(".py"))
    return sorted(paths)


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
    missing = [p for p in _pure_modules() if not p.is_file()]
    assert missing == [], f"the pure-layers contract names modules that do not exist: {missing}"
