"""Console job page: every user-meaningful spec field, no-JS log refresh, HTML 404s.

Over the app in-process and real `vq` submissions; :mod:`vq.web.pages.jobview` is also
checked directly for fields the CLI cannot set without a configured program.
"""

from __future__ import annotations

import re

from tests.conftest import Vq, wait_until
from tests.web.conftest import Web
from vq.web.pages import jobview


def dl_rows(html: str) -> dict[str, str]:
    """``<dt>label</dt><dd>text</dd>`` pairs of the page, tags stripped, spaces folded."""
    pairs = re.findall(r"<dt>(.*?)</dt><dd[^>]*>(.*?)</dd>", html, re.S)
    clean = {
        label: re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text)).strip() for label, text in pairs
    }
    return clean


def test_detail_page_shows_the_spec_fields(vq: Vq, web: Web) -> None:
    first = vq.submit("--job-name", "first", "--", "true")
    other = vq.submit("--job-name", "other", "--", "true")
    vq.run("kill", other)
    job = vq.submit(
        "--job-name", "rich",
        "--not-before", "2099-01-02T03:04:05+00:00",
        "--retry", "3", "--retry-backoff", "2m",
        "--after", first, "--after-any", other,
        "--rerun-until-file-exists", "done.flag", "--rerun-max", "4",
        "--clean-workdir",
        "--idempotency-key", "secret-key-123",
        "--", "true",
    )  # fmt: skip
    html = web.http.get(f"/jobs/{job}").text
    rows = dl_rows(html)
    assert rows["Not before"] == "2099-01-02 03:04:05"
    assert rows["Retries"].startswith("0 of 3 used · backoff 2m")
    assert f'href="/jobs/{first}"' in html and f'href="/jobs/{other}"' in html
    assert rows["Depends on (all)"] == f"{first} PENDING"
    assert rows["Depends on (any)"] == f"{other} KILLED"
    assert rows["Rerun"] == "until done.flag exists · 0 of 4 reruns"
    assert "workdir removed when the job ends" in rows["Cleanup and recovery"]
    assert rows["Idempotency key"].startswith("used")
    spec = vq.json("status", job)
    assert spec["idempotency_key_hash"] not in html and "secret-key-123" not in html
    assert spec["idempotency_intent_digest"] not in html

    plain = web.http.get(f"/jobs/{first}").text
    for label in ("Retries", "Rerun", "Idempotency key", "Not before", "Depends on (all)"):
        assert label not in dl_rows(plain), label  # empty fields are skipped

    array = vq.run("submit", "--array", "1-2", "--max-parallel", "1", "--", "true").stdout.split()
    element = dl_rows(web.http.get(f"/jobs/{array[1]}").text)["Array"]
    assert "element 2 of 2" in element and "at most 1 at once" in element


def test_jobview_program_pin_lineage_and_scheduler() -> None:
    job = jobview.scrub(
        {
            "id": "a" * 12,
            "program": "vibeqc",
            "branch": "main",
            "program_runtime_pin": {
                "resolved_git_sha": "0123456789abcdef",
                "enforce_git_sha": True,
            },
            "parent_jobid": "b" * 12,
            "workspace_source": "uploads/xyz",
            "scheduler_target": "hpc",
            "scheduler_job_id": "4242",
            "workspace": "/srv/state/workspaces/aaaa",
            "idempotency_key_hash": "f" * 64,
        }
    )
    assert "workspace" not in job and "idempotency_key_hash" not in job
    rows = {row["label"]: row for row in jobview.spec_rows(job, {})}
    assert rows["Program"]["text"] == "vibeqc · branch main · pinned at 0123456789ab (enforced)"
    assert rows["Resubmitted from"]["links"][0]["href"] == "/jobs/" + "b" * 12
    assert rows["Workspace from"]["text"] == "uploads/xyz"
    assert rows["Scheduler"]["text"] == "hpc · job 4242"
    assert rows["Idempotency key"]["text"].startswith("used")
    bad = jobview.spec_rows({"parent_jobid": "../../etc", "depends_on": ["../x"]}, {})
    assert all(link["href"].startswith("/jobs/") is False for r in bad for link in r["links"])


def test_log_refresh_works_without_scripts(vq: Vq, web: Web) -> None:
    job = vq.submit("--", "sh", "-c", "echo hello-out")
    vq.start_daemon()
    wait_until(lambda: vq.json("status", job)["state"] == "COMPLETED", timeout=30)
    html = web.http.get(f"/jobs/{job}").text
    refresh = re.search(r'<a class="button refresh"[^>]*href="([^"]+)"[^>]*>', html, re.S)
    assert refresh is not None, "Refresh must be a plain link, not a script-only button"
    tag = refresh.group(0)
    assert f'hx-get="/fragments/jobs/{job}/log?stream=stdout"' in tag
    assert 'hx-target="#log-stdout"' in tag
    target = refresh.group(1)
    assert target == f"/jobs/{job}#log-stdout"
    again = web.http.get(target.split("#")[0])
    assert again.status_code == 200 and 'id="log-stdout"' in again.text
    assert "hello-out" in again.text
    assert '<button type="button" hx-get' not in html


def test_malformed_or_unknown_job_paths_get_the_html_404_page(vq: Vq, web: Web) -> None:
    for path in (
        "/jobs/..%2F..%2Fetc",
        "/jobs/zzz",
        "/jobs/0123456789ab",
        "/jobs/0123456789ab/nope/deeper",
        "/jobs/..%2F..%2Fetc/logs/stdout",
    ):
        response = web.http.get(path)
        assert response.status_code == 404, path
        assert response.headers["content-type"].startswith("text/html"), path
        assert "<!doctype html>" in response.text.lower(), path
        assert "content-security-policy" in response.headers
    fragment = web.http.get("/fragments/jobs/..%2F..%2Fx/live", headers={"HX-Request": "true"})
    assert fragment.status_code == 404 and "<html" not in fragment.text
    api = web.http.get("/api/v1/jobs/..%2F..%2Fetc")
    assert api.status_code == 404 and api.headers["content-type"] == "application/json"


#: What a job page says only while the job can still change (issue 30 item 11).
LIVE_ONLY_WORDS = ("Written when the job's command ends", "No samples yet", "Empty so far")


def test_a_finished_job_page_speaks_in_the_past_tense(vq: Vq, web: Web) -> None:
    # Killed while PENDING: it never ran, so no sample, no log line and no receipt exist.
    waiting = vq.submit("--job-name", "never-ran", "--", "true")
    html = web.http.get(f"/jobs/{waiting}").text
    for words in ("Written when the job's command ends", "No samples yet", "Empty so far"):
        assert words in html, words  # still pending: these are true now
    vq.run("kill", waiting)
    assert vq.json("status", waiting)["state"] == "KILLED"

    html = web.http.get(f"/jobs/{waiting}").text
    for words in LIVE_ONLY_WORDS:
        assert words not in html, words
    assert "No samples were taken." in html
    assert "The job wrote nothing to stdout." in html
    assert "The job wrote nothing to stderr." in html
    assert "No receipt was written for this job." in html
    fragment = web.http.get(
        f"/fragments/jobs/{waiting}/log?stream=stderr", headers={"HX-Request": "true"}
    ).text
    assert "The job wrote nothing to stderr." in fragment and "Empty so far" not in fragment
