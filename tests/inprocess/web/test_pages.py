"""The console's HTML pages served in-process (httpx; no browser, no JavaScript).

Pages must be complete without scripts (rows in the HTML), escape every job-supplied
string, carry the CSP header, and fragments must be fragments (no layout).
"""

from __future__ import annotations

import json
import re

from tests.conftest import Vq, wait_until
from tests.web.conftest import Web

XSS_NAME = '"><img src=x onerror=alert(1)>'
XSS_CMD = "<script>alert(1)</script>"


def row_ids(html: str) -> list[str]:
    return re.findall(r'<tr class="job[^"]*" data-job-id="([0-9a-f]{12})"', html)


def test_queue_page_lists_jobs_in_plain_html(vq: Vq, web: Web) -> None:
    first = vq.submit("--job-name", "alpha", "--tag", "blue", "--", "true")
    second = vq.submit("--job-name", "beta", "--priority", "5", "--", "true")
    array = vq.run("submit", "--array", "1-3", "--job-name", "sweep", "--", "echo", "x")
    members = array.stdout.split()
    assert len(members) == 3

    page = web.http.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "style-src 'self'" in csp
    html = page.text
    assert set(row_ids(html)) == {first, second}  # the array is folded into one group row
    group = re.search(r'<tr class="group" data-group-id="([0-9a-f]+)"', html)
    assert group is not None
    assert "sweep" in html and "3 jobs" in html
    # no inline script: every <script> has a src or is a JSON data block
    for tag in re.findall(r"<script[^>]*>", html):
        assert "src=" in tag or 'type="application/json"' in tag, tag
    assert 'hx-get="/fragments/jobs"' in html and 'hx-trigger="every 3s"' in html

    expanded = web.http.get("/", params={"open": group.group(1)}).text
    assert set(members) <= set(row_ids(expanded))

    by_name = row_ids(web.http.get("/", params={"sort": "name", "dir": "asc"}).text)
    assert by_name.index(first) < by_name.index(second)
    by_priority = row_ids(web.http.get("/", params={"sort": "priority", "dir": "desc"}).text)
    assert by_priority.index(second) < by_priority.index(first)

    tagged = web.http.get("/", params={"tag": "blue"}).text
    assert row_ids(tagged) == [first]
    named = web.http.get("/", params={"name": "bet"}).text
    assert row_ids(named) == [second]
    assert row_ids(web.http.get("/", params={"state": "RUNNING"}).text) == []


def test_fragments_are_fragments(vq: Vq, web: Web) -> None:
    job = vq.submit("--job-name", "frag", "--", "true")
    table = web.http.get("/fragments/jobs", headers={"HX-Request": "true"})
    assert table.status_code == 200
    assert "<html" not in table.text and "<header" not in table.text
    assert row_ids(table.text) == [job]
    summary = web.http.get("/fragments/summary").text
    assert "<html" not in summary and 'data-count="PENDING">1<' in summary
    live = web.http.get(f"/fragments/jobs/{job}/live", params={"seen": "RUNNING"})
    assert live.status_code == 200 and "<html" not in live.text
    assert live.headers.get("hx-trigger") == "job-changed"  # it showed RUNNING, it is PENDING
    same = web.http.get(f"/fragments/jobs/{job}/live", params={"seen": "PENDING"})
    assert "hx-trigger" not in same.headers
    log = web.http.get(f"/fragments/jobs/{job}/log", params={"stream": "stderr"})
    assert log.status_code == 200 and "<html" not in log.text and 'id="log-stderr"' in log.text
    assert web.http.get(f"/fragments/jobs/{job}/log", params={"stream": "x"}).status_code == 422


def test_job_supplied_text_is_escaped(vq: Vq, web: Web) -> None:
    job = vq.submit("--job-name", XSS_NAME, "--", "echo", XSS_CMD)
    vq.start_daemon()
    vq.wait_state(job, "COMPLETED")
    for path in ("/", f"/jobs/{job}", "/overview", "/fragments/jobs"):
        html = web.http.get(path).text
        assert "<img src=x" not in html, path
        assert "<script>alert" not in html, path
        assert "</script><script>" not in html, path
    detail = web.http.get(f"/jobs/{job}").text
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in detail
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail  # the command and its stdout


def test_json_data_blocks_cannot_close_their_script_tag() -> None:
    from vq.web.pages.render import ENV

    text = ENV.from_string("<script type=application/json>{{ v | json_script }}</script>")
    html = text.render(v={"label": "</script><script>alert(1)</script>&"})
    assert html.count("</script>") == 1
    inner = html.removeprefix("<script type=application/json>").removesuffix("</script>")
    assert json.loads(inner) == {"label": "</script><script>alert(1)</script>&"}


def test_detail_page_shows_logs_failure_and_receipt(vq: Vq, web: Web) -> None:
    script = "import sys; print('out-line'); print('err-line', file=sys.stderr); sys.exit(3)"
    job = vq.submit("--job-name", "broken", "--mem-mb", "300", "--", "python3", "-c", script)
    vq.start_daemon()
    vq.wait_state(job, "FAILED")
    wait_until(lambda: (vq.root / "jobs" / job / "_vq" / "resource-usage.json").exists())

    page = web.http.get(f"/jobs/{job}")
    assert page.status_code == 200
    html = page.text
    assert "out-line" in html and "err-line" in html
    assert "Failure tail" in html and 'class="log failure"' in html
    assert "Resource receipt" in html and "Peak RSS" in html
    assert "hx-get" in html and f"/jobs/{job}/logs/stdout" in html
    assert str(vq.root) not in html  # no server path
    assert "dispatched" in html or "→" in html  # the timeline
    series = re.search(r'<script type="application/json" id="samples-data">(.*?)</script>', html)
    assert series is not None and json.loads(series.group(1))["mem_mb"] == 300

    download = web.http.get(f"/jobs/{job}/logs/stdout")
    assert download.status_code == 200
    assert download.text == "out-line\n"
    assert "attachment" in download.headers["content-disposition"]
    assert web.http.get("/jobs/0123456789ab").status_code == 404
    missing = web.http.get("/jobs/not-a-job")
    assert missing.status_code == 404 and "<html" in missing.text


def test_actions_need_credentials_and_csrf(vq: Vq, web: Web) -> None:
    job = vq.submit("--job-name", "victim", "--", "sleep", "60")
    vq.start_daemon()
    vq.wait_state(job, "RUNNING")

    # no accounts: reads are open, actions need credentials
    assert web.http.get(f"/jobs/{job}").status_code == 200
    assert 'data-action="kill"' not in web.http.get(f"/jobs/{job}").text
    refused = web.http.post(f"/actions/jobs/{job}/kill", data={"confirm": "yes"})
    assert refused.status_code == 401
    assert web.http.post("/actions/queue/drain", data={"mode": "new"}).status_code == 401

    vq.run(
        "web", "user", "add", "op", "--role", "operator", "--password-stdin", input="pw-op-12345\n"
    )
    # accounts exist: pages send an anonymous caller to the sign-in page
    redirect = web.http.get(f"/jobs/{job}", follow_redirects=False)
    assert redirect.status_code == 303
    assert redirect.headers["location"] == f"/login?next=%2Fjobs%2F{job}"
    fragment = web.http.get("/fragments/jobs", headers={"HX-Request": "true"})
    assert fragment.status_code == 401 and fragment.headers["hx-redirect"].startswith("/login")

    signed = web.http.post(
        "/login", data={"username": "op", "password": "pw-op-12345"}, follow_redirects=False
    )
    assert signed.status_code == 303
    html = web.http.get(f"/jobs/{job}").text
    assert 'data-action="kill"' in html
    token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert token is not None

    no_csrf = web.http.post(f"/actions/jobs/{job}/kill", data={"confirm": "yes"})
    assert no_csrf.status_code == 403
    wrong = web.http.post(
        f"/actions/jobs/{job}/kill", data={"confirm": "yes", "csrf_token": "0" * 64}
    )
    assert wrong.status_code == 403
    unconfirmed = web.http.post(
        f"/actions/jobs/{job}/kill", data={"csrf_token": token.group(1)}, follow_redirects=False
    )
    assert unconfirmed.status_code == 303
    assert vq.state(job) == "RUNNING"
    assert "Not killed" in web.http.get(f"/jobs/{job}").text  # the flash message

    done = web.http.post(
        f"/actions/jobs/{job}/kill",
        data={"csrf_token": token.group(1), "confirm": "yes"},
        follow_redirects=False,
    )
    assert done.status_code == 303 and done.headers["location"] == f"/jobs/{job}"
    assert vq.wait_state(job, "KILLED") == "KILLED"
    inline = web.http.post(
        f"/actions/jobs/{job}/resubmit",
        data={"csrf_token": token.group(1)},
        headers={"HX-Request": "true"},
    )
    assert inline.status_code == 200 and "<html" not in inline.text
    assert "Resubmitted as" in inline.text


def test_audit_page_is_admin_only(vq: Vq, web: Web) -> None:
    vq.start_daemon()
    admin = web.admin()
    drained = web.http.post(
        "/actions/queue/drain", data={"mode": "new", "reason": "<b>maint</b>"}, headers=admin
    )
    assert drained.status_code == 303
    audit = web.http.get("/audit", headers=admin)
    assert audit.status_code == 200
    assert "rpc-audit.jsonl" in audit.text and "drain" in audit.text
    assert "<b>maint</b>" not in audit.text
    assert "Audit</a>" in web.http.get("/", headers=admin).text
    assert "Audit</a>" not in web.http.get("/").text
    anonymous = web.http.get("/audit", follow_redirects=False)
    assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/login")
    undrained = web.http.post("/actions/queue/undrain", headers=admin, follow_redirects=False)
    assert undrained.status_code == 303
    assert "Undrain" not in web.http.get("/", headers=admin).text


def json_block(html: str, block_id: str) -> object:
    found = re.search(rf'<script type="application/json" id="{block_id}">(.*?)</script>', html)
    assert found is not None, block_id
    return json.loads(found.group(1))


def test_charts_come_with_numbers_and_follow_only_live_jobs(vq: Vq, web: Web) -> None:
    vq.start_daemon()
    done = vq.submit("--job-name", "done", "--", "true")
    running = vq.submit("--job-name", "sleeper", "--mem-mb", "100", "--", "sleep", "30")
    waiting = vq.submit("--job-name", "too-big", "--cpus", "4096", "--", "true")
    vq.wait_state(done, "COMPLETED")
    vq.wait_state(running, "RUNNING")

    overview = web.http.get("/overview").text
    queue = json_block(overview, "queue-data")
    assert isinstance(queue, dict)
    assert (queue["now_running"], queue["now_pending"]) == (1, 1)
    assert queue["ended"] == {"completed": 1, "failed": 0}
    assert len(queue["t"]) == len(queue["running"]) == len(queue["pending"]) > 90
    assert "Now <b>1</b> running, <b>1</b> pending" in overview  # the numbers, without scripts
    assert 'data-chart="queue"' in overview and 'data-chart="ended"' in overview

    live = web.http.get(f"/jobs/{running}").text
    assert f'data-live-url="/api/v1/jobs/{running}/samples"' in live
    assert 'data-mem-mb="100"' in live
    wait_until(lambda: web.http.get(f"/api/v1/jobs/{running}/samples").json(), timeout=20)
    samples = web.http.get(f"/api/v1/jobs/{running}/samples").json()
    assert isinstance(samples, list) and {"ts", "rss_mb", "cpu_percent"} <= set(samples[0])
    series = json_block(web.http.get(f"/jobs/{running}").text, "samples-data")
    assert isinstance(series, dict) and len(series["t"]) == len(series["elapsed"]) >= 1

    ended = web.http.get(f"/jobs/{done}").text
    assert "data-live-url" not in ended  # nothing left to follow
    pending = web.http.get(f"/jobs/{waiting}").text
    assert "No samples yet: the job has not started" in pending
    assert '<b data-stat="count">0</b> samples' in pending


def _write_specs(vq: Vq, count: int, group_every: int) -> list[str]:
    """``count`` ended jobs written straight to the store (a large queue, quickly)."""
    from datetime import UTC, datetime, timedelta

    from vq.domain.spec import JobSpec
    from vq.domain.states import JobState
    from vq.paths import StatePaths
    from vq.store.specs import SpecStore

    store = SpecStore(StatePaths.from_env(vq.env))
    store.paths.ensure()
    base = datetime.now(UTC) - timedelta(hours=1)
    ids = [f"{0xA00000000000 + i:012x}" for i in range(count)]
    for i, job_id in enumerate(ids):
        spec = JobSpec(
            id=job_id,
            submitted_at=base + timedelta(seconds=i),
            command=["true"],
            cpus=1,
            job_name=f"bulk-{i}",
            state=JobState.COMPLETED,
            finished_at=base + timedelta(seconds=i, milliseconds=5),
        )
        if group_every and i % group_every == 0:
            spec.array_group_id, spec.array_index = "feedbeef0001", i
        store.create(spec, sync_dir=False)
    store.sync()
    return ids


def _pager_links(html: str) -> dict[str, str]:
    return dict(re.findall(r'rel="(prev|next)" href="/\?([^"]*)"', html))


def test_queue_table_pages_count_a_group_as_one_entry(vq: Vq, web: Web) -> None:
    ids = _write_specs(vq, 260, group_every=10)  # 26 in one array: 234 jobs + 1 group
    grouped = {job_id for i, job_id in enumerate(ids) if i % 10 == 0}
    loose = [job_id for job_id in ids if job_id not in grouped]
    for daemon in (False, True):
        if daemon:
            vq.start_daemon()
        first = web.http.get("/").text
        # Newest first, 100 entries a page; the array is one entry, placed where its
        # newest member (index 250) sorts: after the 9 newer loose jobs.
        assert row_ids(first) == loose[::-1][:99]
        assert first.count('<tr class="group"') == 1 and "26 jobs" in first
        assert first.index(loose[-9]) < first.index('<tr class="group"') < first.index(loose[-10])
        assert "Showing 1–100 of 235 entries (260 jobs)" in first
        assert "prev" not in _pager_links(first)
        assert _pager_links(first)["next"] == "page=2"
        assert 'hx-get="/fragments/jobs"' in first
        last = web.http.get("/", params={"page": 3}).text
        assert "Showing 201–235 of 235 entries" in last
        assert row_ids(last) == loose[::-1][199:] and '<tr class="group"' not in last
        assert 'hx-get="/fragments/jobs?page=3"' in last  # the refresh keeps the page
        assert _pager_links(last) == {"prev": "page=2"}
        beyond = web.http.get("/", params={"page": 99}).text
        assert "Showing 201–235 of 235 entries" in beyond  # past the end: the last page
        asc = web.http.get("/fragments/jobs", params={"sort": "submitted", "dir": "asc"}).text
        assert asc.index('<tr class="group"') < asc.index(loose[0])  # member 0 sorts first
        assert _pager_links(asc)["next"] == "sort=submitted&amp;dir=asc&amp;page=2"
        named = web.http.get("/", params={"name": "bulk-37", "page": "x"}).text
        assert row_ids(named) == [ids[37]] and "Showing 1–1 of 1 entry" in named
        assert _pager_links(named) == {}
    newest = vq.submit("--job-name", "fresh", "--", "true")  # the daemon's kept order goes stale
    assert row_ids(web.http.get("/").text)[0] == newest
    api = web.http.get("/api/v1/jobs", params={"sort": "-submitted_at", "limit": 1}).json()
    assert [r["id"] for r in api["jobs"]] == [newest] and api["total"] == 261
