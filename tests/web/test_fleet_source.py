"""The fleet console's read cache and pure views, with an injected host and clock.

The hosts here are in-process stand-ins for :class:`vq.remote.host.RemoteHost` (the
SSH path itself is covered by tests/system/test_fleet_console.py): each records its
calls and answers from a script, so the cache's contract — one call per host per
freshness window, shared by concurrent readers, a failing host never waited for twice —
is checked exactly.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from vq.errors import SshUnreachable
from vq.hosts_config import HostSettings
from vq.remote.fleet import Fleet
from vq.web.audit import describe, describe_fleet
from vq.web.fleet.source import FleetSource, HostView
from vq.web.fleet.views import fleet_queue


class ScriptedHost:
    def __init__(self, answer: Any, gate: threading.Event | None = None) -> None:
        self.answer, self.gate, self.calls = answer, gate, 0

    def run_json(self, words: list[str]) -> Any:
        self.calls += 1
        if self.gate is not None:
            self.gate.wait(10)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class ScriptedFleet(Fleet):
    def __init__(self, root: Path, made: dict[str, ScriptedHost], down: tuple[str, ...] = ()):
        hosts = {
            name: HostSettings(ssh=f"{name}.lab", ssh_timeout=2, down=name in down)
            for name in [*made, *down]
        }
        super().__init__(hosts, None, root)
        self.scripted = made

    def host(self, name: str) -> Any:
        super().host(name)  # NotFound for an unknown name
        return self.scripted[name]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _poll(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def _snapshot(*rows: dict[str, Any]) -> dict[str, Any]:
    return {"summary": {"counts": {"RUNNING": len(rows)}}, "jobs": list(rows), "total_jobs": 9}


def test_concurrent_readers_share_one_call_per_freshness_window(tmp_path: Path) -> None:
    gate = threading.Event()
    host = ScriptedHost(_snapshot({"id": "a" * 12, "state": "RUNNING"}), gate)
    clock = Clock()
    source = FleetSource(lambda: ScriptedFleet(tmp_path, {"h1": host}), clock=clock)
    views: list[HostView] = []
    readers = [threading.Thread(target=lambda: views.append(source.host("h1"))) for _ in range(10)]
    for reader in readers:
        reader.start()
    gate.set()
    for reader in readers:
        reader.join(10)
    assert host.calls == 1
    assert [v.status for v in views] == ["ok"] * 10
    assert views[0].jobs[0]["host"] == "h1" and views[0].total_jobs == 9
    clock.now += 1.0
    source.host("h1")
    assert host.calls == 1  # still fresh
    clock.now += 5.0
    source.host("h1")
    assert host.calls == 2
    source.forget("h1")
    source.host("h1")
    assert host.calls == 3


def test_a_failing_host_is_waited_for_once_then_served_at_once(tmp_path: Path) -> None:
    failing = ScriptedHost(SshUnreachable("cannot reach h2 over SSH: timed out"))
    clock = Clock()
    source = FleetSource(lambda: ScriptedFleet(tmp_path, {"h2": failing}), clock=clock)
    first = source.host("h2")
    assert (first.status, first.error) == ("unreachable", "cannot reach h2 over SSH: timed out")
    clock.now += 10.0
    gate = threading.Event()
    failing.gate = gate  # the next call hangs until released: the reader must not wait
    asked = time.monotonic()
    second = source.host("h2")  # answered while the refresh hangs in the background
    assert second.status == "unreachable" and time.monotonic() - asked < 1.0  # not 2 s + 1
    _poll(lambda: failing.calls == 2)
    failing.answer = _snapshot()
    gate.set()

    def answered() -> bool:
        clock.now += 10.0
        return source.host("h2").status == "ok"

    _poll(answered)


def test_a_down_host_is_never_contacted(tmp_path: Path) -> None:
    live = ScriptedHost(_snapshot())
    source = FleetSource(lambda: ScriptedFleet(tmp_path, {"h1": live}, down=("h3",)))
    views = {v.name: v for v in source.hosts()}
    assert views["h3"].status == "down" and views["h1"].status == "ok"
    assert live.calls == 1


def test_fleet_queue_filters_and_pages_newest_first() -> None:
    def row(host: str, n: int, state: str, tags: list[str]) -> dict[str, Any]:
        return {
            "host": host,
            "id": f"{n:012x}",
            "state": state,
            "tags": tags,
            "job_name": f"job-{n}",
            "submitted_at": f"2026-01-01T00:00:{n:02d}+00:00",
        }

    a = HostView("a", "ok", jobs=[row("a", 1, "RUNNING", ["x"]), row("a", 3, "FAILED", [])])
    b = HostView("b", "ok", jobs=[row("b", 2, "RUNNING", ["x", "y"])])
    gone = HostView("c", "unreachable", error="timed out")
    page = fleet_queue([a, b, gone], limit=2)
    assert [(r["host"], r["id"][-1]) for r in page["jobs"]] == [("a", "3"), ("b", "2")]
    assert page["total"] == 3
    assert fleet_queue([a, b], offset=2)["jobs"][0]["id"][-1] == "1"
    assert fleet_queue([a, b], states=["running"], tags=["x"])["total"] == 2
    assert fleet_queue([a, b], tags=["x", "y"])["jobs"][0]["host"] == "b"
    assert fleet_queue([a, b], name="JOB-3")["total"] == 1
    assert fleet_queue([a, b], host="b")["total"] == 1


def test_fleet_actions_are_audited_with_their_host() -> None:
    assert describe_fleet("POST", "/api/v1/fleet/jobs/h2/0123456789ab/kill") == (
        "kill",
        "0123456789ab",
        "h2",
    )
    assert describe_fleet("POST", "/fleet/actions/jobs/H<x>/nope/explode") == (
        "(invalid action)",
        "(invalid id)",
        "(invalid host)",
    )
    assert describe("POST", "/fleet/actions/jobs/h1/0123456789ab/pause") == (
        "pause",
        "0123456789ab",
    )
    assert describe_fleet("GET", "/api/v1/fleet/jobs/h2/0123456789ab/kill") is None
