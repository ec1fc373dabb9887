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


LANE = """[hosts.cluster]
ssh = "login.example"
scheduler_dialect = "slurm"
scratch_root = "/scratch/me"
"""


def test_a_lane_is_a_host_the_job_runs_through(web: Web) -> None:
    """``"host": LANE`` is ``vq submit LANE``: this queue's job, on that lane."""
    web.config_dir.mkdir(parents=True, exist_ok=True)
    (web.config_dir / "config.toml").write_text(LANE)
    body = {"command": ["true"], "idempotency_key": "lane-1", "host": "cluster"}
    answer = web.http.post("/api/v1/jobs", json=body, headers=web.admin())
    assert answer.status_code == 201, answer.text
    job = answer.json()
    assert job["scheduler_target"] == "cluster"
    assert web.vq.status(job["id"])["scheduler_target"] == "cluster"
    assert web.vq.status(job["id"])["submitter"] == "admin-token"
    again = web.http.post("/api/v1/jobs", json=body, headers=web.admin())
    assert again.status_code == 200 and again.json()["id"] == job["id"]
    cli = web.vq.run("submit", "cluster", "--idempotency-key", "lane-1", "--", "true")
    assert cli.stdout.strip() == job["id"]  # the same intent as `vq submit LANE`


def test_a_submit_without_its_key_is_told_the_key_is_required(web: Web) -> None:
    answer = web.http.post("/api/v1/jobs", json={"command": ["true"]}, headers=web.admin())
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["message"].startswith("body.idempotency_key: is required: ")
    assert "key of your choosing" in error["message"]
    assert "same job" in error["message"]
    assert "Value error" not in answer.text and "Field required" not in answer.text
    assert not list((web.vq.root / "queue").glob("*.json"))
