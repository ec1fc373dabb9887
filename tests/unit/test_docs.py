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


# --- examples that were wrong (issue 30 item 13) ----------------------------------------
README = DOCS.parent / "README.md"


def _doc_texts() -> dict[str, str]:
    texts = {path.name: path.read_text() for path in sorted(DOCS.glob("*.md"))}
    texts["README.md"] = README.read_text()
    return texts


def test_campaign_examples_name_json_files() -> None:
    """Campaigns are vq.campaign/1 JSON: no example may hand a command a TOML or YAML file."""
    verb = re.compile(r"vq campaign (?:validate|run|status|pin|plan)\s+([^\s`;|]+)")
    found = 0
    for name, text in _doc_texts().items():
        for match in verb.finditer(text):
            argument = match.group(1)
            if argument.isupper() or argument.startswith("-"):
                continue  # FILE, RUN_DIR, an option: a placeholder
            found += 1
            assert argument.endswith(".json"), f"{name}: {match.group(0)!r}"
    assert found, "the README's campaign example is checked"


def test_no_doc_says_lanes_are_not_configurable() -> None:
    for name, text in _doc_texts().items():
        assert "not configurable yet" not in " ".join(text.split()), name


def test_remote_hosts_example_shows_every_ordinary_host_key() -> None:
    from vq.config.hosts import LANE_KEYS, HostSettings

    text = (DOCS / "remote.md").read_text()
    block = text.split("```toml", 1)[1].split("```", 1)[0]
    assert "[hosts." in block
    ordinary = set(HostSettings.model_fields) - set(LANE_KEYS)
    ordinary -= {"scheduler", "scheduler_dialect", "down"}  # lanes' and the text's keys
    for key in sorted(ordinary):
        assert re.search(rf"^{key} = ", block, re.M), key


def test_the_cluster_scratch_directory_is_named_as_the_specs_where_it_first_appears() -> None:
    for name, text in _doc_texts().items():
        lines = text.splitlines()
        first = next((i for i, line in enumerate(lines) if ".vibeqc-cluster" in line), None)
        if first is None:
            continue
        nearby = " ".join(" ".join(lines[max(0, first - 2) : first + 12]).split())
        assert "spec's" in nearby and "name" in nearby, name
