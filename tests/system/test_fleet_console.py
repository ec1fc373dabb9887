"""The fleet console (`vq web serve --fleet`) over three real namespace hosts.

Each host runs a real vq daemon (this checkout, started over SSH); the console is the
real `vq web serve --fleet` process; reads and actions go over real SSH. Chromium (the
system browser through Playwright) opens the pages.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Dialog

from tests.system.conftest import DESKTOP, PHONE, SCREENSHOTS, chromium  # noqa: F401
from tests.system.remote_fleet import (
    MEASURED_SSH_TIMEOUT,
    RemoteFleet,
    wait_until,
)
from tests.testbed import SshTestbed, testbed  # noqa: F401 - the fixture
from tests.web.conftest import free_port

PASSWORD = "correct-horse-9"
HOSTILE = '<img src=x onerror=alert(1)>"fleet'


@dataclass
class FleetWeb:
    fleet: RemoteFleet
    base_url: str
    process: subprocess.Popen[bytes]
    http: httpx.Client
    clients: list[httpx.Client] = field(default_factory=list)

    def add_user(self, user: str, role: str) -> None:
        done = self.fleet.vq("web", "user", "add", user, "--role", role, stdin=PASSWORD.encode())
        assert done.returncode == 0, done.stderr

    def sign_in(self, user: str) -> tuple[httpx.Client, str]:
        client = httpx.Client(base_url=self.base_url, timeout=30.0)
        self.clients.append(client)
        answer = client.post("/login", data={"username": user, "password": PASSWORD, "next": "/"})
        assert answer.status_code == 303, answer.text
        found = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', client.get("/").text)
        assert found, "a signed-in page carries the CSRF token"
        return client, found.group(1)

    def audit(self) -> list[dict[str, object]]:
        path = self.fleet.local / "fleet-audit.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines]


@contextlib.contextmanager
def _serving(fleet: RemoteFleet, tmp_path: Path) -> Iterator[FleetWeb]:
    """A real `vq web serve --fleet` over ``fleet``'s configuration, stopped after."""
    port = free_port()
    log = (tmp_path / "web.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "vq", "web", "serve", "--fleet", "--port", str(port)],
        env=fleet.env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    made = FleetWeb(fleet, base, process, httpx.Client(base_url=base, timeout=30.0))

    def answering() -> bool:
        assert process.poll() is None, (tmp_path / "web.log").read_text()
        try:
            return made.http.get("/health/live").status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(answering, 30)
        yield made
    finally:
        for client in (made.http, *made.clients):
            client.close()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        log.close()


@pytest.fixture
def web(fleet: RemoteFleet, tmp_path: Path) -> Iterator[FleetWeb]:
    fleet.write_config()
    for name in ("web-users.json", "web-token"):
        (fleet.config / name).unlink(missing_ok=True)
    with _serving(fleet, tmp_path) as made:
        yield made


@pytest.fixture(scope="module")
def jobs(fleet: RemoteFleet) -> dict[str, str]:
    """One long sleeper per host (the h2 one burns a little CPU for the chart)."""
    made = {}
    for host in ("h1", "h2", "h3"):
        made[host] = fleet.submit(
            host,
            "--job-name",
            f"{HOSTILE}-{host}",
            "--tag",
            "fleet-ui",
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 600 ]; do i=$((i+1)); echo tick $i; sleep 0.5; done",
        )
    return made


def _remote_state(fleet: RemoteFleet, host: str, job_id: str) -> str:
    done = fleet.vq("status", host, job_id, "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["state"])


def test_pages_and_api_list_every_hosts_jobs_escaped(web: FleetWeb, jobs: dict[str, str]) -> None:
    hosts = web.http.get("/api/v1/fleet/hosts").json()["hosts"]
    assert [(h["name"], h["status"]) for h in hosts] == [
        ("localhost", "ok"),  # this workstation first (read in-process)
        ("h1", "ok"),
        ("h2", "ok"),
        ("h3", "ok"),
    ]
    queue = web.http.get("/api/v1/fleet/queue", params={"tag": "fleet-ui", "limit": 1000}).json()
    listed = {(row["host"], row["id"]) for row in queue["jobs"]}
    assert set(jobs.items()) <= listed
    assert [h["lanes"] for h in hosts] == [[], [], [], []]  # no host drives a lane here
    assert {row["lane"] for row in queue["jobs"]} == {None}
    one = web.http.get("/api/v1/fleet/queue", params={"host": "h2", "limit": 1, "offset": 0})
    assert one.status_code == 200 and {r["host"] for r in one.json()["jobs"]} == {"h2"}
    assert one.json()["total"] >= 1 and len(one.json()["jobs"]) == 1
    detail = web.http.get(f"/api/v1/fleet/jobs/h2/{jobs['h2']}").json()
    assert detail["host"] == "h2" and detail["id"] == jobs["h2"]
    assert detail["job_name"] == f"{HOSTILE}-h2"
    unknown = web.http.get("/api/v1/fleet/jobs/h2/000000000000")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"]
    assert web.http.get(f"/api/v1/fleet/jobs/nohost/{jobs['h2']}").status_code == 404
    page = web.http.get("/fleet")
    assert page.status_code == 200
    for host, job_id in jobs.items():
        assert f'data-host="{host}" data-job-id="{job_id}"' in page.text
    assert "<img src=x" not in page.text and "&lt;img src=x onerror=alert(1)&gt;" in page.text
    job_page = web.http.get(f"/fleet/jobs/h2/{jobs['h2']}")
    assert job_page.status_code == 200 and "<img src=x" not in job_page.text
    outputs = web.http.get(f"/fleet/jobs/h1/{jobs['h1']}/outputs.tar.gz")
    assert outputs.status_code == 200 and outputs.content[:2] == b"\x1f\x8b"
    with tarfile.open(fileobj=io.BytesIO(outputs.content), mode="r:gz") as tar:
        assert any(name.endswith("stdout.log") for name in tar.getnames()), tar.getnames()
    missing = web.http.get("/fleet/jobs/h1/000000000000/outputs.tar.gz")
    assert missing.status_code == 404 and "text/html" in missing.headers["content-type"]
    spec = web.http.get("/api/v1/openapi.json").json()["paths"]
    for path in (
        "/api/v1/fleet/hosts",
        "/api/v1/fleet/queue",
        "/api/v1/fleet/jobs/{host}/{job_id}",
        "/api/v1/fleet/jobs/{host}/{job_id}/logs",
        "/api/v1/fleet/jobs/{host}/{job_id}/samples",
        "/api/v1/fleet/jobs/{host}/{job_id}/events",
        "/api/v1/fleet/jobs/{host}/{job_id}/{action}",
    ):
        assert path in spec, path
    assert web.http.get("/health/live").status_code == 200
    assert web.http.get("/health/ready").status_code in (200, 503)


@pytest.fixture
def web_h3_timed(fleet: RemoteFleet, tmp_path: Path) -> Iterator[FleetWeb]:
    """The console with h3's ``ssh_timeout`` at :data:`MEASURED_SSH_TIMEOUT` (the others
    keep their generous one, so only h3's deadline is measured)."""
    fleet.write_config(h3={"ssh_timeout": MEASURED_SSH_TIMEOUT})
    for name in ("web-users.json", "web-token"):
        (fleet.config / name).unlink(missing_ok=True)
    try:
        with _serving(fleet, tmp_path) as made:
            yield made
    finally:
        fleet.write_config()


def test_a_partitioned_host_is_a_row_within_its_deadline_then_comes_back(
    web_h3_timed: FleetWeb, fleet: RemoteFleet, jobs: dict[str, str]
) -> None:
    web, timeout = web_h3_timed, MEASURED_SSH_TIMEOUT
    hosts = web.http.get("/api/v1/fleet/hosts").json()["hosts"]
    assert {h["name"]: h["status"] for h in hosts}["h3"] == "ok"
    with fleet.partition("h3"):
        started = time.monotonic()
        slowest = 0.0

        def h3_unreachable() -> bool:
            nonlocal slowest
            asked = time.monotonic()
            hosts = {h["name"]: h for h in web.http.get("/api/v1/fleet/hosts").json()["hosts"]}
            slowest = max(slowest, time.monotonic() - asked)
            assert hosts["h1"]["status"] == "ok" and hosts["h2"]["status"] == "ok"
            return hosts["h3"]["status"] == "unreachable"

        wait_until(h3_unreachable, 3 * timeout + 10, interval=0.5)
        assert slowest <= timeout + 2.5, slowest
        assert time.monotonic() - started <= 2 * timeout + 10
        page = web.http.get("/fleet")
        assert page.status_code == 200
        assert re.search(r'data-host="h3" data-status="unreachable"', page.text)
        assert "unreachable since" in page.text
        h3 = [h for h in web.http.get("/api/v1/fleet/hosts").json()["hosts"] if h["name"] == "h3"]
        assert h3[0]["last_ok_at"] and h3[0]["error"]
        rows = web.http.get("/api/v1/fleet/queue", params={"tag": "fleet-ui"}).json()
        assert {r["host"] for r in rows["jobs"]} == {"h1", "h2"}
        assert {h["name"]: h["status"] for h in rows["hosts"]}["h3"] == "unreachable"

    def h3_back() -> bool:
        hosts = web.http.get("/api/v1/fleet/hosts").json()["hosts"]
        return {h["name"]: h["status"] for h in hosts}["h3"] == "ok"

    wait_until(h3_back, 30, interval=0.5)


def test_fleet_writes_auth_matrix_csrf_and_audit(
    web: FleetWeb, fleet: RemoteFleet, jobs: dict[str, str]
) -> None:
    target = f"/api/v1/fleet/jobs/h1/{jobs['h1']}"
    page_closed = web.http.post(f"/fleet/actions/jobs/h1/{jobs['h1']}/pause")
    assert page_closed.status_code == 403 and "vq web user add" in page_closed.text
    closed = web.http.post(f"{target}/pause")
    assert closed.status_code == 403
    assert closed.json()["error"]["code"] == "fleet-writes-closed"
    assert "vq web user add" in closed.json()["error"]["hint"]
    assert web.http.get("/api/v1/fleet/hosts").status_code == 200  # reads open on loopback
    token = fleet.vq("web", "init-token", "--force").stdout.strip()
    admin = {"Authorization": f"Bearer {token}"}
    assert web.http.post(f"{target}/pause", headers=admin).status_code == 403  # still closed
    web.add_user("ann", "viewer")
    web.add_user("olga", "operator")
    assert web.http.get("/api/v1/fleet/hosts").status_code == 401
    assert web.http.get("/fleet", follow_redirects=False).status_code == 303
    assert web.http.get("/", follow_redirects=False).status_code == 303  # single-host too
    assert web.http.get("/health/live").status_code == 200
    viewer, viewer_csrf = web.sign_in("ann")
    assert viewer.get("/api/v1/fleet/hosts").status_code == 200
    refused = viewer.post(f"{target}/pause", headers={"X-CSRF-Token": viewer_csrf})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    operator, operator_csrf = web.sign_in("olga")
    no_csrf = operator.post(f"{target}/pause")
    assert no_csrf.status_code == 403 and no_csrf.json()["error"]["code"] == "csrf"
    form_no_csrf = operator.post(f"/fleet/actions/jobs/h1/{jobs['h1']}/pause", data={})
    assert form_no_csrf.status_code == 403
    assert _remote_state(fleet, "h1", jobs["h1"]) == "RUNNING"
    paused = operator.post(f"{target}/pause", headers={"X-CSRF-Token": operator_csrf})
    assert paused.status_code == 200, paused.text
    assert paused.json()["result"][0]["state"] == "SUSPENDED"
    assert _remote_state(fleet, "h1", jobs["h1"]) == "SUSPENDED"
    resumed = web.http.post(f"{target}/resume", headers=admin)
    assert resumed.status_code == 200, resumed.text
    assert _remote_state(fleet, "h1", jobs["h1"]) == "RUNNING"
    records = [r for r in web.audit() if r.get("host") == "h1"]
    seen = [(r["actor"], r["action"], r["outcome"]) for r in records[-8:]]
    assert seen == [
        ("anonymous", "pause", "refused"),
        ("anonymous", "pause", "refused"),
        ("admin-token", "pause", "refused"),
        ("ann", "pause", "refused"),
        ("olga", "pause", "refused"),
        ("olga", "pause", "refused"),
        ("olga", "pause", "ok"),
        ("admin-token", "resume", "ok"),
    ]
    assert all(r["job_id"] == jobs["h1"] for r in records[-8:])
    wrong = web.http.post(f"{target}/pause", headers=admin, json={"resubmit": True})
    assert wrong.status_code == 422 and wrong.json()["error"]["hint"]
    assert _remote_state(fleet, "h1", jobs["h1"]) == "RUNNING"
    again = web.http.post(f"{target}/kill", headers=admin, json={"resubmit": True})
    assert again.status_code == 200, again.text
    new_id = again.json()["resubmitted"]
    assert again.json()["result"][0]["state"] == "KILLED" and new_id != jobs["h1"]
    assert _remote_state(fleet, "h1", jobs["h1"]) == "KILLED"
    assert _remote_state(fleet, "h1", new_id) in ("PENDING", "RUNNING")
    copy = web.http.get(f"/api/v1/fleet/jobs/h1/{new_id}", headers=admin).json()
    assert copy["job_name"] == f"{HOSTILE}-h1"
    kill = [r for r in web.audit() if r.get("action") == "kill"][-1]
    assert (kill["actor"], kill["host"], kill["job_id"], kill["outcome"]) == (
        "admin-token",
        "h1",
        jobs["h1"],
        "ok",
    )
    assert (kill["resubmit"], kill["resubmitted"]) == (True, new_id)
    assert viewer.get("/fleet/audit").status_code == 403
    web.add_user("adam", "admin")
    admin_client, _ = web.sign_in("adam")
    page = admin_client.get("/fleet/audit", params={"host": "h1"})
    assert page.status_code == 200 and page.text.count('<tr><td class="when">') >= 8
    assert admin_client.get("/fleet/audit", params={"host": "h2"}).text.count("olga") == 0


def test_browser_opens_a_job_on_h2_draws_its_chart_and_kills_it(
    web: FleetWeb,
    fleet: RemoteFleet,
    jobs: dict[str, str],
    chromium: Browser,  # noqa: F811 - the fixture
) -> None:
    job_id = jobs["h2"]
    web.add_user("olga", "operator")

    client, _ = web.sign_in("olga")

    def two_samples() -> bool:
        got = client.get(f"/api/v1/fleet/jobs/h2/{job_id}/samples").json()["samples"]
        return len(got) >= 2

    wait_until(two_samples, 30, interval=2)
    context = chromium.new_context(viewport=DESKTOP)
    context.set_default_timeout(20_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(f"{web.base_url}/login?next=/fleet")
        page.fill("input[name=username]", "olga")
        page.fill("input[name=password]", PASSWORD)
        page.click("form:has(input[name=username]) button[type=submit]")
        page.wait_for_url(f"{web.base_url}/fleet")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "fleet-laptop.png"), full_page=True)
        page.click(f'tr[data-host="h2"][data-job-id="{job_id}"] td.name a')
        page.wait_for_url(f"{web.base_url}/fleet/jobs/h2/{job_id}")
        page.wait_for_selector('#usage-chart[data-drawn="1"][data-live="1"]')
        assert page.locator("#job-live").get_attribute("data-state") == "RUNNING"
        drawn = int(page.get_attribute("#usage-chart", "data-points") or 0)
        # The chart follows the job without a reload: the watchdog adds a sample every
        # 5 s and the page polls the fleet's cached samples every 5 s.
        wait_until(
            lambda: int(page.get_attribute("#usage-chart", "data-points") or 0) > drawn,
            40,
            interval=1,
        )
        page.screenshot(path=str(SCREENSHOTS / "fleet-job.png"), full_page=True)

        def accept(dialog: Dialog) -> None:
            dialog.accept()

        page.on("dialog", accept)
        page.check('form[action$="/kill"] input[name="resubmit"]')
        page.click('button[data-action="kill"]')
        page.wait_for_selector("#action-outcome .outcome-ok")
        said = page.text_content("#action-outcome") or ""
        assert "h2" in said and "Resubmitted as" in said, said
        wait_until(lambda: _remote_state(fleet, "h2", job_id) == "KILLED", 20)
        # the live part follows the state change without a reload; the chart stops
        page.wait_for_selector('#job-live[data-state="KILLED"]', timeout=20_000)
        page.wait_for_selector('#usage-chart[data-live="0"]', timeout=20_000)
        kill = [r for r in web.audit() if r.get("action") == "kill"][-1]
        assert (kill["actor"], kill["host"], kill["job_id"], kill["outcome"]) == (
            "olga",
            "h2",
            job_id,
            "ok",
        )
        new_id = str(kill["resubmitted"])
        assert kill["resubmit"] is True and new_id in said
        link = page.get_attribute("#action-outcome a", "href")
        assert link == f"/fleet/jobs/h2/{new_id}"
        assert _remote_state(fleet, "h2", new_id) in ("PENDING", "RUNNING")
        page.set_viewport_size(PHONE)
        page.goto(f"{web.base_url}/fleet")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"] + 1, width
        page.screenshot(path=str(SCREENSHOTS / "fleet-phone.png"), full_page=True)
        assert errors == []
    finally:
        context.close()


def test_an_action_whose_answer_is_lost_says_outcome_unknown(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    job_id = fleet.submit("h1", "--job-name", "lost-answer", "--", "sleep", "300")
    # h1's vq answers the kill, then the SSH call outlives its 3 s deadline.
    slow = ["sh", "-c", '"$@"; sleep 20', "sh", *fleet.vq_command("h1")]
    fleet.write_config(h1={"vq_command": slow, "ssh_timeout": MEASURED_SSH_TIMEOUT})
    try:
        for name in ("web-users.json", "web-token"):
            (fleet.config / name).unlink(missing_ok=True)
        with _serving(fleet, tmp_path) as web:
            web.add_user("olga", "operator")
            client, csrf = web.sign_in("olga")
            lost = client.post(
                f"/api/v1/fleet/jobs/h1/{job_id}/kill", headers={"X-CSRF-Token": csrf}
            )
            assert lost.status_code == 504, lost.text
            error = lost.json()["error"]
            assert error["code"] == "outcome-unknown"
            assert "outcome is unknown" in error["message"] and "host state" in error["message"]
            record = [r for r in web.audit() if r.get("action") == "kill"][-1]
            assert (record["host"], record["job_id"], record["outcome"]) == (
                "h1",
                job_id,
                "unknown",
            )
    finally:
        fleet.write_config()
    wait_until(lambda: _remote_state(fleet, "h1", job_id) == "KILLED", 20)


def test_the_fleet_table_is_complete_past_a_hosts_newest_1000_jobs(
    web: FleetWeb, fleet: RemoteFleet, jobs: dict[str, str]
) -> None:
    """h1 gets 1,050 more jobs (one array, held PENDING behind a sleeper): the table and
    its filters still reach h1's older jobs, which its snapshot no longer lists."""
    blocker = fleet.submit("h1", "--job-name", "blocker", "--", "sleep", "600")
    made = fleet.remote_vq(
        "h1", "submit", "--json", "--array", "0-1049", "--after", blocker, "--tag", "bulk",
        "--", "true",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    group = json.loads(made.stdout)["array_group_id"]
    try:
        _check_complete_table(web, jobs, blocker, group)
    finally:  # the array never runs: ending its blocker ends it, so h1 stays light
        fleet.vq("kill", "h1", blocker)


def _check_complete_table(web: FleetWeb, jobs: dict[str, str], blocker: str, group: str) -> None:
    h1 = {h["name"]: h for h in web.http.get("/api/v1/fleet/hosts").json()["hosts"]}["h1"]
    total = h1["total_jobs"]
    assert total >= 1052, total
    seen: list[str] = []
    for offset in range(0, total, 1000):
        page = web.http.get(
            "/api/v1/fleet/queue", params={"host": "h1", "limit": 1000, "offset": offset}
        ).json()
        assert page["total"] == total and page["incomplete"] == []
        seen += [row["id"] for row in page["jobs"]]
    assert len(seen) == len(set(seen)) == total
    assert {jobs["h1"], blocker} <= set(seen)  # older than h1's newest 1,000
    tagged = web.http.get("/api/v1/fleet/queue", params={"tag": "fleet-ui"}).json()
    assert ("h1", jobs["h1"]) in {(r["host"], r["id"]) for r in tagged["jobs"]}, tagged
    grouped = web.http.get("/api/v1/fleet/queue", params={"group": group, "limit": 10}).json()
    assert grouped["total"] == 1050 and {r["host"] for r in grouped["jobs"]} == {"h1"}
    blocked = web.http.get(f"/api/v1/fleet/jobs/h1/{blocker}").json()
    since = web.http.get(
        "/api/v1/fleet/queue", params={"since": blocked["submitted_at"], "host": "h1"}
    ).json()
    assert since["total"] == 1051, since["total"]  # the blocker and its array
    assert web.http.get("/api/v1/fleet/queue", params={"since": "2h"}).json()["total"] >= 1051
    for bad in ({"since": "last tuesday"}, {"since": "0001-01-01"}, {"state": "SLEEPING"}):
        refused = web.http.get("/api/v1/fleet/queue", params=bad)
        assert refused.status_code == 422, (bad, refused.text)
        error = refused.json()["error"]
        assert error["code"] and error["message"] and error["hint"], error
    too_long = web.http.get("/api/v1/fleet/queue", params={"group": "g" * 65})
    assert too_long.status_code == 422 and too_long.json()["error"]["message"]
    pages = -(-total // 100)
    last = web.http.get("/fleet/hosts/h1", params={"page": pages})
    assert last.status_code == 200 and f'data-job-id="{jobs["h1"]}"' in last.text
    assert f"page {pages} of {pages}" in last.text
    params = web.http.get("/api/v1/openapi.json").json()["paths"]["/api/v1/fleet/queue"]
    assert {"since", "group"} <= {p["name"] for p in params["get"]["parameters"]}


def test_open_job_pages_poll_only_the_cached_job_detail(
    fleet: RemoteFleet,
    tmp_path: Path,
    chromium: Browser,  # noqa: F811 - the fixture
) -> None:
    """Two browsers on one running h2 job: their live parts (every 3 s) and charts (every
    5 s) cost h2 at most one `vq web fleet-job` call per 5 s cache period, not one each."""
    job_id = fleet.submit(
        "h2", "--job-name", "watched", "--", "sh", "-c", "while :; do echo t; sleep 0.5; done"
    )
    calls = Path(f"{fleet.remote_state('h2')}-calls.log")
    calls.unlink(missing_ok=True)
    counted = ["sh", "-c", f'echo "$*" >> {calls}; exec "$@"', "sh", *fleet.vq_command("h2")]
    fleet.write_config(h2={"vq_command": counted})
    contexts = []
    try:
        for name in ("web-users.json", "web-token"):
            (fleet.config / name).unlink(missing_ok=True)
        with _serving(fleet, tmp_path) as web:
            wait_until(lambda: _remote_state(fleet, "h2", job_id) == "RUNNING", 30)
            polls: list[list[str]] = []
            pages = []
            opened = time.monotonic()
            for _ in range(2):
                context = chromium.new_context(viewport=DESKTOP)
                contexts.append(context)
                page = context.new_page()
                seen: list[str] = []
                page.on("request", lambda request, seen=seen: seen.append(request.url))
                page.goto(f"{web.base_url}/fleet/jobs/h2/{job_id}")
                page.wait_for_selector('#usage-chart[data-live="1"]')
                polls.append(seen)
                pages.append(page)

            def samples_polled_four_times_each() -> bool:
                pages[0].wait_for_timeout(100)  # lets Playwright deliver the request events
                return all(sum(u.endswith("/samples") for u in seen) >= 4 for seen in polls)

            wait_until(samples_polled_four_times_each, 60, interval=0.5)
            window = time.monotonic() - opened
            reads = [line for line in calls.read_text().splitlines() if "fleet-job" in line]
            lives = [sum("/live?" in u for u in seen) for seen in polls]
            assert min(lives) >= 4, lives  # the live part polled too
            assert len(reads) <= window / 5 + 2, (len(reads), window)
    finally:
        for context in contexts:
            context.close()
        fleet.write_config()
        calls.unlink(missing_ok=True)
        fleet.vq("kill", "h2", job_id)
