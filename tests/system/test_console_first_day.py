"""First-day console fixes, in Chromium over a real daemon (screenshots in build/screenshots/).

* Pause and Resume update the header badge, the State row and the timeline with the
  action's answer, well before the 3 s poll would.
* The memory-limit line of the job chart carries its own label (memory, left axis).
* A running job's stdout panel shows its newest lines (scrolled to the bottom).
* At 390 px the queue keeps each job's id, elapsed time and exit code on screen.
* The login page's token heading has room above it.
"""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.conftest import Vq, wait_until
from tests.system.conftest import PHONE, Console

#: The live fragment polls every 3 s; acting right after a poll, an update within this is
#: the action's own.
ACT_WITHIN_MS = 1200


def _operator(vq: Vq, console: Console, then: str) -> None:
    vq.run(
        "web", "user", "add", "op", "--role", "operator", "--password-stdin", input="op-pass-123\n"
    )
    console.sign_in("op", "op-pass-123", then=then)


def test_pause_and_resume_update_the_page_at_once(vq: Vq, console: Console) -> None:
    vq.start_daemon()
    job = vq.submit("--job-name", "pausable", "--", "sleep", "120")
    vq.wait_state(job, "RUNNING")
    _operator(vq, console, f"/jobs/{job}")
    page = console.page
    live = page.locator("#job-live")
    expect(live).to_have_attribute("data-state", "RUNNING")
    with page.expect_response(lambda r: "/live?" in r.url, timeout=10_000):
        pass  # a poll just answered: the next one is 3 s away
    page.locator('button[data-action="pause"]').click()
    expect(live).to_have_attribute("data-state", "SUSPENDED", timeout=ACT_WITHIN_MS)
    expect(page.locator(".job-head .badge")).to_have_text("SUSPENDED", timeout=ACT_WITHIN_MS)
    expect(page.locator("dl.spec dd").filter(has_text="paused by operator")).to_have_count(1)
    expect(page.locator("ol.timeline")).to_contain_text(re.compile("suspended", re.I))
    console.screenshot("job-paused-desktop")
    with page.expect_response(lambda r: "/live?" in r.url, timeout=10_000):
        pass
    page.locator('button[data-action="resume"]').click()
    expect(live).to_have_attribute("data-state", "RUNNING", timeout=ACT_WITHIN_MS)
    expect(page.locator(".job-head .badge")).to_have_text("RUNNING")
    expect(page.locator('button[data-action="pause"]')).to_be_visible()
    vq.run("kill", job)
    assert console.errors == []


def test_memory_limit_line_is_labelled_as_memory(vq: Vq, console: Console) -> None:
    vq.start_daemon()
    script = "import time; b = bytearray(30 * 1024 * 1024); b[::4096] = b'x' * 7680; time.sleep(60)"
    job = vq.submit("--mem-mb", "200", "--", "python3", "-c", script)
    vq.wait_state(job, "RUNNING")
    samples = vq.root / "jobs" / job / "_vq" / "samples.jsonl"
    wait_until(lambda: samples.exists() and len(samples.read_text().splitlines()) >= 2, 30)
    console.context.set_extra_http_headers(console.web.admin())
    console.goto(f"/jobs/{job}")
    chart = console.page.locator("#usage-chart")
    expect(chart).to_have_attribute("data-drawn", "1")
    expect(chart.locator(".uplot")).to_have_attribute("data-limit-label", "memory limit 200 MB")
    expect(chart.locator(".u-legend")).to_contain_text("memory limit (MB, left axis)")
    expect(chart.locator(".u-axis").nth(1)).to_be_visible()
    console.screenshot("job-memory-limit-desktop")
    vq.run("kill", job)
    assert console.errors == []


def test_running_job_log_shows_the_newest_lines(vq: Vq, console: Console) -> None:
    vq.start_daemon()
    script = "for i in $(seq 1 400); do echo line-$i; done; sleep 60"
    job = vq.submit("--", "sh", "-c", script)
    stdout = vq.root / "jobs" / job / "stdout.log"
    wait_until(lambda: stdout.exists() and "line-400" in stdout.read_text(), 30)
    console.context.set_extra_http_headers(console.web.admin())
    console.goto(f"/jobs/{job}")
    log = console.page.locator('pre.log[data-stream="stdout"]')
    expect(log).to_contain_text("line-400")
    at_bottom = (
        "el => el.scrollHeight > el.clientHeight"
        " && el.scrollTop + el.clientHeight >= el.scrollHeight - 2"
    )
    wait_until(lambda: log.evaluate(at_bottom), 5)
    console.page.locator("#log-stdout a.refresh").click()  # a refreshed log: bottom again
    wait_until(lambda: log.evaluate(at_bottom), 5)
    console.screenshot("job-log-bottom-desktop")
    vq.run("kill", job)
    assert console.errors == []


def test_phone_queue_keeps_id_elapsed_and_exit_visible(vq: Vq, console: Console) -> None:
    vq.start_daemon()
    name = "a-long-job-name-for-a-narrow-phone-screen"
    job = vq.submit("--job-name", name, "--tag", "t", "--", "sh", "-c", "exit 3")
    vq.wait_state(job, "FAILED")
    console.context.set_extra_http_headers(console.web.admin())
    page = console.page
    page.set_viewport_size(PHONE)
    console.goto("/")
    row = page.locator(f'tr.job[data-job-id="{job}"]')
    console.screenshot("queue-phone-columns")
    wrap = page.locator(".table-wrap").first.bounding_box()
    assert wrap is not None and wrap["x"] + wrap["width"] <= PHONE["width"]
    for cell in ("td.col-id", "td.col-elapsed", "td.col-exit"):
        box = row.locator(cell).bounding_box()  # inside the visible part of the table box
        assert box is not None and box["width"] > 0, cell
        assert box["x"] >= wrap["x"] and box["x"] + box["width"] <= wrap["x"] + wrap["width"], (
            cell,
            box,
            wrap,
        )
    expect(row.locator("td.col-id")).to_have_text(job)
    expect(row.locator("td.col-exit")).to_have_text("3")
    assert console.errors == []


def test_login_token_heading_has_room(vq: Vq, console: Console) -> None:
    vq.run(
        "web", "user", "add", "op", "--role", "operator", "--password-stdin", input="op-pass-123\n"
    )
    page = console.page
    for size, label in ((PHONE, "phone"), ({"width": 1280, "height": 900}, "desktop")):
        page.set_viewport_size(size)
        console.goto("/login")
        heading = page.locator("h2", has_text="admin web token")
        above = page.locator("form.stack").first.bounding_box()
        box = heading.bounding_box()
        assert above is not None and box is not None
        assert box["y"] - (above["y"] + above["height"]) >= 24, (label, above, box)
        assert box["x"] + box["width"] <= size["width"]
        console.screenshot(f"login-{label}")
    assert console.errors == []
