"""The service context's fields have real types (no ``Any``): an AST check of its class."""

from __future__ import annotations

import ast
from pathlib import Path

CONTEXT = Path(__file__).parent.parent.parent / "src" / "vq" / "services" / "context.py"


def untyped_fields(source: str, class_name: str) -> list[str]:
    """The fields of dataclass ``class_name`` whose annotation names ``Any``."""
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    return [
        node.target.id
        for node in cls.body
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and any(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(node.annotation))
    ]


def test_no_service_context_field_is_any() -> None:
    assert untyped_fields(CONTEXT.read_text(), "ServiceContext") == []


def test_the_check_sees_an_any_field() -> None:
    source = (
        "class ServiceContext:\n    a: int\n    b: Mapping[str, Any]\n    c: Callable[[Any], int]\n"
    )
    assert untyped_fields(source, "ServiceContext") == ["b", "c"]
