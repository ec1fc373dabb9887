"""The job page tells its two peak-RSS figures apart."""

from __future__ import annotations

from tests.conftest import Vq, wait_until
from tests.web.conftest import Web


def test_sampled_and_receipt_peak_rss_are_labelled(vq: Vq, web: Web) -> None:
    vq.start_daemon()
    job = vq.submit("--", "true")
    vq.wait_state(job, "COMPLETED")
    wait_until(lambda: (vq.root / "jobs" / job / "_vq" / "resource-usage.json").exists())
    html = web.http.get(f"/jobs/{job}").text
    assert "Peak RSS, sampled (whole group)" in html
    assert "Peak RSS, receipt (largest process)" in html
