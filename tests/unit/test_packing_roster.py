"""Rosters (pure): the JSONL adapter's refusals, exact-prefix growth, the pack document."""

from __future__ import annotations

import json

import pytest

from vq.packing.roster import (
    PackDocument,
    RosterRefused,
    StoredTask,
    Task,
    compare_rosters,
    parse_task_lines,
    roster_digest,
)


def _line(**fields: object) -> str:
    return json.dumps(fields)


def test_parse_accepts_exact_lines() -> None:
    text = (
        _line(key="t0", args=["prog", "--x", "1"], stdin_file="in/t0.json")
        + "\n"
        + _line(key="t1", args=["prog"], stdin_file=None)
        + "\n"
    )
    lines = parse_task_lines(text)
    assert [(line.key, line.args, line.stdin_file) for line in lines] == [
        ("t0", ("prog", "--x", "1"), "in/t0.json"),
        ("t1", ("prog",), None),
    ]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("{}\n", "exactly"),
        (_line(key="a", args=["p"]) + "\n", "exactly"),
        (_line(key="a", args=["p"], stdin_file=None, extra=1) + "\n", "exactly"),
        (_line(key="a b", args=["p"], stdin_file=None), "key must be"),
        (_line(key="a", args=[], stdin_file=None), "non-empty array"),
        (_line(key="a", args="p", stdin_file=None), "non-empty array"),
        (_line(key="a", args=["p", 3], stdin_file=None), "strings only"),
        (_line(key="a", args=["-p"], stdin_file=None), "must not start with '-'"),
        (_line(key="a", args=["p\u0000"], stdin_file=None), "NUL"),
        (_line(key="a", args=["p"], stdin_file="/etc/passwd"), "relative path"),
        (_line(key="a", args=["p"], stdin_file="../x"), "relative path"),
        (_line(key="a", args=["p"], stdin_file=3), "relative path"),
        ("not json\n", "not a JSON object"),
        (_line(key="a", args=["p"], stdin_file=None) + "\n\n", "line 2"),
    ],
)
def test_parse_refusals(text: str, words: str) -> None:
    with pytest.raises(RosterRefused) as caught:
        parse_task_lines(text)
    assert words in str(caught.value)


def test_duplicate_keys_name_the_line() -> None:
    text = "\n".join(_line(key="a", args=["p"], stdin_file=None) for _ in range(2))
    with pytest.raises(RosterRefused, match="line 2: key 'a' appears twice"):
        parse_task_lines(text)


A, B, C = Task("a", ("p",)), Task("b", ("p", "1"), b"\x00\xff"), Task("c", ("p",))


def test_growth_rules() -> None:
    assert compare_rosters([A, B], [A, B], sealed=False) == "same"
    assert compare_rosters([A, B], [A, B, C], sealed=False) == "append"
    assert compare_rosters([A, B], [A, B], sealed=True) == "same"
    refusals = [
        ([A, B], [C], False),  # a suffix alone
        ([A, B], [B, A], False),  # reordered
        ([A, B], [A], False),  # removed
        ([A, B], [A, Task("b", ("p", "2")), C], False),  # changed args
        ([A, B], [A, Task("b", ("p", "1"), b"\x00"), C], False),  # changed stdin
        ([A, B], [A, B, C], True),  # sealed
    ]
    for registered, incoming, sealed in refusals:
        with pytest.raises(RosterRefused):
            compare_rosters(registered, incoming, sealed=sealed)


def _document(**changes: object) -> PackDocument:
    base = PackDocument(
        schema="vq.pack/1",
        name="sweep",
        pack_id="0" * 32,
        revision=1,
        sealed=False,
        created_at="2026-01-01T00:00:00Z",
        updated_at="2026-01-01T00:00:00Z",
        tasks=[StoredTask.of(A), StoredTask.of(B)],
    )
    return base.model_copy(update=changes)


def test_document_round_trip_and_validation_on_read() -> None:
    document = _document()
    again = PackDocument.from_bytes(document.to_bytes())
    assert again == document
    assert again.roster() == [A, B]
    assert roster_digest(again.roster()) == roster_digest([A, B])
    assert roster_digest([A, B]) != roster_digest([B, A])
    raw = json.loads(document.to_bytes())
    for mutate in (
        lambda d: d.update(schema="vq.pack/2"),
        lambda d: d["tasks"][1].update(stdin_b64="AAAA"),  # digest mismatch
        lambda d: d["tasks"].append(dict(d["tasks"][0])),  # duplicate key
        lambda d: d.update(revision=0),
        lambda d: d.update(surprise=True),
        lambda d: d.update(
            attempts=[
                {
                    "allocation_id": "0123456789abcdef",
                    "task_keys": ["a"],
                    "outcome": "accepted",
                    "revision": 1,
                }
            ]
        ),  # accepted without a receipt
    ):
        broken = json.loads(json.dumps(raw))
        mutate(broken)
        with pytest.raises(ValueError):
            PackDocument.from_bytes(json.dumps(broken).encode())
