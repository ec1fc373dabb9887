"""Pure-ish parts of the submission API: inline decoding, upload tokens, safe extraction."""

from __future__ import annotations

import base64
import io
import os
import tarfile
import time
from pathlib import Path

import pytest

from vq.api_client import extract_outputs
from vq.api_client._common import submit_body
from vq.errors import UnsafeArchive
from vq.web.api.submit import body_cap
from vq.web.errors import ApiError
from vq.web.uploads_store import UnpackLimits, UploadStore, decode_inline

LIMITS = UnpackLimits(max_bytes=1 << 30, max_members=10_000)


def tar_gz(path: Path, *entries: tuple[str, bytes | None, str | None]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data, link in entries:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            else:
                info.size = len(data or b"")
                tar.addfile(info, io.BytesIO(data or b""))
    return path


def test_decode_inline_checks_base64_and_the_cap() -> None:
    files = {"a": base64.b64encode(b"12345").decode(), "b": "not base64!"}
    decoded, bad = decode_inline(files, 100)
    assert decoded == {"a": b"12345"} and bad == ["b"]
    with pytest.raises(ApiError) as refused:
        decode_inline({"a": base64.b64encode(b"x" * 11).decode()}, 10)
    assert refused.value.status == 413 and "10-byte" in refused.value.message
    assert body_cap(3) >= 4 + 64 * 1024


def test_upload_tokens_are_single_use_per_key_and_expire(tmp_path: Path) -> None:
    store = UploadStore(tmp_path, ttl_seconds=60)
    part, out = store.open_incoming()
    with out:
        out.write(tar_gz(tmp_path / "x.tar.gz", ("f.txt", b"hi", None)).read_bytes())
    stored = store.publish(part, LIMITS)
    claimed = store.claim(stored.token, "a" * 64)
    assert claimed.exists() and store.claim(stored.token, "a" * 64) == claimed
    with pytest.raises(ApiError) as other:
        store.claim(stored.token, "b" * 64)
    assert other.value.status == 409
    with pytest.raises(ApiError) as malformed:
        store.claim("../../etc/passwd", "a" * 64)
    assert malformed.value.status == 404
    old = time.time() - 120
    os.utime(claimed, (old, old))
    with pytest.raises(ApiError) as expired:
        store.claim(stored.token, "a" * 64)
    assert expired.value.status == 410
    assert store.sweep() == 1 and not claimed.exists()


def test_publish_refuses_hostile_archives_and_keeps_nothing(tmp_path: Path) -> None:
    store = UploadStore(tmp_path / "root", ttl_seconds=60)
    for entries in (
        [("../x", b"1", None)],
        [("ok", b"1", None), ("l", None, "/etc/passwd")],
        [("_vq/exit-code", b"0", None)],
    ):
        part, out = store.open_incoming()
        with out:
            out.write(tar_gz(tmp_path / "h.tar.gz", *entries).read_bytes())
        with pytest.raises(ApiError) as refused:
            store.publish(part, LIMITS)
        assert refused.value.status == 400 and entries[-1][0] in refused.value.message
        assert list(store.dir.iterdir()) == []
    part, out = store.open_incoming()
    with out:
        out.write(b"definitely not a tar")
    with pytest.raises(ApiError):
        store.publish(part, LIMITS)
    assert list(store.dir.iterdir()) == []


def test_extract_outputs_strips_the_top_and_refuses_escapes(tmp_path: Path) -> None:
    good = tar_gz(
        tmp_path / "g.tar.gz",
        ("job/_vq/exit-code", b"0\n", None),
        ("job/out.txt", b"data", None),
        ("job/link", None, "out.txt"),
    )
    dest = extract_outputs(good, tmp_path / "dest")
    assert (dest / "out.txt").read_bytes() == b"data"
    assert (dest / "_vq" / "exit-code").read_text() == "0\n"
    assert os.readlink(dest / "link") == "out.txt"
    bad = tar_gz(tmp_path / "b.tar.gz", ("job/ok", b"", None), ("job/l", None, "../../x"))
    with pytest.raises(UnsafeArchive):
        extract_outputs(bad, tmp_path / "dest2")
    assert not (tmp_path / "dest2").exists()


def test_submit_body_draws_one_key_and_encodes_files(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"\x00")
    body = submit_body(["true"], None, {"p": path, "s": "é", "b": b"b"}, None, {"cpus": 2})
    assert len(body["idempotency_key"]) == 36 and body["cpus"] == 2
    files = {k: base64.b64decode(v) for k, v in body["inputs"]["files"].items()}
    assert files == {"p": b"\x00", "s": "é".encode(), "b": b"b"}
    assert submit_body(["x"], "k", None, "tok", {})["inputs"] == {"upload_token": "tok"}
