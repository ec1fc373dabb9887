"""The console's capacity bars in a real browser (Chromium): scheduler lane jobs run on a
cluster, so the CPU, memory and job bars never count them against this workstation's
caps (the trial's red "5 / 2" bar), and the panel says where they are instead."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.conftest import Vq
from tests.lane_capacity_support import write_lane_jobs
from tests.system.conftest import Console


def test_the_capacity_bars_never_count_lane_jobs(vq: Vq, console: Console) -> None:
    write_lane_jobs(vq)  # 3 cpus queued in Slurm, 2 confirmed running, one ended
    vq.start_daemon("--max-cpus", "2")
    console.goto("/")
    page = console.page
    cpus = page.locator('.cap[data-resource="CPUs"]')
    expect(cpus.locator(".bar-label")).to_contain_text("0", timeout=15_000)
    label = " ".join(cpus.locator(".bar-label").inner_text().split())
    assert label == "CPUs 0 / 2", label
    bar = cpus.locator("svg.bar")
    assert "full" not in (bar.get_attribute("class") or "")
    assert bar.get_attribute("aria-label") == "CPUs 0 percent used"
    jobs = " ".join(page.locator('.cap[data-resource="Jobs"] .bar-label').inner_text().split())
    assert jobs.startswith("Jobs 0 /"), jobs
    lanes = page.locator(".lane-use")
    expect(lanes).to_contain_text("2 lane job(s), 5 CPUs on clusters")
    expect(lanes).to_contain_text("not counted against this host's capacity")
    expect(page.locator('[data-count="RUNNING"]')).to_have_text("2")  # still shown as jobs
    assert console.errors == []
