"""Line-delimited JSON framing (§2.1) and error payload round trips (vq/errors.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vq.domain.states import InvalidTransition
from vq.errors import (
    EXIT_CODES,
    AmbiguousId,
    ConfigError,
    Conflict,
    CorruptSpec,
    DaemonNotRunning,
    InvalidInput,
    NotFound,
    ProtocolError,
    UnsafeArchive,
    UnsupportedSpecVersion,
    UsageError,
    VqError,
    WaitTimeout,
    error_from_payload,
)
from vq.protocol.framing import (
    MAX_MESSAGE_BYTES,
    decode_message,
    encode_message,
    error_response,
)

ALL_ERRORS: list[type[VqError]] = [
    VqError,
    UsageError,
    NotFound,
    InvalidInput,
    UnsafeArchive,
    DaemonNotRunning,
    Conflict,
    CorruptSpec,
    UnsupportedSpecVersion,
    AmbiguousId,
    ConfigError,
    ProtocolError,
    WaitTimeout,
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


# --- framing ----------------------------------------------------------------------------
def test_encode_is_one_compact_line() -> None:
    msg = {"id": 1, "method": "submit", "params": {"command": ["echo", "a b\nc"]}}
    line = encode_message(msg)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1  # embedded newlines are escaped
    assert b": " not in line
    assert b", " not in line
    assert decode_message(line) == msg
    assert decode_message(line.rstrip(b"\n")) == msg


@given(st.dictionaries(st.text(max_size=10), json_values, max_size=6))
def test_round_trip(message: dict[str, Any]) -> None:
    line = encode_message(message)
    assert line.endswith(b"\n")
    assert b"\n" not in line[:-1]
    assert decode_message(line) == message


def test_encode_refuses_oversized_message() -> None:
    big = {"id": 1, "result": "x" * MAX_MESSAGE_BYTES}
    with pytest.raises(ProtocolError) as info:
        encode_message(big)
    assert info.value.exit_code == 10
    assert str(MAX_MESSAGE_BYTES) in info.value.message


def test_encode_accepts_the_largest_allowed_message() -> None:
    overhead = len(json.dumps({"r": ""}, separators=(",", ":")))
    msg = {"r": "x" * (MAX_MESSAGE_BYTES - 1 - overhead)}
    line = encode_message(msg)
    assert len(line) == MAX_MESSAGE_BYTES  # data is MAX-1 bytes, plus the newline
    assert decode_message(line) == msg  # what we send, the peer accepts


def test_decode_refuses_oversized_line_before_parsing() -> None:
    line = b"{" + b" " * MAX_MESSAGE_BYTES + b"}"
    with pytest.raises(ProtocolError, match="exceeds"):
        decode_message(line)


@pytest.mark.parametrize("line", [b"[1, 2]", b"1", b'"text"', b"null", b"true", b"[]"])
def test_decode_refuses_non_object(line: bytes) -> None:
    with pytest.raises(ProtocolError, match="JSON object"):
        decode_message(line)


@pytest.mark.parametrize(
    "line",
    [b"", b"\n", b"{", b'{"id": 1', b"{'id': 1}", b"not json", b"\xff\xfe\x00", b'{"a":1}{"b":2}'],
)
def test_decode_refuses_malformed_json(line: bytes) -> None:
    with pytest.raises(ProtocolError, match="malformed") as info:
        decode_message(line)
    assert info.value.exit_code == 10


@given(st.binary(max_size=64))
def test_decode_only_raises_protocol_error(line: bytes) -> None:
    try:
        result = decode_message(line)
    except ProtocolError:
        return
    assert isinstance(result, dict)


def test_error_response_shape() -> None:
    payload = NotFound("no job", hint="try vq list").to_payload()
    response = error_response(7, payload)
    assert response == {"id": 7, "error": payload}
    assert decode_message(encode_message(response)) == response


# --- error payloads ---------------------------------------------------------------------
@pytest.mark.parametrize("cls", ALL_ERRORS)
def test_payload_round_trip_rebuilds_the_class(cls: type[VqError]) -> None:
    original = cls("something broke", hint="do this", reference="custom-ref")
    payload = original.to_payload()
    assert payload == {
        "code": cls.exit_code,
        "reference": "custom-ref",
        "message": "something broke",
        "hint": "do this",
        "type": cls.__name__,
    }
    # Over the wire and back.
    wire = decode_message(encode_message(error_response(1, payload)))["error"]
    rebuilt = error_from_payload(wire)
    assert type(rebuilt) is cls
    assert rebuilt.exit_code == EXIT_CODES[cls.__name__] == payload["code"]
    assert rebuilt.message == "something broke"
    assert str(rebuilt) == "something broke"
    assert rebuilt.hint == "do this"
    assert rebuilt.reference == "custom-ref"


@pytest.mark.parametrize("cls", ALL_ERRORS)
def test_default_reference_survives_round_trip(cls: type[VqError]) -> None:
    rebuilt = error_from_payload(cls("m").to_payload())
    assert rebuilt.reference == cls.default_reference
    assert rebuilt.hint is None


def test_exit_code_table() -> None:
    assert EXIT_CODES == {
        "VqError": 1,
        "UsageError": 2,
        "NotFound": 3,
        "InvalidInput": 4,
        "UnsafeArchive": 4,
        "DaemonNotRunning": 5,
        "DaemonBusy": 5,
        "Conflict": 6,
        "CorruptSpec": 7,
        "UnsupportedSpecVersion": 7,
        "AmbiguousId": 8,
        "ConfigError": 9,
        "ProtocolError": 10,
        "TransportError": 11,
        "CommandNotStarted": 11,
        "CommandTimeout": 11,
        "OutputTooLarge": 11,
        "CommandFailed": 11,
        "RemoteCommandFailed": 11,
        "SshUnreachable": 11,
        "HostKeyUnknown": 11,
        "HostKeyChanged": 11,
        "AuthFailed": 11,
        "RemoteProtocolError": 11,
        "HostDown": 11,
        "OutcomeUnknown": 12,
        "HostUnavailable": 13,
        "StorageError": 14,
        "PermissionDenied": 15,
        "WaitTimeout": 124,
    }


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "SomethingNewer", "message": "m", "hint": "h", "reference": "r", "code": 42},
        {"message": "m"},
        {"type": None, "message": "m"},
        {"type": "object", "message": "m"},  # not a VqError name
        {"type": "Exception", "message": "m"},
    ],
)
def test_unknown_types_fall_back_to_vq_error(payload: dict[str, Any]) -> None:
    rebuilt = error_from_payload(payload)
    assert type(rebuilt) is VqError
    assert rebuilt.exit_code == 1
    assert rebuilt.message == "m"


def test_empty_payload_gives_generic_error() -> None:
    rebuilt = error_from_payload({})
    assert type(rebuilt) is VqError
    assert rebuilt.message == "unknown error"
    assert rebuilt.reference == "internal-error"
    assert rebuilt.hint is None


def test_invalid_transition_keeps_its_exit_code_over_rpc() -> None:
    payload = InvalidTransition("job is already COMPLETED", hint="resubmit").to_payload()
    assert payload["code"] == 6
    rebuilt = error_from_payload(payload)
    assert isinstance(rebuilt, Conflict)
    assert rebuilt.exit_code == 6


@pytest.mark.parametrize("line", [b"[" * 100_000, b'{"a":' * 100_000])
def test_deeply_nested_line_is_protocol_error(line: bytes) -> None:
    assert len(line) < MAX_MESSAGE_BYTES
    with pytest.raises(ProtocolError):
        decode_message(line)
