"""/api/v1 read routes against a real daemon running real jobs, through a real server."""

from __future__ import annotations

from tests.conftest import Vq
from tests.web.conftest import Web


def test_queue_cockpit_overview_and_usage(vq: Vq, web: Web) -> None:
    off = web.http.get("/api/v1/queue").json()
    assert off["daemon"]["running"] is False and off["caps"] is None and off["total"] == 0
    vq.start_daemon("--max-cpus", "4")
    running = vq.submit("--cpus", "2", "--mem-mb", "100", "--", "sleep", "60")
    vq.submit("--cpus", "8", "--", "true")  # over capacity: stays pending
    vq.wait_state(running, "RUNNING")
    cockpit = web.http.get("/api/v1/queue").json()
    assert cockpit["total"] == 2 and cockpit["active"] == 1 and cockpit["pending"] == 1
    assert cockpit["counts"]["RUNNING"] == 1 and cockpit["counts"]["PENDING"] == 1
    assert cockpit["active_cpus"] == 2 and cockpit["declared_mem_mb"] == 100
    assert cockpit["daemon"]["running"] is True and cockpit["daemon"]["pid"] == vq.daemon_pid()
    assert cockpit["caps"]["max_cpus"] == 4
    assert cockpit["drain"]["mode"] == "none" and cockpit["throttle"] is None

    overview = web.http.get("/api/v1/queue/overview").json()
    assert overview["over_capacity_pending_jobs"] == 1
    assert set(overview) == set(vq.json("overview"))
    usage = web.http.get("/api/v1/queue/usage", params={"by": "state"})
    assert usage.status_code == 200 and usage.json()["by"] == "state"
    assert web.http.get("/api/v1/queue/usage", params={"by": "host"}).status_code == 422
