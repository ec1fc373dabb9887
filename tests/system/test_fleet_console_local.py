"""The fleet console includes this workstation (issue 30, item 5), in Chromium.

A real ``vq web serve --fleet`` over a private state root whose configuration has one
Slurm lane driven by this queue and no remote host: ``/fleet`` shows a ``localhost``
card with the lane under it, and the fleet queue has HOST and LANE columns for every
job, this queue's plain and lane jobs included (no daemon runs: the jobs stay PENDING,
and nothing contacts the lane's login host).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.conftest import Vq
from tests.system.conftest import open_console
from tests.web.conftest import Web, start_web, stop_web

LANE = """
[hosts.cluster]
ssh = "me@login.invalid"
scheduler_dialect = "slurm"
scratch_root = "/scratch/me"
scheduler_driver = "localhost"
"""


@pytest.fixture
def fleet_web(vq: Vq, tmp_path: Path) -> Iterator[Web]:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(mode=0o700, parents=True, exist_ok=True)
    (config / "config.toml").write_text(LANE)
    served = start_web(vq, tmp_path / "web.log", "--fleet")
    yield served
    stop_web(served)


def test_the_fleet_shows_localhost_its_lane_and_host_and_lane_columns(
    vq: Vq,
    fleet_web: Web,
    chromium: Browser,
) -> None:
    plain = vq.submit("--job-name", "here-plain", "--", "true")
    on_lane = vq.submit("cluster", "--job-name", "on-lane", "--", "true")
    with open_console(chromium, fleet_web) as fleet_console:
        page = fleet_console.page
        fleet_console.goto("/fleet")
        card = page.locator('section.host-card[data-host="localhost"]')
        expect(card).to_have_count(1)
        expect(card.locator(".row .host-status")).to_have_text("ok")
        lane = card.locator('li.lane[data-lane="cluster"]')
        expect(lane).to_contain_text("cluster")
        expect(lane).to_contain_text("slurm")
        expect(lane.locator('[data-lane-count="tracked"]')).to_have_text("1")
        headers = page.locator("table.fleet-jobs thead th")
        expect(headers.nth(0)).to_have_text("Host")
        expect(headers.nth(1)).to_have_text("Lane")
        plain_row = page.locator(f'tr.job[data-job-id="{plain}"]')
        lane_row = page.locator(f'tr.job[data-job-id="{on_lane}"]')
        expect(plain_row.locator("td").nth(0)).to_have_text("localhost")
        expect(plain_row.locator("td").nth(1)).to_have_text("—")
        expect(lane_row.locator("td").nth(0)).to_have_text("localhost")
        expect(lane_row.locator("td").nth(1)).to_have_text("cluster")
        expect(lane_row).to_have_attribute("data-state", "PENDING")
        # a job of this queue opens its single-host page
        lane_row.locator("td.name a").click()
        page.wait_for_url(f"{fleet_web.base_url}/jobs/{on_lane}")
        expect(page.locator("h1")).to_contain_text("on-lane")
        # the API says the same
        hosts = fleet_web.http.get("/api/v1/fleet/hosts").json()["hosts"]
        assert [h["name"] for h in hosts] == ["localhost"]
        assert [lane["name"] for lane in hosts[0]["lanes"]] == ["cluster"]
        queue = fleet_web.http.get("/api/v1/fleet/queue").json()
        rows = {row["id"]: (row["host"], row["lane"]) for row in queue["jobs"]}
        assert rows == {plain: ("localhost", None), on_lane: ("localhost", "cluster")}
        assert fleet_console.errors == []
