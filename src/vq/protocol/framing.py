"""Line-delimited JSON RPC framing (§2.1).

One request per line: ``{"id": int, "method": str, "params": {...}}``; one response per
line: ``{"id": int, "result": ...}`` or ``{"id": int, "error": {code, reference,
message, hint, type}}``. A message larger than :data:`MAX_MESSAGE_BYTES` is refused.

Stdlib-only so the CLI's submit path stays fast.
"""

from __future__ import annotations

import json

from vq.errors import ProtocolError, error_from_payload

# typing is imported for the type checker only: this module is on the Click-free
# `vq submit` fast path, where importing typing costs milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from vq.errors import ErrorPayload


__all__ = [
    "MAX_MESSAGE_BYTES",
    "decode_message",
    "encode_message",
    "error_response",
    "result_of",
]

#: Large enough for a 10,000-element array submit; small enough to bound a bad peer.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def encode_message(message: dict[str, Any]) -> bytes:
    """One framed message: compact JSON plus a newline."""
    data = json.dumps(message, separators=(",", ":")).encode()
    if len(data) >= MAX_MESSAGE_BYTES:
        raise ProtocolError(
            f"message of {len(data)} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit"
        )
    return data + b"\n"


def decode_message(line: bytes) -> dict[str, Any]:
    """Parse one framed line into a JSON object, or raise :class:`ProtocolError`."""
    if len(line) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message exceeds the {MAX_MESSAGE_BYTES}-byte limit")
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ProtocolError(f"malformed message: {exc}") from exc
    if not isinstance(message, dict):
        raise ProtocolError("a message must be a JSON object")
    return message


def error_response(request_id: Any, payload: ErrorPayload) -> dict[str, Any]:
    """The response carrying an error payload (see ``VqError.to_payload``)."""
    return {"id": request_id, "error": payload}


def result_of(line: bytes, method: str) -> Any:
    """The ``result`` of one response line to ``method`` (sync and async clients alike).

    An empty line (the daemon closed the connection), malformed JSON or a non-object
    raises :class:`ProtocolError`; an error answer raises the typed error it carries.
    """
    if not line:
        raise ProtocolError(
            f"the daemon closed the connection during {method!r}",
            hint="see daemon.log in the state root",
        )
    try:
        response = json.loads(line)
    except ValueError as exc:
        raise ProtocolError(f"malformed response to {method!r}: {exc}") from exc
    if not isinstance(response, dict):
        raise ProtocolError(f"malformed response to {method!r}")
    if "error" in response:
        raise error_from_payload(response["error"] or {})
    return response.get("result")
