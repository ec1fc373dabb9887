"""The queue page on a phone (390 px): nothing overflows the viewport sideways.

Only the jobs table may be wider than the screen, and then only inside its own scroll
box (``.table-wrap``). Checked with the real layout in Chromium, signed in as admin so
the capacity panel shows every action form; screenshots go to build/screenshots/.
"""

from __future__ import annotations

from playwright.sync_api import expect

from tests.conftest import Vq
from tests.system.conftest import PHONE, Console

#: Elements (outside the table's scroll box) whose right edge passes the viewport.
OVERFLOWING = """
() => {
  const width = document.documentElement.clientWidth;
  const out = [];
  for (const el of document.querySelectorAll("body *")) {
    if (el.closest(".table-wrap")) continue;
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    if (box.right > width + 0.5 || box.left < -0.5) {
      const name = `${el.tagName.toLowerCase()}.${el.className}`;
      out.push(`${name} ${Math.round(box.left)}..${Math.round(box.right)}`);
    }
  }
  return out;
}
"""


def test_queue_page_fits_a_phone(vq: Vq, console: Console) -> None:
    long_name = "a-rather-long-job-name-that-does-not-break-" * 2
    vq.submit("--job-name", long_name, "--tag", "preprocessing-long-tag", "--", "true")
    vq.run("submit", "--array", "1-3", "--job-name", "sweep", "--tag", "sweep", "--", "true")
    vq.submit("--job-name", "too-big", "--cpus", "4096", "--mem-mb", "900000", "--", "true")
    console.context.set_extra_http_headers(console.web.admin())
    page = console.page
    page.set_viewport_size(PHONE)
    console.goto("/")
    expect(page.locator("form[action='/actions/queue/cleanup']")).to_be_visible()
    expect(page.locator("tr.group")).to_have_count(1)
    console.screenshot("queue-phone-admin")

    assert page.evaluate(OVERFLOWING) == []
    scroll = page.evaluate("() => document.documentElement.scrollWidth")
    assert scroll <= PHONE["width"], scroll
    wrap = page.locator(".table-wrap").first
    assert page.evaluate("el => getComputedStyle(el).overflowX", wrap.element_handle()) in (
        "auto",
        "scroll",
    )
    assert console.errors == []
