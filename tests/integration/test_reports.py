"""``vq overview`` and ``vq usage`` (§6.3) end to end: real daemon, real jobs, real CLI."""

from __future__ import annotations

from tests.conftest import Vq


def test_overview_with_and_without_the_daemon(vq: Vq) -> None:
    vq.start_daemon("--max-cpus", "2", "--max-mem-mb", "4000", "--default-job-mem-mb", "100")
    done = vq.submit("--", "true")
    failed = vq.submit("--", "sh", "-c", "exit 4")
    vq.wait_state(done, "COMPLETED")
    vq.wait_state(failed, "FAILED")
    running = vq.submit("--mem-mb", "300", "--", "sleep", "60")
    paused = vq.submit("--", "sleep", "60")
    vq.wait_state(running, "RUNNING")
    vq.wait_state(paused, "RUNNING")
    vq.run("pause", paused)
    vq.wait_state(paused, "SUSPENDED")
    over = vq.run("submit", "--cpus", "8", "--", "true")
    assert "exceeds the configured cap" in over.stderr
    vq.submit("--cpus", "1", "--", "true")  # fits the caps, but no CPU is free

    snap = vq.json("overview")
    assert snap["daemon"]["running"] is True
    assert snap["daemon"]["pid"] == vq.daemon_pid()
    assert snap["daemon"]["cgroup_mode"] in ("scope", "direct")
    assert snap["daemon"]["uptime_seconds"] > 0
    counts = {state: n for state, n in snap["counts"].items() if n}
    assert counts == {"PENDING": 2, "RUNNING": 1, "SUSPENDED": 1, "COMPLETED": 1, "FAILED": 1}
    assert snap["total_jobs"] == 6 and snap["quarantined"] == 0
    recent = {state: n for state, n in snap["recent_terminal"]["counts"].items() if n}
    assert recent == {"COMPLETED": 1, "FAILED": 1}
    assert snap["running"] == {"jobs": 1, "cpus": 1, "mem_mb": 300}
    assert snap["reserved"] == {"jobs": 2, "cpus": 2, "mem_mb": 400}
    assert snap["capacity"]["max_cpus"] == 2 and snap["capacity"]["max_mem_mb"] == 4000
    assert snap["pending_cpus"] == 9
    assert snap["over_capacity_pending_jobs"] == 1
    text = vq.run("overview").stdout
    assert "daemon: running" in text
    assert "1 pending job(s) exceed the configured capacity" in text
    assert "2/2 reserved (100%)" in text

    vq.stop_daemon()
    offline = vq.json("overview")
    assert offline["daemon"]["running"] is False and offline["daemon"]["pid"] is None
    assert offline["capacity"] == snap["capacity"]  # the last advertised snapshot
    assert offline["over_capacity_pending_jobs"] == 1
    assert offline["counts"] == snap["counts"]
    assert offline["pending_cpus"] == 9
    (vq.root / "daemon_capacity.json").unlink()  # no snapshot: capacity unknown
    offline = vq.json("overview")
    assert offline["capacity"] is None
    assert offline["over_capacity_pending_jobs"] is None
    text = vq.run("overview").stdout
    assert "daemon: not running" in text and "exceed the configured" not in text
