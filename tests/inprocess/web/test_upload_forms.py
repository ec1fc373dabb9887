"""``POST /api/v1/uploads`` as a multipart form (``curl -F file=@inputs.tar.gz``)."""

from __future__ import annotations

import os

import pytest

from tests.inprocess.web.test_agent_api import (
    file_info,
    link_info,
    member,
    outputs,
    submit,
    tar_gz,
    uploads_left,
    wait_terminal,
    write_config,
)
from tests.web.conftest import Web


@pytest.fixture
def admin(web: Web) -> dict[str, str]:
    web.vq.start_daemon()
    return web.admin()


def test_a_form_upload_is_stored_like_a_raw_one(web: Web, admin: dict[str, str]) -> None:
    archive = tar_gz((file_info("in.txt"), b"sent as a form\n"))
    answer = web.http.post(
        "/api/v1/uploads",
        files={"file": ("inputs.tar.gz", archive, "application/gzip")},
        data={"note": "ignored"},
        headers=admin,
    )
    assert answer.status_code == 201, answer.text
    assert answer.json()["size_bytes"] == len(archive)  # the file, not the form envelope
    body = {
        "command": ["cp", "in.txt", "out.txt"],
        "idempotency_key": "form-1",
        "inputs": {"upload_token": answer.json()["upload_token"]},
    }
    job = submit(web, body, admin)
    assert job.status_code == 201, job.text
    assert wait_terminal(web, job.json()["id"], admin)["state"] == "COMPLETED"
    assert member(outputs(web, job.json()["id"], admin), job.json()["id"], "out.txt") == (
        b"sent as a form\n"
    )


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"only": (None, "a plain field, no file")}, "no file part"),
        (
            [
                ("a", ("a.tar.gz", b"x", "application/gzip")),
                ("b", ("b.tar.gz", b"y", "application/gzip")),
            ],
            "more than one file",
        ),
    ],
    ids=["no-file", "two-files"],
)
def test_forms_without_exactly_one_file_are_refused(
    web: Web, admin: dict[str, str], files: object, message: str
) -> None:
    answer = web.http.post("/api/v1/uploads", files=files, headers=admin)
    assert answer.status_code == 400, answer.text
    assert message in answer.json()["error"]["message"]
    assert uploads_left(web.vq) == []


def test_form_uploads_keep_the_caps_and_the_archive_rules(web: Web, admin: dict[str, str]) -> None:
    hostile = tar_gz((file_info("ok.txt"), b"x"), (link_info("out", "../../etc/passwd"), None))
    refused = web.http.post(
        "/api/v1/uploads", files={"file": ("h.tar.gz", hostile, "application/gzip")}, headers=admin
    )
    assert refused.status_code == 400, refused.text
    write_config(web, "[web]\nupload_max_bytes = 1000\n")
    big = tar_gz((file_info("noise.bin"), os.urandom(4000)))
    over = web.http.post(
        "/api/v1/uploads", files={"file": ("big.tar.gz", big, "application/gzip")}, headers=admin
    )
    assert over.status_code == 413, over.text
    assert "upload_max_bytes" in over.json()["error"]["message"]
    assert uploads_left(web.vq) == []
