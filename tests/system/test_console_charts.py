"""The console's charts in a real browser (Chromium via Playwright) over a real daemon.

* The job page's memory/CPU chart follows a running job: charts.js refetches
  ``/api/v1/jobs/{id}/samples`` and redraws in place, so ``data-points`` grows while a
  window marker set before proves the page was never reloaded; it stops once the job
  ends. Hovering the plot shows the sample's values and its UTC time in the legend.
* The overview draws the queue over the last 24 h and the jobs ended per hour.
* With scripts off, both pages still show their numbers and no empty chart boxes.

Screenshots (desktop 1280 px, phone 390 px) land in build/screenshots/.
"""

from __future__ import annotations

import re

from playwright.sync_api import Browser, expect

from tests.conftest import Vq, wait_until
from tests.system.conftest import DESKTOP, PHONE, SCREENSHOTS, Console
from tests.web.conftest import Web

MARKER = "window.__vqNoReload"
# 8 steps of +10 MB, 2 s apart: about 16 s of a growing RSS.
GROWING = (
    "import time\n"
    "blocks = []\n"
    "for i in range(8):\n"
    "    block = bytearray(10 * 1024 * 1024); block[::4096] = b'x' * 2560; blocks.append(block)\n"
    "    print(f'holding {10 * (i + 1)} MB', flush=True); time.sleep(2)\n"
)


# About 60 MB held across a couple of samples, then 600 MB at once: the watchdog's 1 s scan
# kills it over its 400 MB limit well before the next 5 s sample.
SPIKE = (
    "import time\n"
    "small = bytearray(60 * 1024 * 1024); small[::4096] = b'x' * 15360\n"
    "print('holding 60 MB', flush=True); time.sleep(7)\n"
    "big = bytearray(600 * 1024 * 1024); big[::4096] = b'x' * 153600\n"
    "print('holding 660 MB', flush=True); time.sleep(60)\n"
)


def samples_recorded(vq: Vq, job: str) -> int:
    path = vq.root / "jobs" / job / "_vq" / "samples.jsonl"
    try:
        return len([line for line in path.read_text().splitlines() if line.strip()])
    except OSError:
        return 0


def points(console: Console) -> int:
    return int(console.page.locator("#usage-chart").get_attribute("data-points") or "0")


def test_job_chart_grows_while_the_job_runs_without_a_reload(vq: Vq, console: Console) -> None:
    vq.start_daemon()
    job = vq.submit(
        "--job-name", "growing", "--mem-mb", "300", "--tag", "demo", "--", "python3", "-c", GROWING
    )
    vq.wait_state(job, "RUNNING")
    console.goto(f"/jobs/{job}")
    page = console.page
    chart = page.locator("#usage-chart")
    page.evaluate(f"{MARKER} = 'same page'")
    expect(chart).to_have_attribute("data-live", "1")
    first = points(console)
    assert first < 3, "the job had just started: the chart must grow from here"

    wait_until(lambda: points(console) >= 2, timeout=30)
    expect(chart).to_have_attribute("data-drawn", "1")
    expect(chart.locator("canvas")).to_have_count(1)
    seen = points(console)
    wait_until(lambda: points(console) > seen, timeout=30)
    assert points(console) >= 3
    assert page.evaluate(MARKER) == "same page", "the page was reloaded"
    stats = page.locator(".panel.samples .chart-stats")
    expect(stats.locator('[data-stat="count"]')).not_to_have_text(str(first))
    expect(stats.locator('[data-stat="latest-rss"]')).to_have_text(re.compile(r"^\d+\.\d MB$"))

    legend = chart.locator(".u-legend")
    expect(legend).to_contain_text("memory limit")
    box = chart.locator(".u-over").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
    expect(legend.locator(".u-series").first).to_contain_text(
        re.compile(r"\d\d:\d\d:\d\d · \+\d+:\d\d")
    )
    expect(legend).to_contain_text(re.compile(r"RSS\s*\d+\.\d MB"))
    expect(legend).to_contain_text(re.compile(r"CPU\s*(\d+\.\d %|—)"))
    page.mouse.move(0, 0)
    console.screenshot("job-running-desktop")
    page.set_viewport_size(PHONE)
    expect(page.locator("#usage-chart canvas")).to_have_count(1)
    wait_until(lambda: page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"])
    console.screenshot("job-running-phone")
    page.set_viewport_size(DESKTOP)

    vq.wait_state(job, "COMPLETED", timeout=40)
    expect(page.locator("#job-live .badge").first).to_have_text("COMPLETED", timeout=10_000)
    expect(chart).to_have_attribute("data-live", "0", timeout=15_000)  # polling stopped
    final = points(console)
    assert final >= 3
    assert page.evaluate(MARKER) == "same page", "the page was reloaded"
    assert console.errors == []


def test_overview_draws_the_queue_over_time(vq: Vq, console: Console) -> None:
    vq.start_daemon()
    done = vq.submit("--job-name", "prepare", "--tag", "prep", "--", "true")
    broken = vq.submit("--job-name", "broken", "--tag", "prep", "--", "sh", "-c", "exit 2")
    running = vq.submit("--job-name", "long", "--tag", "train", "--", "sleep", "60")
    waiting = vq.submit("--job-name", "too-big", "--cpus", "4096", "--", "true")
    vq.wait_state(running, "RUNNING")
    assert vq.state(waiting) == "PENDING"
    vq.wait_state(done, "COMPLETED")
    vq.wait_state(broken, "FAILED")

    console.goto("/overview")
    page = console.page
    queue = page.locator("#queue-over-time")
    expect(queue).to_have_attribute("data-drawn", "1")
    assert int(queue.get_attribute("data-points") or "0") > 90  # 15-minute buckets over 24 h
    legend = queue.locator(".u-legend")
    expect(legend).to_contain_text(re.compile(r"running\s*1"))  # the latest values, idle
    expect(legend).to_contain_text(re.compile(r"pending\s*1"))
    ended = page.locator("#ended-per-hour")
    expect(ended).to_have_attribute("data-drawn", "1")
    expect(ended.locator(".u-legend")).to_contain_text("failed or killed")
    stats = page.locator(".queue-time .chart-stats")
    expect(stats).to_contain_text("Now 1 running, 1 pending")
    console.screenshot("overview-desktop")
    page.set_viewport_size(PHONE)
    page.reload()
    expect(queue).to_have_attribute("data-drawn", "1")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    console.screenshot("overview-phone")
    assert console.errors == []


def test_pages_keep_their_numbers_with_scripts_off(vq: Vq, chromium: Browser, web: Web) -> None:
    vq.start_daemon()
    job = vq.submit("--job-name", "quiet", "--mem-mb", "64", "--", "sleep", "30")
    vq.wait_state(job, "RUNNING")
    wait_until(lambda: samples_recorded(vq, job) >= 1, timeout=30)
    context = chromium.new_context(viewport=PHONE, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"{web.base_url}/jobs/{job}")
        expect(page.locator(".panel.samples .chart-stats")).to_contain_text("Limit 64 MB")
        expect(page.locator("canvas")).to_have_count(0)
        chart = page.locator("#usage-chart").bounding_box()
        assert chart is not None and chart["height"] < 120  # no blank box where a chart was
        page.goto(f"{web.base_url}/overview")
        expect(page.locator(".queue-time .chart-stats")).to_contain_text("Now 1 running")
        expect(page.locator("canvas")).to_have_count(0)
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "overview-nojs-phone.png"), full_page=True)
    finally:
        context.close()


def test_oom_page_marks_the_watchdogs_killing_reading(vq: Vq, console: Console) -> None:
    """Issue 30 item 11: the failure's reading ("rss 6xx MB exceeded the 400 MB limit")
    is drawn on the chart and named in its caption, which says samples are periodic."""
    vq.start_daemon()
    job = vq.submit("--job-name", "spike", "--mem-mb", "400", "--", "python3", "-c", SPIKE)
    vq.wait_state(job, "OOM_KILLED", timeout=60)
    spec = vq.json("status", job)
    reading = spec["watchdog_evidence"]["rss_mb"]
    assert reading > 400 and spec["watchdog_evidence"]["limit_mb"] == 400
    assert f"rss {reading:.0f} MB exceeded the 400 MB limit" in spec["failure_reason"]
    wait_until(lambda: samples_recorded(vq, job) >= 1, timeout=10)

    console.goto(f"/jobs/{job}")
    page = console.page
    caption = page.locator(".panel.samples .chart-caption")
    expect(caption).to_contain_text("Sampled every 5 s")
    expect(caption).to_contain_text(
        f"the watchdog's reading that stopped the job: {reading:.0f} MB (limit 400 MB)"
    )
    chart = page.locator("#usage-chart")
    expect(chart).to_have_attribute("data-drawn", "1")
    expect(chart).to_have_attribute("data-kill-rss-mb", re.compile(r"^\d+(\.\d+)?$"))
    assert float(chart.get_attribute("data-kill-rss-mb") or "0") == reading
    expect(chart.locator(".uplot")).to_have_attribute(
        "data-kill-label", f"watchdog reading that stopped the job: {round(reading)} MB"
    )
    legend = chart.locator(".u-legend")
    expect(legend).to_contain_text(
        re.compile(rf"watchdog reading that stopped the job\s*{reading:.0f} MB")
    )
    expect(legend).to_contain_text("memory limit")
    # The sampled peak stays what the samples saw; the killing reading is above it.
    peak = page.locator('.panel.samples [data-stat="peak-rss"]').inner_text()
    assert float(peak.split()[0]) < reading
    body = page.locator("body").inner_text()
    for words in ("Written when the job's command ends", "No samples yet", "Empty so far"):
        assert words not in body, words
    console.screenshot("job-oom-desktop")
    assert console.errors == []
