"""Issue 30's trial, end to end: a scan array on the Slurm lane with a dependent collect step,
watched with ``vq list``, ``vq logs -f`` and the fleet console, read truthfully from
submit to result.

Real Slurm (the testbed's one two-CPU node) driven by this queue's daemon over real sshd.
A three-element array of one-CPU "calculations" (a Python stand-in for the trial's
PySCF single points: it prints its progress, works for a while, writes ``energy.txt``)
goes to the lane, so two elements run and the third waits in Slurm's queue. A local
collect step waits for the whole group (``--after GROUP``) and reads the scan through
``VQ_AFTER_WORKSPACES``. Along the way:

* ``vq list`` says the waiting element is ``queued (slurm: …)`` and a running one
  ``running`` (never a bare RUNNING for a lane job), and the fleet table says the same;
* ``vq logs -f`` on a running element shows its first line while the cluster still runs
  it, and its whole output exactly once at the end;
* the fleet console (Chromium) shows this workstation's card with the lane under it and
  every job of the scan with its HOST and LANE;
* the collect step's output holds the three energies in index order, and
  ``vq fetch --group`` brings every element's workspace home under its index.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.conftest import VQ_BIN, Vq, wait_until
from tests.system.conftest import open_console
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.system.test_scheduler_slurm import (
    _terminal,
    lane,  # noqa: F401 - the fixture
    scratch,  # noqa: F401 - the fixture
)
from tests.web.conftest import Web, start_web, stop_web

pytestmark = pytest.mark.timeout(300)

#: One single point of the scan: progress first, then work, then the result file.
CALCULATION = (
    "import os, sys, time\n"
    "i = int(os.environ['VQ_ARRAY_INDEX'])\n"
    "print(f'scf start {i}', flush=True)\n"
    "time.sleep(14)\n"
    "open('energy.txt', 'w').write(f'{-76.0 - i / 100:.2f}\\n')\n"
    "print(f'scf converged {i}', flush=True)\n"
)
COLLECT = 'printf "%s\\n" "$VQ_AFTER_WORKSPACES" | while read -r d; do cat "$d/energy.txt"; done'


@pytest.fixture
def fleet_web(lane: Vq, tmp_path: Path) -> Iterator[Web]:  # noqa: F811
    served = start_web(lane, tmp_path / "fleet-web.log", "--fleet")
    yield served
    stop_web(served)


def _row(listing: str, job_id: str) -> str:
    return next(line for line in listing.splitlines() if job_id in line)


def test_a_lane_scan_with_a_collect_step_reads_truthfully_from_submit_to_result(
    lane: Vq,  # noqa: F811
    fleet_web: Web,
    chromium: Browser,
    tmp_path: Path,
) -> None:
    submitted = lane.run(
        "submit", "cluster", "--array", "0-2", "--cpus", "1", "--wall-time", "5m",
        "--job-name", "scan", "--json", "--", "/usr/bin/python3", "-c", CALCULATION,
    )  # fmt: skip
    answer = json.loads(submitted.stdout)
    group = answer["array_group_id"]
    elements = [job["id"] for job in answer["jobs"]]
    assert len(elements) == 3
    collect = lane.submit("--after", group, "--job-name", "collect", "--", "sh", "-c", COLLECT)
    assert lane.spec(collect)["depends_on"] == elements  # the whole group, in index order

    # Two elements run on the two-CPU node; the third waits in Slurm's queue.
    wide = Vq(lane.root, {**lane.env, "COLUMNS": "200"})
    wait_until(lambda: lane.spec(elements[2]).get("scheduler_queued_reason"), 90)
    wait_until(lambda: lane.spec(elements[0]).get("scheduler_state") == "running", 60)
    follow = subprocess.Popen(
        [VQ_BIN, "logs", elements[0], "-f"],
        env=lane.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        listing = wide.run("list").stdout
        reason = lane.spec(elements[2])["scheduler_queued_reason"]
        assert f"queued (slurm: {reason})" in _row(listing, elements[2]), listing
        assert "running" in _row(listing, elements[0]), listing
        assert "RUNNING" not in _row(listing, elements[0]), listing
        fleet_table = wide.run("queue", "--all").stdout
        assert f"queued (slurm: {reason})" in _row(fleet_table, elements[2]), fleet_table

        # Live output: the first line while the cluster still runs the element.
        wait_until(lambda: "scf start 0" in lane.run("logs", elements[0]).stdout, 60)
        assert lane.state(elements[0]) == "RUNNING"
        assert "scf converged 0" not in lane.run("logs", elements[0]).stdout

        # The fleet console: this workstation's card, its lane, the scan's rows.
        with open_console(chromium, fleet_web) as fleet_console:
            fleet_console.goto("/fleet")
            page = fleet_console.page
            card = page.locator('section.host-card[data-host="localhost"]')
            expect(card.locator('li.lane[data-lane="cluster"]')).to_contain_text("slurm")
            for job in elements:
                row = page.locator(f'tr.job[data-job-id="{job}"]')
                expect(row.locator("td").nth(0)).to_have_text("localhost")
                expect(row.locator("td").nth(1)).to_have_text("cluster")
            collect_row = page.locator(f'tr.job[data-job-id="{collect}"]')
            expect(collect_row.locator("td").nth(1)).to_have_text("—")
            expect(collect_row).to_have_attribute("data-state", "PENDING")
            assert fleet_console.errors == []

        # To the result: every element, then the collect step.
        for job in elements:
            assert _terminal(lane, job, timeout=120)["state"] == "COMPLETED"
        followed, _ = follow.communicate(timeout=60)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    assert followed == "scf start 0\nscf converged 0\n"  # every line, exactly once
    assert _terminal(lane, collect)["state"] == "COMPLETED"
    assert lane.run("logs", collect).stdout == "-76.00\n-76.01\n-76.02\n"

    dest = tmp_path / "scan"
    lane.run("fetch", "--group", group, str(dest))
    for index in range(3):
        assert (dest / str(index) / "energy.txt").read_text() == f"{-76.0 - index / 100:.2f}\n"
