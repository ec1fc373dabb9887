"""The web console in a real browser (Chromium via Playwright) over a real daemon.

Each test drives `vq web serve` and `vq daemon` as a user would: jobs are submitted with
the CLI, the page is watched as htmx refreshes it, and outcomes are checked on disk.
Screenshots (desktop 1280 px and phone 390 px) land in build/screenshots/.
"""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.conftest import Vq, wait_until
from tests.system.conftest import PHONE, Console

MARKER = "window.__vqNoReload"


def samples_recorded(vq: Vq, job: str) -> int:
    path = vq.root / "jobs" / job / "_vq" / "samples.jsonl"
    try:
        return len([line for line in path.read_text().splitlines() if line.strip()])
    except OSError:
        return 0


def test_queue_updates_in_place_from_running_to_completed(vq: Vq, console: Console) -> None:
    vq.start_daemon()
    console.goto("/")
    page = console.page
    expect(page.locator("h1")).to_have_text("Queue")
    page.evaluate(f"{MARKER} = 'same page'")

    job = vq.submit("--job-name", "short-sleep", "--", "sleep", "4")
    row = page.locator(f'tr[data-job-id="{job}"]')
    expect(row).to_have_attribute("data-state", "RUNNING", timeout=15_000)
    expect(row.locator(".badge")).to_have_text("RUNNING")
    expect(row).to_have_attribute("data-state", "COMPLETED", timeout=20_000)
    expect(page.locator('[data-count="COMPLETED"]')).to_have_text("1", timeout=10_000)

    assert page.evaluate(MARKER) == "same page", "the page was reloaded"
    assert vq.state(job) == "COMPLETED"
    assert console.errors == []


def test_job_page_draws_memory_and_cpu_chart(vq: Vq, console: Console) -> None:
    vq.start_daemon()
    # a varied queue for the screenshots: done, failed, an array, one over capacity
    vq.submit("--job-name", "prepare-inputs", "--tag", "prep", "--", "true")
    vq.submit(
        "--job-name", "broken-step", "--tag", "prep", "--", "sh", "-c", "echo oops >&2; exit 2"
    )
    vq.run("submit", "--array", "1-3", "--job-name", "sweep", "--tag", "sweep", "--", "true")
    vq.submit("--job-name", "too-big", "--cpus", "4096", "--", "true")
    hog = (
        "import time; block = bytearray(50 * 1024 * 1024); block[::4096] = b'x' * 12800;"
        " print('allocated 50 MB', flush=True); time.sleep(11); print('done')"
    )
    job = vq.submit(
        "--job-name", "memory-hog", "--mem-mb", "200", "--tag", "demo", "--", "python3", "-c", hog
    )
    vq.wait_state(job, "RUNNING")
    wait_until(lambda: samples_recorded(vq, job) >= 2, timeout=30)

    console.goto(f"/jobs/{job}")
    page = console.page
    chart = page.locator("#usage-chart")
    expect(chart).to_have_attribute("data-drawn", "1")
    expect(chart.locator("canvas")).to_have_count(1)
    points = int(chart.get_attribute("data-points") or "0")
    assert points >= 2
    expect(chart.locator(".u-legend")).to_contain_text("memory limit")
    expect(page.locator("pre.log[data-stream=stdout]")).to_contain_text("allocated 50 MB")
    console.screenshot("job-desktop")

    vq.wait_state(job, "COMPLETED", timeout=30)
    page.locator("#log-stdout a.refresh").click()  # the htmx refresh of the tail
    expect(page.locator("pre.log[data-stream=stdout]")).to_contain_text("done")
    expect(page.locator("#job-live .badge").first).to_have_text("COMPLETED", timeout=10_000)

    page.set_viewport_size(PHONE)
    page.reload()
    expect(page.locator("#usage-chart")).to_have_attribute("data-drawn", "1")
    console.screenshot("job-phone")

    page.set_viewport_size({"width": 1280, "height": 900})
    console.goto("/")
    expect(page.locator("tr.group")).to_have_count(1)
    console.screenshot("queue-desktop")
    page.set_viewport_size(PHONE)
    page.reload()
    console.screenshot("queue-phone")
    page.set_viewport_size({"width": 1280, "height": 900})
    console.goto("/overview")
    expect(page.locator("#usage-by-day")).to_have_attribute("data-drawn", "1")
    expect(page.locator("#queue-over-time")).to_have_attribute("data-drawn", "1")
    console.screenshot("overview-varied-desktop")
    assert console.errors == []


def test_operator_kills_a_running_job_from_its_page(vq: Vq, console: Console) -> None:
    vq.run(
        "web", "user", "add", "op", "--role", "operator", "--password-stdin", input="op-pass-123\n"
    )
    vq.start_daemon()
    job = vq.submit("--job-name", "long-runner", "--", "sleep", "120")
    vq.wait_state(job, "RUNNING")

    console.sign_in("op", "op-pass-123", then=f"/jobs/{job}")
    page = console.page
    dialogs: list[str] = []

    def accept(dialog: object) -> None:
        dialogs.append(dialog.message)  # type: ignore[attr-defined]
        dialog.accept()  # type: ignore[attr-defined]

    page.on("dialog", accept)
    expect(page.locator(".nojs-confirm").first).to_be_hidden()  # scripts confirm instead
    console.screenshot("job-operator-desktop")
    page.locator('button[data-action="kill"]').click()
    expect(page.locator("#action-outcome")).to_contain_text("killed")
    assert dialogs and "long-runner" in dialogs[0]
    assert vq.wait_state(job, "KILLED") == "KILLED"
    expect(page.locator("#job-live .badge").first).to_have_text("KILLED", timeout=10_000)
    expect(page.locator('button[data-action="resubmit"]')).to_be_visible(timeout=10_000)
    console.goto("/")
    expect(page.locator("section.controls")).to_be_visible()
    console.screenshot("queue-operator-desktop")
    assert console.errors == []


def test_viewer_sees_no_controls_and_is_refused(vq: Vq, console: Console) -> None:
    vq.run(
        "web", "user", "add", "vw", "--role", "viewer", "--password-stdin", input="vw-pass-123\n"
    )
    vq.start_daemon()
    job = vq.submit("--job-name", "watched", "--", "sleep", "120")
    vq.wait_state(job, "RUNNING")

    console.goto(f"/jobs/{job}")  # not signed in: sent to the sign-in page
    assert re.search(r"/login\?next=", console.page.url)
    console.sign_in("vw", "vw-pass-123", then=f"/jobs/{job}")
    page = console.page
    expect(page.locator("#job-live .badge").first).to_have_text("RUNNING")
    expect(page.locator('button[data-action="kill"]')).to_have_count(0)
    expect(page.locator(".who")).to_contain_text("vw")
    token = page.locator("header input[name=csrf_token]").get_attribute("value")
    assert token

    refused = page.request.post(
        console.url(f"/actions/jobs/{job}/kill"), form={"csrf_token": token, "confirm": "yes"}
    )
    assert refused.status == 403
    assert vq.state(job) == "RUNNING"
    assert console.errors == []
