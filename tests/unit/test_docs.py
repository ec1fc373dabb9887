"""The reference docs stay true: exit codes and config keys match the code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from vq.config.settings import Settings
from vq.errors import EXIT_CODES

DOCS = Path(__file__).parent.parent.parent / "docs"


def _table_after(marker: str, text: str) -> list[list[str]]:
    section = text.split(marker, 1)[1]
    rows = []
    for line in section.splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if set(cells[0]) <= {"-", " "}:
            continue
        rows.append(cells)
    return rows[1:]  # drop the header


def test_exit_code_table_matches_errors_module() -> None:
    rows = _table_after("<!-- exit-codes", (DOCS / "cli.md").read_text())
    documented = {row[1]: int(row[0]) for row in rows if row[1] != "–"}
    assert documented == EXIT_CODES


def _keys(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    keys: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.update(_keys(annotation, f"{prefix}{name}."))
        else:
            keys[f"{prefix}{name}"] = field.default
    return keys


def test_config_reference_lists_every_key_with_its_default() -> None:
    rows = _table_after("<!-- config-keys", (DOCS / "config.md").read_text())
    documented = {re.sub(r"`", "", row[0]): row[1] for row in rows}
    keys = _keys(Settings)
    assert set(documented) == set(keys)
    for key, default in keys.items():
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            assert float(documented[key]) == float(default), key
