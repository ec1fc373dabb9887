"""Every rich console vq prints to comes from :func:`vq.cli.rich_console.human_console`,
which reads no markup and no emoji codes, so user text (job names, commands, paths,
messages) always prints as it is."""

from __future__ import annotations

import ast
from pathlib import Path

import vq

SRC = Path(vq.__file__).parent
MAKER = SRC / "cli" / "rich_console.py"


def _console_calls(source: str) -> list[int]:
    """Lines calling ``Console(...)`` (by that name or as ``rich.console.Console``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name == "Console":
                lines.append(node.lineno)
    return lines


def test_only_the_human_console_maker_constructs_a_console() -> None:
    offenders = [
        f"{path.relative_to(SRC)}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        if path != MAKER
        for line in _console_calls(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], "construct consoles with human_console(): " + ", ".join(offenders)


def test_the_check_sees_each_form() -> None:
    assert _console_calls("from rich.console import Console\nConsole()\n") == [2]
    assert _console_calls("import rich.console\nrich.console.Console(markup=True)\n") == [2]
    assert _console_calls("console = human_console()\n") == []
