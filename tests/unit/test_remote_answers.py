"""The remote answer's pure parts: the answer mark and the answer models (§2.2).

Deterministic: every split point of a stream is tried, every crafted answer is fixed.
"""

from __future__ import annotations

import io
from typing import Any

import pytest

from vq.protocol.answer_mark import (
    HOLD_LIMIT,
    MARK_ENV,
    MarkSkipper,
    after_mark,
    announce,
    mark_line,
)
from vq.protocol.remote_answers import (
    MAX_DEPTH,
    ActionAnswer,
    BadAnswer,
    ListAnswer,
    SubmitAnswer,
    read_answer,
    read_offset,
    read_version,
)

NONCE = "0123456789abcdef0123456789abcdef"
ID = "0123456789ab"


def _skip_in_chunks(data: bytes, size: int) -> bytes:
    skipper = MarkSkipper(NONCE)
    out = b"".join(skipper.feed(data[at : at + size]) for at in range(0, len(data), size))
    return out + skipper.finish()


def test_the_mark_drops_a_banner_whatever_the_chunking() -> None:
    answer = b'{"id": "0123456789ab"}\n' + bytes(range(256))
    stream = b"Loading vq/0.1 module\n" + mark_line(NONCE) + answer
    assert after_mark(stream, NONCE) == answer
    for size in range(1, len(stream) + 1):
        assert _skip_in_chunks(stream, size) == answer, size


def test_without_a_mark_the_output_is_whole() -> None:
    old = b"output of a vq that predates the mark\n"
    assert after_mark(old, NONCE) == old
    assert _skip_in_chunks(old, 7) == old
    # a long stream without a mark starts once the hold limit is reached
    skipper = MarkSkipper(NONCE)
    assert skipper.feed(b"x" * (HOLD_LIMIT - 1)) == b""
    assert skipper.feed(b"yz") == b"x" * (HOLD_LIMIT - 1) + b"yz"
    assert skipper.feed(b"more") == b"more"


def test_a_stream_cut_before_its_mark_yields_nothing() -> None:
    line = mark_line(NONCE)
    for cut in range(len(line)):
        skipper = MarkSkipper(NONCE)
        assert skipper.feed(b"Loading vq/0.1 module\n" + line[:cut]) == b""
        assert skipper.finish(complete=False) == b""


def test_announce_writes_the_mark_once_and_removes_the_variable() -> None:
    environ = {MARK_ENV: NONCE, "HOME": "/h"}
    out, err = io.BytesIO(), io.BytesIO()
    announce(environ, out, err)
    assert out.getvalue() == err.getvalue() == mark_line(NONCE)
    assert environ == {"HOME": "/h"}  # nothing it starts inherits it
    hostile = {MARK_ENV: "x\n\x1b[2J"}
    announce(hostile, out, err)
    assert hostile == {} and out.getvalue() == mark_line(NONCE)  # not a nonce: no echo


def _bad(data: bytes, model: Any) -> str:
    with pytest.raises(BadAnswer) as caught:
        read_answer(data, model)
    return str(caught.value)


def test_listings_must_be_listings_of_well_formed_jobs() -> None:
    good = b'{"jobs": [{"id": "0123456789ab", "state": "RUNNING", "extra": {"kept": 1}}]}'
    assert read_answer(good, ListAnswer)["jobs"][0]["extra"] == {"kept": 1}
    assert _bad(b"[1, 2]", ListAnswer) == "answer: must be an object"
    assert _bad(b'{"jobs": 5}', ListAnswer) == "jobs: must be a list"
    assert _bad(b'{"jobs": [5]}', ListAnswer) == "jobs.0: must be an object"
    assert (
        _bad(b'{"jobs": [{"id": 5, "state": "RUNNING"}]}', ListAnswer) == "jobs.0.id: must be text"
    )
    evil = b'{"jobs": [{"id": "../../../../tmp/evil", "state": "RUNNING"}]}'
    assert _bad(evil, ListAnswer) == "jobs.0.id: is not in the expected form"
    assert _bad(b"Loading vq/0.1 module", ListAnswer) == "it printed text that is not JSON"
    assert _bad(b"", ListAnswer) == "it printed nothing"


def test_nesting_is_bounded_before_anything_recurses() -> None:
    inside = b"[" * (MAX_DEPTH - 2) + b"]" * (MAX_DEPTH - 2)
    assert read_answer(b'{"jobs": [], "x": ' + inside + b"}", ListAnswer)
    for depth in (MAX_DEPTH, 900, 100_000):
        deep = b'{"jobs": [], "x": ' + b"[" * depth + b"]" * depth + b"}"
        assert "nested deeper" in _bad(deep, ListAnswer)


def test_a_submit_answer_is_one_job_or_one_group() -> None:
    assert read_answer(f'{{"id": "{ID}", "state": "PENDING"}}'.encode(), SubmitAnswer)
    group = f'{{"jobs": [{{"id": "{ID}", "state": "PENDING"}}], "array_group_id": "{ID}"}}'
    assert read_answer(group.encode(), SubmitAnswer)
    for bad in (
        b'{"id": "../../../../tmp/evil", "state": "PENDING"}',
        b'{"jobs": ["../../../etc/passwd"], "array_group_id": "0123456789ab"}',
        f'{{"jobs": [{{"id": "{ID}", "state": "PENDING"}}]}}'.encode(),
        b'{"state": "PENDING"}',
        b'{"id": "0123456789ab", "state": "PENDING", "capacity_warnings": "x"}',
    ):
        _bad(bad, SubmitAnswer)
    assert read_answer(f'[{{"id": "{ID}", "state": "KILLED"}}]'.encode(), ActionAnswer)


def test_text_answers() -> None:
    assert read_version(b"vq, version 0.1.0\n") == "0.1.0"
    for bad in (b"", b"vq, version 1.0\x1b[2J\n", b"banner\nvq, version 1\n", b"1.0"):
        with pytest.raises(BadAnswer):
            read_version(bad)
    assert read_offset(b"1234\n") == 1234
    for bad in (b"-1", b"x", b"", b"1" * 19):
        with pytest.raises(BadAnswer):
            read_offset(bad)
