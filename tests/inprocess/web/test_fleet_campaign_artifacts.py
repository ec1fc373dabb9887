"""The console's campaign page checks each published artifact again, as `vq campaign
status` does: a tampered one is shown tampered, never verified (real daemon, real
`vq campaign run`, the fleet console in-process)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import Vq
from tests.inprocess.integration.test_campaign_run import make_campaign, run
from tests.web.conftest import start_web, stop_web


def _outputs(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-output="([^"]+)" data-status="([^"]+)"', html))


def test_the_campaign_page_shows_a_tampered_artifact_as_tampered(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon()
    path = make_campaign(tmp_path, vq)
    run_dir = tmp_path / "run"
    assert run(vq, path, run_dir)["status"] == "succeeded"
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[web]\nfleet = true\n")
    served = start_web(vq, tmp_path / "web.log")
    try:
        page = served.http.get("/fleet/fragments/campaigns/h2o")
        assert page.status_code == 200
        assert _outputs(page.text) == {
            "result": "verified",
            "verdict": "verified",
            "figure": "verified",
        }
        energy = run_dir / "artifacts" / "calculate" / "1" / "result" / "energy.txt"
        energy.write_text(energy.read_text().replace("-76.02", "-76.03"))
        page = served.http.get("/fleet/fragments/campaigns/h2o")
        assert _outputs(page.text)["result"] == "tampered"
        assert "published output result is tampered" in page.text
        assert "energy.txt" in page.text
    finally:
        stop_web(served)
