"""The HTTP submission API (§10) against a real daemon and the app in-process."""

from __future__ import annotations

import base64
import io
import json
import os
import tarfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Vq, wait_until
from tests.web.conftest import Web

SCRIPT = b"cat data/in.txt > out.txt; printf 'made by the job\\n' >> out.txt; echo done\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def inline_body(key: str, **extra: Any) -> dict[str, Any]:
    return {
        "command": ["bash", "run.sh"],
        "idempotency_key": key,
        "inputs": {"files": {"run.sh": b64(SCRIPT), "data/in.txt": b64(b"x" * 10)}},
        **extra,
    }


def submit(web: Web, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    return web.http.post("/api/v1/jobs", json=body, headers=headers)


def queue_ids(vq: Vq) -> list[str]:
    return sorted(p.stem for p in (vq.root / "queue").glob("*.json"))


def uploads_left(vq: Vq) -> list[str]:
    directory = vq.root / "uploads"
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def wait_terminal(web: Web, job_id: str, headers: dict[str, str]) -> dict[str, Any]:
    state = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        params: dict[str, Any] = {"timeout": 30}
        if state:
            params["since_state"] = state
        answer = web.http.get(f"/api/v1/jobs/{job_id}/wait", params=params, headers=headers)
        assert answer.status_code == 200, answer.text
        data: dict[str, Any] = answer.json()
        assert set(data) == {"id", "state", "changed", "timed_out", "job"}
        state = data["state"]
        if state in TERMINAL:
            return data
    raise AssertionError("job did not finish")


TERMINAL = {"COMPLETED", "FAILED", "KILLED", "OOM_KILLED", "STARVED", "TIME_EXCEEDED"}


def outputs(web: Web, job_id: str, headers: dict[str, str]) -> tarfile.TarFile:
    answer = web.http.get(f"/api/v1/jobs/{job_id}/outputs.tar.gz", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/gzip"
    return tarfile.open(fileobj=io.BytesIO(answer.content), mode="r:gz")


def member(tar: tarfile.TarFile, job_id: str, rel: str) -> bytes:
    handle = tar.extractfile(f"{job_id}/{rel}")
    assert handle is not None
    return handle.read()


def tar_gz(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def file_info(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def link_info(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info


def write_config(web: Web, text: str) -> None:
    web.config_dir.mkdir(parents=True, exist_ok=True)
    (web.config_dir / "config.toml").write_text(text)


@pytest.fixture
def admin(web: Web) -> dict[str, str]:
    web.vq.start_daemon()
    return web.admin()


def test_inline_submit_wait_and_download(web: Web, admin: dict[str, str]) -> None:
    answer = submit(web, inline_body("inline-1", job_name="inline", tags=["agent"]), admin)
    assert answer.status_code == 201, answer.text
    job = answer.json()
    assert job["state"] == "PENDING" and job["job_name"] == "inline"
    assert job["workspace_source"] == "api: inline files"  # never the private staging path
    final = wait_terminal(web, job["id"], admin)
    assert final["state"] == "COMPLETED", final
    tar = outputs(web, job["id"], admin)
    top = f"inline-{job['id']}"
    assert member(tar, top, "out.txt") == b"x" * 10 + b"made by the job\n"
    assert member(tar, top, "data/in.txt") == b"x" * 10
    manifest = json.loads(member(tar, top, "_vq/fetch-manifest.json"))
    assert manifest["job_id"] == job["id"] and manifest["transport"] == "http"
    assert str(web.vq.root) not in json.dumps(manifest)
    diagnosis = json.loads(member(tar, top, "_vq/terminal-diagnosis.json"))
    assert diagnosis["job_id"] == job["id"]
    assert not [p for p in uploads_left(web.vq) if p.startswith(".inline-")]


def test_upload_then_submit_and_single_use(web: Web, admin: dict[str, str]) -> None:
    archive = tar_gz((file_info("sub/u.txt"), b"uploaded bytes\n"))
    answer = web.http.post(
        "/api/v1/uploads",
        content=archive,
        headers={**admin, "Content-Type": "application/gzip"},
    )
    assert answer.status_code == 201, answer.text
    upload = answer.json()
    assert upload["size_bytes"] == len(archive) and upload["expires_at"]
    body = {
        "command": ["cp", "sub/u.txt", "copy.txt"],
        "idempotency_key": "upload-1",
        "inputs": {"upload_token": upload["upload_token"]},
    }
    first = submit(web, body, admin)
    assert first.status_code == 201, first.text
    shown = web.http.get(f"/api/v1/jobs/{first.json()['id']}", headers=admin).text
    assert upload["upload_token"] not in shown and "/uploads/" not in shown
    assert first.json()["workspace_source"] == "api: upload"
    again = submit(web, body, admin)  # a retry of the same submit
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    other = submit(web, {**body, "idempotency_key": "upload-2"}, admin)
    assert other.status_code == 409 and other.json()["error"]["code"] == "upload-token-used"
    job_id = first.json()["id"]
    assert wait_terminal(web, job_id, admin)["state"] == "COMPLETED"
    tar = outputs(web, job_id, admin)
    assert member(tar, job_id, "copy.txt") == b"uploaded bytes\n"
    unknown = submit(web, {**body, "inputs": {"upload_token": "A" * 32}}, admin)
    assert unknown.status_code == 404


@pytest.mark.parametrize(
    "members",
    [
        [(file_info("../escape.txt"), b"x")],
        [(file_info("/abs.txt"), b"x")],
        [(file_info("ok.txt"), b"x"), (link_info("out", "../../etc/passwd"), None)],
    ],
    ids=["traversal", "absolute", "symlink-out"],
)
def test_hostile_uploads_are_refused_and_nothing_kept(
    web: Web, admin: dict[str, str], members: list[tuple[tarfile.TarInfo, bytes | None]]
) -> None:
    before = queue_ids(web.vq)
    answer = web.http.post(
        "/api/v1/uploads",
        content=tar_gz(*members),
        headers={**admin, "Content-Type": "application/gzip"},
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "unsafe-archive"
    assert members[-1][0].name in answer.json()["error"]["message"]
    assert uploads_left(web.vq) == []
    assert queue_ids(web.vq) == before


def test_caps_refuse_large_uploads_and_inline_files(web: Web, admin: dict[str, str]) -> None:
    write_config(web, "[web]\nupload_max_bytes = 2000\ninline_max_bytes = 100\n")
    big = tar_gz((file_info("noise.bin"), os.urandom(8000)))
    assert len(big) > 2000
    answer = web.http.post(
        "/api/v1/uploads", content=big, headers={**admin, "Content-Type": "application/gzip"}
    )
    assert answer.status_code == 413 and "2000" in answer.json()["error"]["message"]

    def chunks() -> Any:  # no Content-Length: the cap applies while streaming
        yield big[:1000]
        yield big[1000:]

    streamed = web.http.post(
        "/api/v1/uploads", content=chunks(), headers={**admin, "Content-Type": "application/gzip"}
    )
    assert streamed.status_code == 413
    assert uploads_left(web.vq) == []
    body = {
        "command": ["true"],
        "idempotency_key": "too-big",
        "inputs": {"files": {"a.bin": b64(b"a" * 101)}},
    }
    inline = submit(web, body, admin)
    assert inline.status_code == 413, inline.text
    assert inline.json()["error"]["code"] == "too-large" and "100" in inline.text
    assert queue_ids(web.vq) == []


def test_refusals_name_the_field(web: Web, admin: dict[str, str]) -> None:
    extra = submit(web, {"command": ["true"], "idempotency_key": "k", "cwd": "/tmp"}, admin)
    assert extra.status_code == 422 and extra.json()["error"]["details"][0]["loc"] == "body.cwd"
    no_key = submit(web, {"command": ["true"]}, admin)
    assert no_key.status_code == 422 and "idempotency_key" in no_key.text
    bad = submit(
        web,
        {"command": ["true"], "idempotency_key": "k", "inputs": {"files": {"a": "!!"}}},
        admin,
    )
    assert bad.status_code == 422
    assert bad.json()["error"]["details"][0]["loc"] == "body.inputs.files.a"
    cpus = submit(web, {"command": ["true"], "idempotency_key": "k", "cpus": 0}, admin)
    assert cpus.status_code == 422 and cpus.json()["error"]["details"][0]["loc"] == "body.cpus"
    for name in ("../up.txt", "/abs.txt", "_vq/x", "a\x00b"):
        unsafe = submit(
            web,
            {"command": ["true"], "idempotency_key": "k", "inputs": {"files": {name: "eA=="}}},
            admin,
        )
        assert unsafe.status_code == 400, (name, unsafe.text)
    assert queue_ids(web.vq) == []
    assert not [p for p in uploads_left(web.vq) if p.startswith(".inline-")]


def test_cli_parity_and_cross_channel_idempotency(
    web: Web, admin: dict[str, str], tmp_path: Path
) -> None:
    source = tmp_path / "src"
    (source / "data").mkdir(parents=True)
    (source / "run.sh").write_bytes(SCRIPT)
    (source / "data" / "in.txt").write_bytes(b"x" * 10)
    cli = json.loads(
        web.vq.run(
            "submit",
            "--json",
            str(source),
            "--idempotency-key",
            "both-ways",
            "--",
            "bash",
            "run.sh",
        ).stdout
    )
    http = submit(web, inline_body("both-ways"), admin)
    assert http.status_code == 200, http.text  # the same key and intent: the CLI's job
    assert http.json()["id"] == cli["id"]
    fresh = submit(web, inline_body("http-only"), admin)
    assert fresh.status_code == 201
    assert set(fresh.json()) == set(cli)
    assert set(http.json()) == set(cli) | {"idempotent_replay"}


def test_wait_returns_soon_after_the_transition_and_at_the_timeout(
    web: Web, admin: dict[str, str]
) -> None:
    body = {"command": ["sleep", "1.5"], "idempotency_key": "sleeper"}
    job_id = submit(web, body, admin).json()["id"]
    web.vq.wait_state(job_id, "RUNNING")
    answer = web.http.get(
        f"/api/v1/jobs/{job_id}/wait",
        params={"timeout": 30, "since_state": "RUNNING"},
        headers=admin,
    )
    returned = time.time()
    data = answer.json()
    assert data["changed"] and not data["timed_out"] and data["state"] == "COMPLETED"
    finished = datetime.fromisoformat(web.vq.spec(job_id)["finished_at"]).timestamp()
    assert returned - finished < 2.0
    long_job = submit(web, {"command": ["sleep", "30"], "idempotency_key": "long"}, admin)
    long_id = long_job.json()["id"]
    web.vq.wait_state(long_id, "RUNNING")
    started = time.monotonic()
    timed = web.http.get(
        f"/api/v1/jobs/{long_id}/wait",
        params={"timeout": 1, "since_state": "RUNNING"},
        headers=admin,
    ).json()
    assert timed["timed_out"] and not timed["changed"] and timed["state"] == "RUNNING"
    assert 0.9 <= time.monotonic() - started < 5
    assert web.http.post(f"/api/v1/jobs/{long_id}/kill", headers=admin).status_code == 200
    not_done = web.http.get(f"/api/v1/jobs/{job_id}x/outputs.tar.gz", headers=admin)
    assert not_done.status_code == 404


def test_wait_and_outputs_without_a_daemon(web: Web) -> None:
    admin = web.admin()
    job_id = submit(web, {"command": ["true"], "idempotency_key": "offline"}, admin).json()["id"]
    early = web.http.get(f"/api/v1/jobs/{job_id}/outputs.tar.gz", headers=admin)
    assert early.status_code == 409 and "wait" in early.json()["error"]["hint"]
    started = time.monotonic()
    timed = web.http.get(f"/api/v1/jobs/{job_id}/wait", params={"timeout": 1}, headers=admin)
    assert timed.json()["timed_out"] and timed.json()["state"] == "PENDING"
    assert time.monotonic() - started >= 0.9
    web.vq.start_daemon()
    final = wait_terminal(web, job_id, admin)
    assert final["state"] == "COMPLETED"


def test_scopes_profiles_and_quota(web: Web, tmp_path: Path) -> None:
    write_config(web, "[profile.small]\ncpus = 1\n\n[profile.big]\ncpus = 2\n")
    web.vq.start_daemon()  # after the config: the daemon reads profiles when it starts

    def token(name: str, *args: str) -> dict[str, str]:
        made = web.vq.json("web", "token", "create", name, *args)
        return {"Authorization": f"Bearer {made['token']}"}

    reader = token("reader", "--scope", "read")
    refused = submit(web, {"command": ["true"], "idempotency_key": "r1"}, reader)
    assert refused.status_code == 403
    limited = token(
        "agent", "--scope", "read,submit", "--profiles", "small", "--max-jobs-per-day", "2"
    )
    outside = submit(web, {"command": ["true"], "idempotency_key": "p0", "profile": "big"}, limited)
    assert outside.status_code == 403 and "small" in outside.json()["error"]["message"]
    no_profile = submit(web, {"command": ["true"], "idempotency_key": "p0"}, limited)
    assert no_profile.status_code == 403
    unsafe = {"command": ["true"], "idempotency_key": "bad", "profile": "small"}
    unsafe["inputs"] = {"files": {"../escape": b64(b"x")}}
    for _ in range(3):  # refused submits create no job and cost no quota
        assert submit(web, unsafe, limited).status_code == 400
    dangling = {"command": ["true"], "idempotency_key": "dep", "profile": "small"}
    assert submit(web, {**dangling, "depends_on": ["0123456789ab"]}, limited).status_code == 404
    for key in ("q1", "q2"):
        ok = submit(web, {"command": ["true"], "idempotency_key": key, "profile": "small"}, limited)
        assert ok.status_code == 201, ok.text
    repeat = submit(
        web, {"command": ["true"], "idempotency_key": "q1", "profile": "small"}, limited
    )
    assert repeat.status_code == 200  # a repeat is not charged
    over = submit(web, {"command": ["true"], "idempotency_key": "q3", "profile": "small"}, limited)
    assert over.status_code == 429, over.text
    assert int(over.headers["retry-after"]) > 0
    assert len(queue_ids(web.vq)) == 2
    wait_until(lambda: all(web.vq.state(j) == "COMPLETED" for j in queue_ids(web.vq)))
