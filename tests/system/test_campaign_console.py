"""The campaign pages of the fleet console in Chromium, following a live `vq campaign run`.

A real daemon and a real `vq web serve` in fleet mode on one private state root; the
controller runs through the real CLI in the background.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.conftest import VQ_BIN, Vq, wait_until
from tests.inprocess.integration.test_campaign_run import make_campaign
from tests.system.conftest import DESKTOP, Console, chromium  # noqa: F401 - the fixture
from tests.web.conftest import Web, start_web, stop_web


@pytest.fixture
def fleet_web(vq: Vq, tmp_path: Path) -> Iterator[Web]:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[web]\nfleet = true\n")
    served = start_web(vq, tmp_path / "web.log")
    yield served
    stop_web(served)


@pytest.fixture
def console(chromium: Browser, fleet_web: Web) -> Iterator[Console]:  # noqa: F811
    context = chromium.new_context(viewport=DESKTOP)
    context.set_default_timeout(20_000)
    session = Console(fleet_web, context, context.new_page())
    session.page.on("pageerror", lambda exc: session.errors.append(str(exc)))
    yield session
    context.close()


def test_the_campaign_page_follows_a_live_run(vq: Vq, console: Console, tmp_path: Path) -> None:
    vq.start_daemon()
    gate = tmp_path / "gate"
    path = make_campaign(
        tmp_path, vq, calculate=f"while [ ! -e {gate} ]; do sleep 0.1; done; echo -76.02"
    )
    run_dir = tmp_path / "run"
    controller = subprocess.Popen(
        [VQ_BIN, "campaign", "run", str(path), str(run_dir), "--interval", "0.2"],
        env=vq.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: (run_dir / "journal.json").exists(), 30)
        console.goto("/fleet/campaigns")
        page = console.page
        row = page.locator('tr[data-campaign="h2o"]')
        expect(row).to_have_attribute("data-status", "running")
        row.locator("a").click()
        page.wait_for_url(console.url("/fleet/campaigns/h2o"))
        graph = page.locator("svg.campaign-graph")
        calculate = graph.locator('g[data-node="calculate"]')
        expect(calculate).to_have_attribute("data-status", "running", timeout=20_000)
        expect(graph.locator('g[data-node="render"]')).to_have_attribute("data-status", "waiting")
        # success edges solid, the completion edge to cleanup dashed
        dashed = graph.locator('path.edge[data-on="completion"]')
        expect(dashed).to_have_count(1)
        expect(dashed).to_have_attribute("stroke-dasharray", "6 4")
        assert dashed.get_attribute("data-to") == "cleanup"
        solid = graph.locator('path.edge[data-on="success"]')
        expect(solid).to_have_count(3)
        assert all(line.get_attribute("stroke-dasharray") is None for line in solid.all())
        job_link = page.locator('tr[data-node="calculate"] a.job-link')
        expect(job_link).to_have_attribute("href", f"/jobs/{job_link.inner_text()}")
        page.evaluate("window.__same_page = true")

        gate.write_text("go")  # the run finishes; the page follows without a reload
        status = page.locator("#campaign-status")
        expect(status).to_have_attribute("data-status", "succeeded", timeout=60_000)
        for node in ("calculate", "validate", "render", "cleanup"):
            expect(graph.locator(f'g[data-node="{node}"]')).to_have_attribute(
                "data-status", "succeeded"
            )
        verified = page.locator('tr[data-node="render"] [data-output="figure"]')
        expect(verified).to_have_attribute("data-status", "verified")
        assert page.evaluate("window.__same_page") is True, "the page was reloaded"
        console.screenshot("campaign-succeeded")
        assert console.errors == []
        assert controller.wait(timeout=60) == 0
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()
