"""Durations, job ids and the failure tail: small pure helpers with large input spaces."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from vq.domain.durations import (
    MAX_DURATION_SECONDS,
    format_duration,
    parse_duration,
    parse_moment,
)
from vq.domain.failure_tail import TAIL_BYTES, TAIL_LINES, failure_tail
from vq.domain.ids import JOB_ID_LENGTH, is_job_id, new_job_id
from vq.domain.sizes import parse_mem_mb
from vq.errors import InvalidInput

# --- parse_duration ---------------------------------------------------------------------
ACCEPTED = [
    ("90s", 90),
    ("10m", 600),
    ("2h30m", 9000),
    ("1d", 86400),
    ("45", 45),
    ("01:02:03", 3723),
    ("1d2h3m4s", 93784),
    ("0h1m", 60),
    ("100:00:00", 360_000),
    ("1:0:0", 3600),
    (" 10m ", 600),  # surrounding whitespace is stripped
    ("2H", 7200),  # case-insensitive units
]

REFUSED = [
    "",
    " ",
    "0",
    "0s",
    "0:00:00",
    "-5",
    "2x",
    "30m2h",  # units out of order
    "1h1h",  # repeated unit
    "1.5h",
    "h",
    "1 h",
    "1h 30m",
    "00:60:00",
    "00:00:60",
    "1:2",
    "+5",
    "5 s",
    "1h-30m",
]


@pytest.mark.parametrize(("text", "seconds"), ACCEPTED)
def test_parse_duration_accepts(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", REFUSED)
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_duration(text)
    assert info.value.exit_code == 4
    assert repr(text) in info.value.message
    assert info.value.hint is not None
    assert "2h30m" in info.value.hint


def test_parse_duration_out_of_order_message_says_so() -> None:
    with pytest.raises(InvalidInput, match="out of order"):
        parse_duration("30m2h")


@pytest.mark.parametrize("text", ["²", "1²", "⁵"])
def test_parse_duration_unicode_digits_raise_invalid_input(text: str) -> None:
    with pytest.raises(InvalidInput):
        parse_duration(text)


@given(st.text(max_size=12))
@example("")
@example("1h")
def test_parse_duration_returns_positive_int_or_invalid_input(text: str) -> None:
    """Only InvalidInput ever escapes, and any accepted value is a positive int.

    Inputs with non-ASCII digits are covered by the test above.
    """
    if any(ch.isdigit() and not ch.isascii() for ch in text):
        return
    try:
        seconds = parse_duration(text)
    except InvalidInput:
        return
    assert isinstance(seconds, int)
    assert seconds > 0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0, "0s"),
        (45, "45s"),
        (59, "59s"),
        (1.5, "1.5s"),
        (60, "1m"),
        (90, "1m30s"),
        (3600, "1h"),
        (3725, "1h2m5s"),
        (9000, "2h30m"),
        (86400, "1d"),
        (93784, "1d2h3m4s"),
        (86401, "1d1s"),
        (3725.9, "1h2m5s"),  # whole seconds above a minute
    ],
)
def test_format_duration(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=60, max_value=10**9))
def test_format_then_parse_round_trips_minutes_and_up(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


@given(st.integers(min_value=1, max_value=59))
def test_format_then_parse_round_trips_under_a_minute(seconds: int) -> None:
    assert format_duration(seconds) == f"{seconds}s"
    assert parse_duration(format_duration(seconds)) == seconds


@given(st.integers(1, 10**6))
def test_bare_integer_is_seconds(seconds: int) -> None:
    assert parse_duration(str(seconds)) == seconds


@given(st.integers(0, 99), st.integers(0, 59), st.integers(0, 59))
def test_colon_form(hours: int, minutes: int, secs: int) -> None:
    total = hours * 3600 + minutes * 60 + secs
    text = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    if total == 0:
        with pytest.raises(InvalidInput):
            parse_duration(text)
    else:
        assert parse_duration(text) == total


# --- job ids ----------------------------------------------------------------------------
def scripted_bytes(chunks: list[bytes]) -> Callable[[int], bytes]:
    it: Iterator[bytes] = iter(chunks)

    def random_bytes(n: int) -> bytes:
        chunk = next(it)
        assert len(chunk) == n
        return chunk

    return random_bytes


def test_new_job_id_is_twelve_lowercase_hex() -> None:
    import os

    for _ in range(50):
        job_id = new_job_id(os.urandom, lambda _id: False)
        assert re.fullmatch(r"[0-9a-f]{12}", job_id)
        assert len(job_id) == JOB_ID_LENGTH
        assert is_job_id(job_id)


def test_new_job_id_uses_the_injected_randomness() -> None:
    rb = scripted_bytes([bytes.fromhex("abcdef012345")])
    assert new_job_id(rb, lambda _id: False) == "abcdef012345"


def test_new_job_id_skips_taken_ids() -> None:
    taken = {"000000000000", "ffffffffffff"}
    seen: list[str] = []

    def is_taken(candidate: str) -> bool:
        seen.append(candidate)
        return candidate in taken

    rb = scripted_bytes([b"\x00" * 6, b"\xff" * 6, bytes.fromhex("0123456789ab")])
    assert new_job_id(rb, is_taken) == "0123456789ab"
    assert seen == ["000000000000", "ffffffffffff", "0123456789ab"]


def test_new_job_id_gives_up_when_everything_is_taken() -> None:
    calls = 0

    def rb(n: int) -> bytes:
        nonlocal calls
        calls += 1
        return b"\x01" * n

    with pytest.raises(RuntimeError):
        new_job_id(rb, lambda _id: True)
    assert calls == 64


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("0123456789ab", True),
        ("abcdefabcdef", True),
        ("000000000000", True),
        ("0123456789AB", False),
        ("0123456789a", False),
        ("0123456789abc", False),
        ("0123456789ag", False),
        ("", False),
        ("../../etc/pa", False),
        (" 0123456789ab", False),
    ],
)
def test_is_job_id(text: str, ok: bool) -> None:
    assert is_job_id(text) is ok


@pytest.mark.parametrize("text", ["0123456789ab\n", "abcdefabcdef\n"])
def test_is_job_id_refuses_trailing_newline(text: str) -> None:
    assert is_job_id(text) is False


@given(st.binary(min_size=6, max_size=6))
def test_any_six_bytes_give_a_valid_id(raw: bytes) -> None:
    assert is_job_id(new_job_id(lambda n: raw, lambda _id: False))


@given(st.text(max_size=16))
def test_is_job_id_matches_the_definition(text: str) -> None:
    if text.endswith("\n"):
        return  # the trailing-newline case is covered by the test above
    expected = len(text) == 12 and all(c in "0123456789abcdef" for c in text)
    assert is_job_id(text) is expected


# --- failure_tail -----------------------------------------------------------------------
@pytest.mark.parametrize("data", [None, b"", b"   ", b"\n\n\n", b" \n\t\n  \n"])
def test_failure_tail_none_for_missing_empty_or_blank(data: bytes | None) -> None:
    assert failure_tail(data) is None


def test_failure_tail_none_for_binary() -> None:
    assert failure_tail(b"Traceback\n\x00\x01\x02 core dump\n") is None
    assert failure_tail(b"\x00") is None


def test_failure_tail_ignores_nul_outside_the_window() -> None:
    data = b"\x00binary head\n" + b"x" * 5000 + b"\nlast line\n"
    assert failure_tail(data) == "last line"


def test_failure_tail_short_input_kept_whole() -> None:
    assert failure_tail(b"one\ntwo\nthree\n") == "one\ntwo\nthree"
    assert failure_tail(b"only line without newline") == "only line without newline"


def test_failure_tail_last_20_lines() -> None:
    data = b"".join(f"line {i}\n".encode() for i in range(100))
    tail = failure_tail(data)
    assert tail is not None
    lines = tail.split("\n")
    assert len(lines) == TAIL_LINES == 20
    assert lines == [f"line {i}" for i in range(80, 100)]


def test_failure_tail_drops_trailing_blank_lines() -> None:
    data = b"error: boom\nsecond\n\n   \n\t\n"
    assert failure_tail(data) == "error: boom\nsecond"


def test_failure_tail_trailing_blanks_do_not_count_against_20() -> None:
    data = b"".join(f"l{i}\n".encode() for i in range(30)) + b"\n" * 10
    tail = failure_tail(data)
    assert tail is not None
    assert tail.split("\n") == [f"l{i}" for i in range(10, 30)]


def test_failure_tail_drops_a_cut_first_line_beyond_4kb() -> None:
    # One huge line then two short ones: the window cuts into the huge line.
    data = b"A" * 10_000 + b"\nsecond\nthird\n"
    assert len(data) > TAIL_BYTES == 4096
    assert failure_tail(data) == "second\nthird"


def test_failure_tail_keeps_a_cut_line_when_it_is_the_only_one() -> None:
    data = b"B" * 10_000
    tail = failure_tail(data)
    assert tail == "B" * TAIL_BYTES


def test_failure_tail_only_reads_the_trailing_window() -> None:
    data = b"".join(f"{i:05d}".encode() + b"x" * 200 + b"\n" for i in range(100))
    tail = failure_tail(data)
    assert tail is not None
    lines = tail.split("\n")
    assert len("\n".join(lines).encode()) <= TAIL_BYTES
    assert lines[-1].startswith("00099")
    assert all(len(line) == 205 for line in lines)  # no cut (partial) line survives


def test_failure_tail_keeps_an_uncut_first_line_beyond_4kb() -> None:
    line = b"L" * 2047 + b"\n"  # two of these fill the window exactly
    data = b"x\n" + line * 2
    assert len(data) == TAIL_BYTES + 2
    assert failure_tail(data) == ("L" * 2047 + "\n") + "L" * 2047


def test_failure_tail_replaces_invalid_utf8() -> None:
    tail = failure_tail(b"bad \xff\xfe bytes\n\xc3\n")
    assert tail == "bad \ufffd\ufffd bytes\n\ufffd"


def test_failure_tail_window_cutting_a_multibyte_char_does_not_raise() -> None:
    # The 4 KB window starts in the middle of a 3-byte character on the first line.
    data = b"a" + "€".encode() * 2000 + b"\nlast\n"
    assert failure_tail(data) == "last"


@given(st.binary(max_size=6000))
def test_failure_tail_never_raises_and_respects_bounds(data: bytes) -> None:
    tail = failure_tail(data)
    if tail is None:
        return
    assert tail.strip()
    lines = tail.split("\n")
    assert len(lines) <= TAIL_LINES
    assert lines[-1].strip()
    # Every line comes from the trailing window (replacement chars aside).
    window = data[-TAIL_BYTES:].decode("utf-8", errors="replace")
    assert all(line in window for line in lines)
    # The kept lines end with the window's last non-blank line.
    # Lines are split on "\n" only (a stray form feed or vertical tab is not a line break).
    nonblank = [line.rstrip("\r") for line in window.split("\n") if line.strip()]
    assert lines[-1] == nonblank[-1]


# --- bounds, Slurm forms, bare numbers, times ---------------------------------------------
@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1-00", 86400),
        ("1-02:03", 93780),
        ("2-03:04:05", 183845),
        ("10:30", 630),
        ("1:00:00", 3600),
    ],
)
def test_parse_duration_accepts_slurm_forms(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["99999999999d", "99999999999999d", "99999999999999999d", "9" * 5000, "1-24", "1-"]
)
def test_parse_duration_refuses_huge_and_malformed_values_clearly(text: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_duration(text)
    assert len(info.value.message) < 200 and info.value.hint


def test_parse_duration_bound_is_inclusive() -> None:
    assert parse_duration(f"{MAX_DURATION_SECONDS}s") == MAX_DURATION_SECONDS
    with pytest.raises(InvalidInput, match="100 years"):
        parse_duration(f"{MAX_DURATION_SECONDS + 1}s")


def test_a_bare_number_is_refused_where_slurm_would_read_minutes() -> None:
    with pytest.raises(InvalidInput, match="bare number") as info:
        parse_duration("10", bare_seconds=False)
    assert "10m" in (info.value.hint or "") and "10s" in (info.value.hint or "")
    assert parse_duration("10m", bare_seconds=False) == 600


NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    [
        "99999999999d",
        "0001-01-01T00:00:00",
        "0001-01-01",
        "9999-12-31T23:59:59",
        "1969-12-31T00:00Z",
        "x",
    ],
)
def test_parse_moment_refuses_out_of_range_times(text: str) -> None:
    for ago in (True, False):
        with pytest.raises(InvalidInput):
            parse_moment(text, NOW, ago=ago)


def test_parse_moment_reads_iso_times_and_durations() -> None:
    assert parse_moment("2h", NOW, ago=True) == datetime(2026, 6, 1, 10, 0, tzinfo=UTC)
    assert parse_moment("1d", NOW, ago=False) == datetime(2026, 6, 2, 12, 0, tzinfo=UTC)
    assert parse_moment("2026-01-01T00:00Z", NOW, ago=True) == datetime(2026, 1, 1, tzinfo=UTC)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_duration_and_moment_parsers_only_ever_raise_invalid_input(text: str) -> None:
    for call in (
        lambda: parse_duration(text),
        lambda: parse_duration(text, bare_seconds=False),
        lambda: parse_moment(text, NOW, ago=True),
        lambda: parse_moment(text, NOW, ago=False),
    ):
        try:
            call()
        except InvalidInput:
            pass


# --- memory sizes -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "mb"),
    [("500M", 500), ("2G", 2048), ("1.5G", 1536), ("2048k", 2), ("300", 300), ("1GiB", 1024)],
)
def test_parse_mem_mb_accepts_units(text: str, mb: int) -> None:
    assert parse_mem_mb(text) == mb


@pytest.mark.parametrize("text", ["", "0", "0M", "2X", "١G", "-1G", "99999999999T", "1e9"])
def test_parse_mem_mb_refuses(text: str) -> None:
    with pytest.raises(InvalidInput):
        parse_mem_mb(text)
