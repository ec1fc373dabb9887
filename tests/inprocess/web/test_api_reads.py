"""/api/v1 read routes against a real daemon running real jobs, through a real server."""

from __future__ import annotations

from typing import Any

from tests.conftest import Vq, wait_until
from tests.web.conftest import Web
from vq.web.redact import redact_paths

HOSTILE_NAME = '<img src=x onerror=alert(1)>&"name"'
PRINTER = "for i in 1 2 3 4 5; do echo line-$i; done; echo oops-$((1+1)) >&2 # </script>"


def _job(web: Web, job_id: str) -> dict[str, Any]:
    response = web.http.get(f"/api/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_list_detail_and_logs_match_what_the_job_printed(vq: Vq, web: Web) -> None:
    vq.start_daemon()
    job = vq.submit("--job-name", HOSTILE_NAME, "--tag", "t1", "--", "sh", "-c", PRINTER)
    vq.wait_state(job, "COMPLETED")

    # reads need no token while no console account exists
    listing = web.http.get("/api/v1/jobs").json()
    assert listing["total"] == 1 and listing["limit"] == 100 and listing["offset"] == 0
    row = listing["jobs"][0]
    assert row["id"] == job and row["job_name"] == HOSTILE_NAME  # verbatim JSON string
    assert row["command"] == ["sh", "-c", PRINTER]
    assert listing["counts"]["COMPLETED"] == 1 and listing["quarantined"] == []

    detail = _job(web, job)
    assert detail["state"] == "COMPLETED" and detail["exit_code"] == 0
    assert detail["job_name"] == HOSTILE_NAME
    kinds = [event["kind"] for event in detail["events"]]
    assert kinds and len(kinds) <= 20
    assert detail["resource_usage"] is not None  # the collector's terminal receipt
    roots = [(str(vq.root), "<state-root>")]  # the API's bodies carry no server path
    cli = redact_paths(vq.status(job), roots)
    assert detail == {**cli, "events": detail["events"], **_volatile(detail)}

    tail = web.http.get(f"/api/v1/jobs/{job}/logs", params={"tail": 2})
    assert tail.status_code == 200 and tail.headers["content-type"].startswith("text/plain")
    assert tail.text == "line-4\nline-5\n"
    assert web.http.get(f"/api/v1/jobs/{job}/logs", params={"stream": "stderr"}).text == "oops-2\n"
    assert web.http.get(f"/api/v1/jobs/{job}/logs", params={"tail": 0}).text == ""

    download = web.http.get(f"/api/v1/jobs/{job}/logs/download")
    assert download.status_code == 200
    assert download.text == "".join(f"line-{i}\n" for i in range(1, 6))
    assert "attachment" in download.headers["content-disposition"]
    assert f"{job}-stdout.log" in download.headers["content-disposition"]


def _volatile(detail: dict[str, Any]) -> dict[str, Any]:
    """Fields that legitimately differ between two reads (or only the API adds)."""
    return {key: detail[key] for key in ("resource_usage", "active_seconds", "elapsed_seconds")}


def test_filters_sort_and_pagination(vq: Vq, web: Web) -> None:
    ids = [
        vq.submit("--job-name", f"job-{i}", "--tag", f"t{i % 2}", "--", "true") for i in range(3)
    ]
    # no daemon: the listing comes from the disk, in the same shape
    page = web.http.get("/api/v1/jobs", params={"limit": 2}).json()
    assert [r["id"] for r in page["jobs"]] == ids[:2] and page["total"] == 3
    rest = web.http.get("/api/v1/jobs", params={"limit": 2, "offset": 2}).json()
    assert [r["id"] for r in rest["jobs"]] == ids[2:]
    newest = web.http.get("/api/v1/jobs", params={"sort": "-submitted_at"}).json()
    assert [r["id"] for r in newest["jobs"]] == ids[::-1]
    tagged = web.http.get("/api/v1/jobs", params={"tag": "t0"}).json()
    assert [r["id"] for r in tagged["jobs"]] == [ids[0], ids[2]] and tagged["total"] == 2
    assert tagged["counts"]["PENDING"] == 3  # counts are never filtered
    named = web.http.get("/api/v1/jobs", params={"name": "job-1"}).json()
    assert [r["id"] for r in named["jobs"]] == [ids[1]]
    states = web.http.get("/api/v1/jobs", params=[("state", "running"), ("state", "pending")])
    assert states.json()["total"] == 3
    assert web.http.get("/api/v1/jobs", params={"state": "COMPLETED"}).json()["total"] == 0
    assert web.http.get("/api/v1/jobs", params={"since": "1h"}).json()["total"] == 3
    for bad in ({"limit": 0}, {"limit": 1001}, {"offset": -1}, {"sort": "nope"}):
        response = web.http.get("/api/v1/jobs", params=bad)
        assert response.status_code == 422, bad
        assert response.json()["error"]["details"][0]["loc"].startswith("query.")
    bad_state = web.http.get("/api/v1/jobs", params={"state": "BOGUS"})
    assert bad_state.status_code == 422 and "BOGUS" in bad_state.json()["error"]["message"]


def test_samples_of_a_running_job_skip_malformed_lines(vq: Vq, web: Web) -> None:
    vq.start_daemon()
    job = vq.submit("--", "sleep", "60")
    vq.wait_state(job, "RUNNING")

    def sampled() -> list[dict[str, Any]]:
        response = web.http.get(f"/api/v1/jobs/{job}/samples")
        assert response.status_code == 200
        records: list[dict[str, Any]] = response.json()
        return records

    records = wait_until(sampled, timeout=30, interval=0.5)  # the watchdog samples every 5 s
    assert all("ts" in record and "rss_mb" in record for record in records)
    samples = vq.root / "jobs" / job / "_vq" / "samples.jsonl"
    with open(samples, "a") as handle:
        handle.write('{"not": "a sample"}\nnot json at all\n[1, 2]\n{"ts": "yesterday"}\n')
    after = sampled()
    assert len(after) >= len(records)
    assert all(isinstance(record.get("ts"), str) and "not" not in record for record in after)
    assert web.http.get(f"/api/v1/jobs/{job}/samples", params={"limit": 1}).json() == after[-1:]
    assert web.http.get(f"/api/v1/jobs/{job}/samples", params={"limit": 0}).status_code == 422


def test_health_ready_follows_the_daemon_and_names_no_path(vq: Vq, web: Web) -> None:
    down = web.http.get("/health/ready")
    assert down.status_code == 503 and "/" not in down.text
    vq.start_daemon()
    up = web.http.get("/health/ready")
    assert up.status_code == 200 and "/" not in up.text
    assert web.http.get("/health/live").status_code == 200
    assert web.http.get("/api/v1/openapi.json").json()["paths"]["/api/v1/jobs/{job_id}/kill"]
