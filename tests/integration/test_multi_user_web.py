"""Root's web console in multi-user mode (issue 28, finding 6): a real ``vq web serve`` as
root with the multi-user environment, beside a real root daemon and real users.

The console resolves its state root as root's CLI does: it serves the whole system root
(every owner's jobs), and a local ``POST /api/v1/jobs`` is refused exactly as root's
``vq submit`` is (multi-user mode runs no job as root): a JSON error with a code, and
nothing written anywhere, least of all into root's own ``~/.local/share/vq``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import VQ_BIN, wait_until
from tests.multi_user_support import System, make_system, needs_multi_user
from tests.web.conftest import free_port

pytestmark = needs_multi_user


@pytest.fixture
def system() -> Iterator[System]:
    yield from make_system()


@pytest.fixture
def console(system: System) -> Iterator[httpx.Client]:
    """``vq web serve`` as root, with a HOME of its own (where a stray queue would land)."""
    home = system.base / "root-home"
    home.mkdir()
    env = {**system.env, "HOME": str(home)}
    env.pop("XDG_DATA_HOME", None)
    env.pop("VQ_STATE_DIR", None)
    port = free_port()
    with open(system.base / "web.out", "ab") as out:
        process = subprocess.Popen(
            [VQ_BIN, "web", "serve", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30.0)

    def answering() -> bool:
        if process.poll() is not None:
            raise AssertionError((system.base / "web.out").read_text())
        try:
            return http.get("/health/live").status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(answering, timeout=30)
        yield http
    finally:
        http.close()
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_roots_console_serves_the_system_root_and_refuses_a_local_submit(
    system: System, console: httpx.Client
) -> None:
    mine = system.submit("vqa", "--not-before", "1h", "--", "true")
    theirs = system.submit("vqb", "--not-before", "1h", "--", "true")
    listed = console.get("/api/v1/jobs")
    assert listed.status_code == 200, listed.text
    assert {row["id"] for row in listed.json()["jobs"]} == {mine, theirs}
    detail = console.get(f"/api/v1/jobs/{mine}")
    assert detail.status_code == 200 and detail.json()["state"] == "PENDING", detail.text
    assert console.get(f"/jobs/{mine}").status_code == 200

    token = (system.base / "etc" / "web-token").read_text().strip()
    queues = {user: _files(system.tree(user) / "queue") for user in ("vqa", "vqb")}
    refused = console.post(
        "/api/v1/jobs",
        json={"command": ["touch", "/tmp/vq-root-job"], "idempotency_key": "root-1"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["code"] == "permission-denied"
    assert "runs no job as root" in error["message"] and error["hint"]
    # Nothing was written: not in root's home, not in any owner's queue, no claim.
    assert _files(system.base / "root-home") == []
    assert {user: _files(system.tree(user) / "queue") for user in queues} == queues
    assert not (system.root / "idempotency").exists()
    # The owner's job is still served, and only the two jobs exist.
    again = console.get("/api/v1/jobs").json()["jobs"]
    assert {row["id"] for row in again} == {mine, theirs}
