"""/api/v1 mutations against a real daemon: kill, pause/resume, resubmit, drain, cleanup."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.conftest import Vq, wait_until
from tests.web.conftest import Web


def test_kill_a_running_job_and_conflicts(vq: Vq, web: Web) -> None:
    vq.start_daemon()
    job = vq.submit("--", "sleep", "60")
    vq.wait_state(job, "RUNNING")
    assert web.http.post(f"/api/v1/jobs/{job}/kill").status_code == 401  # no token
    bad = web.http.post(f"/api/v1/jobs/{job}/kill", headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401 and vq.state(job) == "RUNNING"

    admin = web.admin()
    killed = web.http.post(f"/api/v1/jobs/{job}/kill", headers=admin)
    assert killed.status_code == 200, killed.text
    body = killed.json()
    assert body["previous_state"] == "RUNNING" and body["state"] == "KILLED"
    assert body["resubmitted"] is None and body["signaled"] is True
    assert vq.state(job) == "KILLED"  # on disk
    again = web.http.post(f"/api/v1/jobs/{job}/kill", headers=admin).json()
    assert again["already_killed"] is True

    done = vq.submit("--", "true")
    vq.wait_state(done, "COMPLETED")
    conflict = web.http.post(f"/api/v1/jobs/{done}/kill", headers=admin)
    assert conflict.status_code == 409 and conflict.json()["error"]["code"] == "conflict"
    assert vq.state(done) == "COMPLETED"
    paused = web.http.post(f"/api/v1/jobs/{done}/pause", headers=admin)
    assert paused.status_code == 409
    resubmit_running = vq.submit("--", "sleep", "60")
    vq.wait_state(resubmit_running, "RUNNING")
    refused = web.http.post(f"/api/v1/jobs/{resubmit_running}/resubmit", headers=admin, json={})
    assert refused.status_code == 409, refused.text


def test_kill_with_resubmit_starts_a_copy(vq: Vq, web: Web) -> None:
    vq.start_daemon()
    job = vq.submit("--job-name", "again", "--", "sleep", "60")
    vq.wait_state(job, "RUNNING")
    result = web.http.post(
        f"/api/v1/jobs/{job}/kill", headers=web.admin(), json={"resubmit": True}
    ).json()
    new = result["resubmitted"]
    assert result["state"] == "KILLED" and isinstance(new, str) and new != job
    assert vq.state(job) == "KILLED"
    assert vq.spec(new)["job_name"] == "again"
    assert vq.wait_state(new, "RUNNING") == "RUNNING"


def test_pause_and_resume(vq: Vq, web: Web) -> None:
    vq.start_daemon()
    job = vq.submit("--", "sleep", "60")
    vq.wait_state(job, "RUNNING")
    admin = web.admin()
    assert web.http.post(f"/api/v1/jobs/{job}/pause").status_code == 401
    paused = web.http.post(f"/api/v1/jobs/{job}/pause", headers=admin).json()
    assert paused == {"id": job, "state": "SUSPENDED", "changed": True}
    assert vq.state(job) == "SUSPENDED"
    detail = web.http.get(f"/api/v1/jobs/{job}").json()
    assert detail["state"] == "SUSPENDED" and detail["paused_by"] == "operator"
    resumed = web.http.post(f"/api/v1/jobs/{job}/resume", headers=admin).json()
    assert resumed == {"id": job, "state": "RUNNING", "changed": True}
    assert vq.state(job) == "RUNNING"


def test_resubmit_with_overrides_and_validation(vq: Vq, web: Web) -> None:
    vq.start_daemon()
    job = vq.submit("--job-name", "first", "--", "sh", "-c", "echo done")
    vq.wait_state(job, "COMPLETED")
    admin = web.admin()
    bad = web.http.post(f"/api/v1/jobs/{job}/resubmit", headers=admin, json={"cpus": 0, "bogus": 1})
    assert bad.status_code == 422
    locs = {item["loc"] for item in bad.json()["error"]["details"]}
    assert {"body.cpus", "body.bogus"} <= locs
    not_json = web.http.post(
        f"/api/v1/jobs/{job}/resubmit",
        headers={**admin, "Content-Type": "application/json"},
        content=b"{not json",
    )
    assert not_json.status_code == 422
    response = web.http.post(
        f"/api/v1/jobs/{job}/resubmit", headers=admin, json={"job_name": "second", "cpus": 2}
    )
    assert response.status_code == 200, response.text
    spec = response.json()
    assert spec["id"] != job and spec["job_name"] == "second" and spec["cpus"] == 2
    assert vq.wait_state(spec["id"], "COMPLETED") == "COMPLETED"
    assert web.http.get(f"/api/v1/jobs/{spec['id']}/logs").text == "done\n"


def test_drain_and_undrain_show_in_the_queue(vq: Vq, web: Web) -> None:
    vq.start_daemon()
    admin = web.admin()
    assert web.http.post("/api/v1/queue/drain", json={}).status_code == 401
    drained = web.http.post(
        "/api/v1/queue/drain", headers=admin, json={"reject_submits": True, "reason": "upgrade"}
    )
    assert drained.status_code == 200 and drained.json()["mode"] == "new"
    drain = web.http.get("/api/v1/queue").json()["drain"]
    assert drain["mode"] == "new" and drain["reject_submits"] is True
    assert drain["reason"] == "upgrade"
    refused = vq.run("submit", "--", "true", check=False)
    assert refused.returncode != 0 and "draining" in refused.stderr
    bad = web.http.post("/api/v1/queue/drain", headers=admin, json={"full": "very"})
    assert bad.status_code == 422 and bad.json()["error"]["details"][0]["loc"] == "body.full"
    assert web.http.post("/api/v1/queue/undrain", headers=admin).json()["mode"] == "none"
    assert web.http.get("/api/v1/queue").json()["drain"]["mode"] == "none"
    job = vq.submit("--", "true")
    assert vq.wait_state(job, "COMPLETED") == "COMPLETED"
    full = web.http.post("/api/v1/queue/drain", headers=admin, json={"full": True}).json()
    assert full["mode"] == "full"
    assert web.http.get("/api/v1/queue").json()["drain"]["mode"] == "full"
    web.http.post("/api/v1/queue/undrain", headers=admin)


def test_cleanup_of_failed_rows_is_a_dry_run_first(vq: Vq, web: Web) -> None:
    vq.start_daemon()
    failed = vq.submit("--", "sh", "-c", "exit 3")
    good = vq.submit("--", "true")
    vq.wait_state(failed, "FAILED")
    vq.wait_state(good, "COMPLETED")
    admin = web.admin()
    workspace = vq.root / "jobs" / failed

    def dry_run() -> httpx.Response | None:
        # older_than is whole seconds: poll until the failed job has aged past 1 s
        response = web.http.post("/api/v1/jobs/cleanup", headers=admin, json={"older_than": "1s"})
        assert response.status_code == 200, response.text
        return response if response.json()["jobs"] else None

    dry = wait_until(dry_run, timeout=10, interval=0.2)
    report = dry.json()
    assert report["dry_run"] is True and [item["id"] for item in report["jobs"]] == [failed]
    assert workspace.is_dir()  # nothing changed
    assert str(vq.root) not in dry.text
    bad = web.http.post("/api/v1/jobs/cleanup", headers=admin, json={"states": ["RUNNING"]})
    assert bad.status_code == 422
    assert web.http.post("/api/v1/jobs/cleanup", json={}).status_code == 401

    done = web.http.post(
        "/api/v1/jobs/cleanup", headers=admin, json={"older_than": "1s", "dry_run": False}
    ).json()
    assert done["dry_run"] is False and done["jobs"][0]["done"] is True
    assert done["jobs"][0]["archive_path"].startswith("<archive-dir>/")
    wait_until(lambda: not workspace.exists())
    assert vq.spec(failed)["archive_path"]
    assert Path(vq.root / "jobs" / good).is_dir()
    gone = web.http.get(f"/api/v1/jobs/{failed}/logs/download")
    assert gone.status_code == 404 and str(vq.root) not in gone.text
