"""Fleet mode is opt-in: `--fleet`, `vq daemon start --web --fleet` or `[web] fleet = true`.

Real processes on a private state root with no hosts configured: the fleet routes exist
only in fleet mode, the health routes answer the same either way, and `--fleet` without
`--web` is a usage error.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Vq
from tests.web.conftest import start_web


def test_fleet_routes_exist_only_in_fleet_mode(vq: Vq, tmp_path: Path) -> None:
    plain = start_web(vq, tmp_path / "plain.log")
    try:
        assert plain.http.get("/api/v1/fleet/hosts").status_code == 404
        assert plain.http.get("/fleet").status_code == 404
        assert "/api/v1/fleet/hosts" not in plain.http.get("/api/v1/openapi.json").text
        assert 'href="/fleet"' not in plain.http.get("/").text
    finally:
        plain.http.close()
        plain.process.terminate()
        plain.process.wait(30)
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[web]\nfleet = true\n")
    fleet = start_web(vq, tmp_path / "fleet.log")
    try:
        hosts = fleet.http.get("/api/v1/fleet/hosts").json()["hosts"]
        assert [h["name"] for h in hosts] == ["localhost"]  # this queue, read in-process
        page = fleet.http.get("/fleet")
        assert page.status_code == 200 and "No remote hosts are configured" in page.text
        assert 'data-host="localhost"' in page.text
        assert 'href="/fleet"' in fleet.http.get("/").text
        assert fleet.http.get("/health/live").text == "ok"
        closed = fleet.http.post("/api/v1/fleet/jobs/h1/0123456789ab/kill")
        assert closed.status_code == 403
        assert closed.json()["error"]["code"] == "fleet-writes-closed"
    finally:
        fleet.http.close()
        fleet.process.terminate()
        fleet.process.wait(30)


def test_a_fleet_404_for_this_queues_own_name_agrees_with_its_hint(vq: Vq, tmp_path: Path) -> None:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    # h1 is configured but never contacted: neither name below reaches a host
    (config / "config.toml").write_text('[web]\nfleet = true\n[hosts.h1]\nssh = "h1.invalid"\n')
    web = start_web(vq, tmp_path / "fleet.log")
    try:
        answer = web.http.get("/api/v1/fleet/jobs/local/0123456789ab")
        assert answer.status_code == 404, answer.text
        error = answer.json()["error"]
        assert error["message"] == "'local' is this queue, not a configured remote host"
        assert error["hint"].startswith("configured remote hosts: h1;")
        # `localhost` is the fleet's name for this queue: its (unknown) job, not a host error
        here = web.http.get("/api/v1/fleet/jobs/localhost/0123456789ab")
        assert here.status_code == 404, here.text
        assert "not a configured remote host" not in here.json()["error"]["message"]
        unknown = web.http.get("/api/v1/fleet/jobs/gpu9/0123456789ab").json()["error"]
        assert unknown["message"] == "no host named 'gpu9' is configured"
        assert unknown["hint"] == "configured remote hosts: h1 (localhost is this queue)"
    finally:
        web.http.close()
        web.process.terminate()
        web.process.wait(30)
