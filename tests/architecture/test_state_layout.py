"""Every state-root path is named in ``vq.paths`` (the layout object), nowhere else.

An AST check: outside ``paths.py`` no module joins a string-literal file name (or a
module-level string constant) onto a state root (``<...root...> / "drain.json"``).
Config-root files (``config.toml``, web tokens) are not state and are not checked.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from vq.paths import StateLayout

SRC = Path(__file__).parent.parent.parent / "src" / "vq"
#: Modules allowed to name state-root files: the layout itself, and the campaign run
#: directory's own layout (a directory the user chooses, not a state root).
ALLOWED = {"paths.py", "campaign/rundir.py"}


def _string_constants(tree: ast.Module) -> set[str]:
    """Module-level names bound to a string literal (``DRAIN_FILE = "drain.json"``)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            if isinstance(node.value.value, str):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _is_literal_name(node: ast.expr, constants: set[str]) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    if isinstance(node, ast.JoinedStr):
        return True
    return isinstance(node, ast.Name) and node.id in constants


def _is_state_root(node: ast.expr) -> bool:
    """A root named directly (``root``, ``paths.root``, ``root / "x"``), not a call's result."""
    if not isinstance(node, ast.Name | ast.Attribute | ast.BinOp):
        return False
    text = ast.unparse(node)
    return "root" in text and "config" not in text and "run_dir" not in text


def root_joins(source: str) -> list[str]:
    """The ``<state root> / <literal>`` joins in one module's source."""
    tree = ast.parse(source)
    constants = _string_constants(tree)
    return [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Div)
        and _is_literal_name(node.right, constants)
        and _is_state_root(node.left)
    ]


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if str(p.relative_to(SRC)) not in ALLOWED)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_names_a_state_root_file(path: Path) -> None:
    joins = root_joins(path.read_text())
    assert not joins, f"name these in vq.paths.StateLayout instead: {joins}"


def test_the_check_sees_literal_and_constant_joins() -> None:
    source = (
        'F = "drain.json"\na = paths.root / F\nb = state_root / "uploads"\nc = root / f"{x}.json"'
    )
    assert root_joins(source) == ["paths.root / F", "state_root / 'uploads'", "root / f'{x}.json'"]
    assert root_joins('d = config_root / "config.toml"\ne = paths.drain_file') == []


def test_an_owner_layout_moves_the_owner_trees_only(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    owner = layout.for_owner(1000)
    assert owner.queue_dir == tmp_path / "users" / "1000" / "queue"
    assert owner.spec("abc") == tmp_path / "users" / "1000" / "queue" / "abc.json"
    assert owner.idempotency_dir == tmp_path / "users" / "1000" / "idempotency"
    assert owner.daemon_sock == layout.daemon_sock == tmp_path / "daemon.sock"
    assert owner.drain_file == layout.drain_file
    assert layout.host("cluster") == tmp_path / "hosts" / "cluster.json"
    assert layout.outbox_dir == tmp_path / "outbox"
