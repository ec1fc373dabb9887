"""The API client's error decoding copes with any error body; bad arguments fail early."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from vq.api_client import Client
from vq.api_client._common import error_of


@pytest.mark.parametrize(
    "content",
    [
        b"<html>502 Bad Gateway</html>",
        b'{"error": "broken"}',
        b'{"error": ["x"]}',
        b"[1, 2]",
        b'{"error": {"code": 7, "message": null, "hint": 3, "details": "no"}}',
        b"\xff\xfe not utf-8",
        b"",
    ],
)
def test_error_of_never_raises_on_odd_bodies(content: bytes) -> None:
    response = httpx.Response(
        502, content=content, headers={"Content-Type": "application/json", "Retry-After": "x"}
    )
    error = error_of(response)
    assert error.status == 502 and error.code and error.message
    assert error.hint is None or isinstance(error.hint, str)
    assert isinstance(error.details, list) and error.retry_after is None


def test_error_of_keeps_a_well_formed_error() -> None:
    body = {"error": {"code": "rate-limited", "message": "m", "hint": "h", "details": [{}]}}
    response = httpx.Response(429, json=body, headers={"Retry-After": "12"})
    error = error_of(response)
    assert (error.code, error.message, error.hint, error.retry_after) == (
        "rate-limited",
        "m",
        "h",
        12.0,
    )


def test_files_and_upload_together_fail_before_any_request(tmp_path: Path) -> None:
    with Client("http://127.0.0.1:9", retries=0) as client, pytest.raises(ValueError):
        client.submit(["true"], files={"a": b"x"}, upload=tmp_path)
