"""A profile-scoped token stays within its profile; uploads count against a byte quota."""

from __future__ import annotations

import io
import tarfile
from typing import Any

from tests.web.agent_helpers import queue_ids, submit, write_config
from tests.web.conftest import Web


def _token(web: Web, name: str, *args: str) -> dict[str, str]:
    made = web.vq.json("web", "token", "create", name, *args)
    return {"Authorization": f"Bearer {made['token']}"}


def test_a_profile_scoped_token_cannot_exceed_its_profile(web: Web) -> None:
    write_config(web, '[profile.small]\ncpus = 1\nmem_mb = 500\nwall_time = "10m"\npriority = 0\n')
    web.vq.start_daemon()
    limited = _token(web, "agent", "--scope", "read,submit", "--profiles", "small")
    base = {"command": ["true"], "profile": "small"}
    for field, value in (
        ("cpus", 2),
        ("mem_mb", 1_000_000_000),
        ("priority", 1000),
        ("wall_time_seconds", 1_000_000_000),
    ):
        answer = submit(web, {**base, "idempotency_key": field, field: value}, limited)
        assert answer.status_code == 403, answer.text
        assert field in answer.json()["error"]["message"]
    assert queue_ids(web.vq) == []
    within = {**base, "idempotency_key": "ok", "mem_mb": 400, "wall_time_seconds": 60}
    ok = submit(web, within, limited)
    assert ok.status_code == 201, ok.text
    assert ok.json()["wall_time_seconds"] == 60
    plain = submit(web, {**base, "idempotency_key": "plain"}, limited).json()
    assert plain["mem_mb"] == 500 and plain["wall_time_seconds"] == 600


def _archive(size: int) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:  # uncompressed: bytes on the wire
        info = tarfile.TarInfo("data.bin")
        info.size = size
        tar.addfile(info, io.BytesIO(b"\1" * size))
    return buffer.getvalue()


def test_uploads_count_against_a_tokens_daily_byte_quota(web: Web) -> None:
    limited = _token(
        web, "uploader", "--scope", "read,submit", "--max-upload-bytes-per-day", "50000"
    )
    headers = {**limited, "Content-Type": "application/x-tar"}
    first = web.http.post("/api/v1/uploads", content=_archive(20_000), headers=headers)
    assert first.status_code == 201, first.text
    second = web.http.post("/api/v1/uploads", content=_archive(20_000), headers=headers)
    assert second.status_code == 429, second.text
    assert int(second.headers["retry-after"]) > 0
    assert "upload" in second.json()["error"]["message"]
    uploads = web.vq.root / "uploads"
    assert len([p for p in uploads.iterdir() if not p.name.startswith(".")]) == 1
    shown = {t["name"]: t for t in web.vq.json("web", "token", "list")}
    assert shown["uploader"]["max_upload_bytes_per_day"] == 50000


def test_inline_files_count_against_the_daily_upload_quota(web: Web) -> None:
    import base64

    web.vq.start_daemon()
    limited = _token(web, "inline", "--scope", "read,submit", "--max-upload-bytes-per-day", "30000")
    payload = base64.b64encode(b"\2" * 20_000).decode()

    def inline(key: str) -> Any:
        body = {"command": ["true"], "idempotency_key": key, "inputs": {"files": {"a": payload}}}
        return submit(web, body, limited)

    first = inline("first")
    assert first.status_code == 201, first.text
    assert inline("first").status_code == 200  # a repeat writes nothing: not charged
    second = inline("second")
    assert second.status_code == 429, second.text
    assert "upload" in second.json()["error"]["message"]
    assert int(second.headers["retry-after"]) > 0
    assert queue_ids(web.vq) == [first.json()["id"]]
    refused = submit(
        web,
        {
            "command": ["true"],
            "idempotency_key": "bad",
            "depends_on": ["0123456789ab"],
            "inputs": {"files": {"b": base64.b64encode(b"x" * 9_000).decode()}},
        },
        limited,
    )
    assert 400 <= refused.status_code < 500 and refused.status_code != 429, refused.text
    small = submit(  # the refused submit's bytes were given back
        web,
        {
            "command": ["true"],
            "idempotency_key": "small",
            "inputs": {"files": {"c": base64.b64encode(b"y" * 9_000).decode()}},
        },
        limited,
    )
    assert small.status_code == 201, small.text
