"""API submits record who submitted; the Python client's RunResult says why a job failed."""

from __future__ import annotations

from tests.inprocess.web.test_agent_api import submit
from tests.web.conftest import Web


def test_agent_token_name_is_the_submitter(web: Web) -> None:
    web.vq.start_daemon()
    made = web.vq.json("web", "token", "create", "chem-agent", "--scope", "read,submit")
    agent = {"Authorization": f"Bearer {made['token']}"}
    answer = submit(web, {"command": ["true"], "idempotency_key": "who-1"}, agent)
    assert answer.status_code == 201, answer.text
    job = answer.json()
    assert job["submitter"] == "chem-agent"
    assert web.vq.status(job["id"])["submitter"] == "chem-agent"
    assert "chem-agent" in web.http.get(f"/jobs/{job['id']}").text
    admin = submit(web, {"command": ["true"], "idempotency_key": "who-2"}, web.admin())
    assert admin.json()["submitter"] == "admin-token"
    cli = web.vq.submit("--", "true")
    assert web.vq.status(cli)["submitter"] is None  # the CLI's own jobs: single user
