"""``dict[str, Any]`` above the socket only where a mapping is really free-form (a ratchet).

The answers the CLI, the gateway and the web read are typed (:mod:`vq.protocol.answers`,
:mod:`vq.protocol.report_answers`); what is left as ``dict[str, Any]`` in these packages
is free-form by nature: user-supplied JSON (submit fields, environment, overrides), raw
parsed files (events, samples, receipts, account and token files), another host's JSON
(the fleet, remote answers), template contexts, framing, pydantic ``model_dump`` and the
return annotations FastAPI serializes as they are. The ceilings only go down: a new
structured answer gets a type, not ``dict[str, Any]``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent.parent / "src" / "vq"

#: Most ``dict[str, Any]`` each package may hold (lower them as types replace them).
CEILINGS = {
    "gateway": 2,
    "cli": 24,
    "protocol": 18,
    "api_client": 7,
    "web": 106,
}


def occurrences(package: Path) -> int:
    return sum(path.read_text().count("dict[str, Any]") for path in package.rglob("*.py"))


@pytest.mark.parametrize("package", sorted(CEILINGS))
def test_free_form_mappings_do_not_grow(package: str) -> None:
    assert occurrences(SRC / package) <= CEILINGS[package]


def test_the_count_sees_an_occurrence(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x: dict[str, Any] = {}\ny: dict[str, int] = {}\n")
    assert occurrences(tmp_path) == 1
