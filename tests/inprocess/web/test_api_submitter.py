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


def test_a_delegated_submit_carries_its_submitter(web: Web) -> None:
    """A submit the API delegates runs ``vq submit --submitter NAME`` on the other host
    (tests/system/test_remote_hosts.py does it over SSH), which records NAME."""
    from vq.remote.submit import options_from_fields

    options = options_from_fields({"job_name": "x", "submitter": "chem-agent"})
    assert options[options.index("--submitter") + 1] == "chem-agent"
    assert "--scheduler-target" in options_from_fields({"scheduler_target": "cluster"})
    job = web.vq.submit("--submitter", "chem-agent", "--", "true")
    assert web.vq.status(job)["submitter"] == "chem-agent"
