"""Issue 30 item 1: a lane job waiting in Slurm's queue is not shown as running.

Real Slurm (the testbed's one two-CPU node): a two-CPU blocker runs, so a second
two-CPU lane job waits in squeue (``PD``, reason Resources or Priority). The job stays
RUNNING (§3.3: it includes cluster-queued time) but ``vq list``'s STATE column says
``queued (slurm: <reason>)`` with no running elapsed time, and ``vq status`` shows the
lane, the Slurm job id, the phase, the scheduler's reason and the cluster's own limit.
The running blocker reads ``running`` with its elapsed time counted from the cluster's
start (``scheduler_started_at``). The console (Chromium) says the same.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.conftest import Vq, wait_until
from tests.system.conftest import Console
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.system.test_scheduler_slurm import (
    _terminal,
    lane,  # noqa: F401 - the fixture
    scratch,  # noqa: F401 - the fixture
)
from tests.web.conftest import start_web, stop_web

pytestmark = pytest.mark.timeout(240)


def _line(listing: str, job_id: str) -> str:
    return next(line for line in listing.splitlines() if line.startswith(job_id))


def test_queued_lane_job_reads_queued_in_every_view(
    lane: Vq,  # noqa: F811
    console: Console,
    tmp_path: Path,
) -> None:
    """``vq list``, ``vq queue --all``, ``vq status``, the console's queue and job page
    (Chromium) and the fleet console's queue: the queued lane job reads ``queued (slurm:
    <reason>)`` with no elapsed time; the running blocker reads ``running``."""
    blocker = lane.submit("cluster", "--cpus", "2", "--wall-time", "5m", "--", "sleep", "30")
    wait_until(lambda: lane.spec(blocker).get("scheduler_state") == "running", 60)
    waiting = lane.submit("cluster", "--cpus", "2", "--wall-time", "5m", "--", "true")
    wait_until(lambda: lane.spec(waiting).get("scheduler_queued_reason"), 60)
    reason = lane.spec(waiting)["scheduler_queued_reason"]
    assert reason in ("Resources", "Priority") and lane.state(waiting) == "RUNNING"
    wide = Vq(lane.root, {**lane.env, "COLUMNS": "200"})

    listing = wide.run("list").stdout
    row = _line(listing, waiting)
    assert f"queued (slurm: {reason})" in row and "RUNNING" not in row, listing
    header = listing.splitlines()[0]
    elapsed_at = header.index("ELAPSED")
    assert row[elapsed_at:].split()[0] == "-", listing  # no running elapsed while queued
    blocking = _line(listing, blocker)
    assert re.search(r"\brunning\b", blocking) and "RUNNING" not in blocking, listing
    fleet = wide.run("queue", "--all").stdout  # the fleet table words the phase the same way
    fleet_row = next(line for line in fleet.splitlines() if waiting in line)
    assert f"queued (slurm: {reason})" in fleet_row and "RUNNING" not in fleet_row, fleet

    rows = {r["id"]: r for r in lane.json("list")["jobs"]}
    assert rows[waiting]["phase"] == "queued" and rows[waiting]["elapsed_seconds"] is None
    assert rows[waiting]["phase_label"] == f"queued (slurm: {reason})"
    assert rows[blocker]["phase"] == "running"
    started = lane.spec(blocker)["scheduler_started_at"]
    assert started is not None and started >= lane.spec(blocker)["started_at"]

    status = wide.run("status", waiting).stdout
    scheduler_id = lane.spec(waiting)["scheduler_job_id"]
    assert re.search(r"^lane\s+cluster \(slurm\)\s*$", status, re.M), status
    assert re.search(rf"^slurm job\s+{scheduler_id}\s*$", status, re.M), status
    assert re.search(r"^phase\s+queued\s*$", status, re.M), status
    assert re.search(rf"^queued reason\s+{reason}\s*$", status, re.M), status
    assert re.search(r"^cluster elapsed\s+\S+ of 5:00\s*$", status, re.M), status
    assert not re.search(r"^elapsed\s", status, re.M), status

    busy = wide.run("status", blocker).stdout
    assert re.search(r"^phase\s+running\s*$", busy, re.M), busy
    assert re.search(r"^exec host\s+\S+\s*$", busy, re.M), busy
    assert re.search(r"^elapsed\s+\S+\s*$", busy, re.M), busy

    # The console (Chromium) says the same, while the job still waits.
    console.goto("/")
    row = console.page.locator(f'tr[data-job-id="{waiting}"]')
    expect(row.locator(".phase")).to_have_text(f"queued (slurm: {reason})")
    expect(row.locator(".col-elapsed")).to_have_text("")
    busy_row = console.page.locator(f'tr[data-job-id="{blocker}"]')
    expect(busy_row.locator(".phase")).to_have_text("running")

    console.goto(f"/jobs/{waiting}")
    head = console.page.locator(".job-head")
    expect(head.locator(".phase")).to_have_text(f"queued (slurm: {reason})")
    scheduler = console.page.locator("dt:text-is('Scheduler') + dd")
    expect(scheduler).to_contain_text("cluster (slurm)")
    expect(scheduler).to_contain_text(f"phase queued · waiting: {reason}")
    expect(console.page.locator("dt:text-is('Elapsed')")).to_have_count(0)
    assert console.errors == []

    fleet = start_web(lane, tmp_path / "fleet-web.log", "--fleet")
    try:
        html = fleet.http.get("/fleet").text
    finally:
        stop_web(fleet)
    fleet_row = html[html.index(f'data-job-id="{waiting}"') :]
    fleet_row = fleet_row[: fleet_row.index("</tr>")]
    assert f"queued (slurm: {reason})" in fleet_row and 'data-lane="cluster"' in fleet_row

    assert _terminal(lane, blocker)["state"] == "COMPLETED"
    done = _terminal(lane, waiting)
    assert done["state"] == "COMPLETED" and done["scheduler_queued_reason"] is None
