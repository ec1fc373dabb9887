"""The HTTP submission API (§10) against a real daemon and a real `vq web serve`."""

from __future__ import annotations

import asyncio
import base64
import io
import tarfile
import threading
import time
from typing import Any

import httpx
import pytest

from tests.conftest import Vq
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


def outputs(web: Web, job_id: str, headers: dict[str, str]) -> tarfile.TarFile:
    answer = web.http.get(f"/api/v1/jobs/{job_id}/outputs.tar.gz", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/gzip"
    return tarfile.open(fileobj=io.BytesIO(answer.content), mode="r:gz")


@pytest.fixture
def admin(web: Web) -> dict[str, str]:
    web.vq.start_daemon()
    return web.admin()


def test_same_key_twenty_times_concurrently_makes_one_job(web: Web, admin: dict[str, str]) -> None:
    body = inline_body("concurrent-key")
    statuses: list[int] = []
    ids: list[str] = []
    lock = threading.Lock()

    def one() -> None:
        with httpx.Client(base_url=web.base_url, timeout=60) as client:
            answer = client.post("/api/v1/jobs", json=body, headers=admin)
        with lock:
            statuses.append(answer.status_code)
            ids.append(answer.json().get("id", answer.text))

    threads = [threading.Thread(target=one) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert sorted(statuses) == [200] * 19 + [201], statuses
    assert len(set(ids)) == 1
    assert queue_ids(web.vq) == ids[:1]
    conflict = submit(web, {**body, "cpus": 2}, admin)
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "idempotency-conflict"
    changed_input = inline_body("concurrent-key")
    changed_input["inputs"]["files"]["run.sh"] = b64(b"echo other\n")
    assert submit(web, changed_input, admin).status_code == 409
    assert queue_ids(web.vq) == ids[:1]


def test_a_hundred_concurrent_waiters_hold_no_worker_threads(
    web: Web, admin: dict[str, str]
) -> None:
    job_id = submit(web, {"command": ["sleep", "30"], "idempotency_key": "crowd"}, admin).json()[
        "id"
    ]
    web.vq.wait_state(job_id, "RUNNING")

    async def crowd() -> tuple[list[dict[str, Any]], float]:
        limits = httpx.Limits(max_connections=200)
        async with httpx.AsyncClient(base_url=web.base_url, timeout=60, limits=limits) as client:
            url = f"/api/v1/jobs/{job_id}/wait"
            params = {"timeout": 3, "since_state": "RUNNING"}
            waits = [
                asyncio.ensure_future(client.get(url, params=params, headers=admin))
                for _ in range(100)
            ]
            await asyncio.sleep(1.0)
            started = time.monotonic()
            listing = await client.get("/api/v1/jobs", headers=admin)  # needs a worker thread
            listed_in = time.monotonic() - started
            assert listing.status_code == 200
            return [r.json() for r in await asyncio.gather(*waits)], listed_in

    answers, listed_in = asyncio.run(crowd())
    assert len(answers) == 100 and all(a["timed_out"] for a in answers)
    assert listed_in < 2.0
    assert web.http.post(f"/api/v1/jobs/{job_id}/kill", headers=admin).status_code == 200
