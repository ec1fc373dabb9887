"""The agent API's optional ``host``: a configured remote daemon host, else refused.

Delegation itself (the same code as ``vq submit HOST``) is exercised against real
remote daemons in tests/system/test_remote_hosts.py.
"""

from __future__ import annotations

from tests.web.conftest import Web


def test_an_unconfigured_host_is_refused_and_nothing_is_written(web: Web) -> None:
    body = {"command": ["true"], "idempotency_key": "host-1", "host": "gpu9"}
    answer = web.http.post("/api/v1/jobs", json=body, headers=web.admin())
    assert answer.status_code == 404, answer.text
    error = answer.json()["error"]
    assert "no host named 'gpu9'" in error["message"] and error["hint"]
    assert not list((web.vq.root / "queue").glob("*.json"))


def test_localhost_is_this_queue(web: Web) -> None:
    body = {"command": ["true"], "idempotency_key": "host-2", "host": "localhost"}
    answer = web.http.post("/api/v1/jobs", json=body, headers=web.admin())
    assert answer.status_code == 201, answer.text
    job_id = answer.json()["id"]
    assert (web.vq.root / "queue" / f"{job_id}.json").exists()
