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

from vq.config.hosts import HostSettings
from vq.errors import InvalidInput, SshUnreachable
from vq.remote.fleet import Fleet
from vq.web.audit import describe, describe_fleet
from vq.web.fleet.listing import fleet_table, queue_filter
from vq.web.fleet.source import FleetSource, HostView


class ScriptedHost:
    def __init__(self, answer: Any, gate: threading.Event | None = None) -> None:
        self.answer, self.gate, self.calls = answer, gate, 0

    def run_json(self, words: list[str], answer: Any = None) -> Any:
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
    source.host("h1")  # stale: served at once, refreshed in the background
    _poll(lambda: host.calls == 2)
    source.forget("h1")
    source.host("h1")
    assert host.calls == 3


def test_a_recent_answer_is_served_at_once_while_the_host_is_reread(tmp_path: Path) -> None:
    host = ScriptedHost(_snapshot({"id": "a" * 12, "state": "RUNNING"}))
    clock = Clock()
    source = FleetSource(lambda: ScriptedFleet(tmp_path, {"h1": host}), clock=clock)
    assert source.host("h1").jobs[0]["id"] == "a" * 12
    gate = threading.Event()
    host.gate, host.answer = gate, _snapshot({"id": "b" * 12, "state": "RUNNING"})
    clock.now += 6.0  # stale, but answered less than two freshness windows ago
    asked = time.monotonic()
    stale = source.host("h1")  # the refresh hangs on the gate: the reader must not wait
    assert stale.jobs[0]["id"] == "a" * 12 and time.monotonic() - asked < 1.0
    _poll(lambda: host.calls == 2)
    assert source.host("h1").jobs[0]["id"] == "a" * 12 and host.calls == 2  # single flight
    clock.now += 6.0  # two windows old now, but its refresh (bounded) is still running
    assert source.host("h1").jobs[0]["id"] == "a" * 12 and host.calls == 2
    gate.set()
    _poll(lambda: source.host("h1").jobs[0]["id"] == "b" * 12)
    assert host.calls == 2
    host.answer = _snapshot({"id": "c" * 12, "state": "RUNNING"})
    clock.now += 10.0  # two windows old: the reader waits for the host
    assert source.host("h1").jobs[0]["id"] == "c" * 12 and host.calls == 3
    host.answer = _snapshot({"id": "d" * 12, "state": "RUNNING"})
    source.forget("h1")  # after a change the next read is the host's, never the old one
    assert source.host("h1").jobs[0]["id"] == "d" * 12 and host.calls == 4


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


def _row(
    host: str, n: int, state: str, tags: list[str], group: str | None = None
) -> dict[str, Any]:
    return {
        "host": host,
        "id": f"{n:012x}",
        "state": state,
        "tags": tags,
        "job_name": f"job-{n}",
        "array_group_id": group,
        "chain_group_id": None,
        "submitted_at": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}+00:00",
    }


def test_fleet_table_filters_and_pages_newest_first(tmp_path: Path) -> None:
    a = HostView("a", "ok", jobs=[_row("a", 3, "FAILED", []), _row("a", 1, "RUNNING", ["x"])])
    b = HostView("b", "ok", jobs=[_row("b", 2, "RUNNING", ["x", "y"], group="g1")])
    gone = HostView("c", "unreachable", error="timed out")
    source = FleetSource(lambda: ScriptedFleet(tmp_path, {}))
    for view in (a, b):
        view.total_jobs = len(view.jobs)

    def table(**filters: Any) -> dict[str, Any]:
        paging = {k: filters.pop(k) for k in ("host", "offset", "limit") if k in filters}
        return fleet_table(source, [a, b, gone], queue_filter(**filters), **paging)

    page = table(limit=2)
    assert [(r["host"], r["id"][-1]) for r in page["jobs"]] == [("a", "3"), ("b", "2")]
    assert page["total"] == 3 and page["incomplete"] == []
    assert table(offset=2)["jobs"][0]["id"][-1] == "1"
    assert table(states=["running"], tags=["x"])["total"] == 2
    assert table(tags=["x", "y"])["jobs"][0]["host"] == "b"
    assert table(name="job-3")["total"] == 1
    assert table(name="JOB-3")["total"] == 0  # case-sensitive, as vq list --name
    assert table(host="b")["total"] == 1
    assert [r["id"][-1] for r in table(group="g1")["jobs"]] == ["2"]
    assert table(since="2026-01-01T00:00:02+00:00")["total"] == 2
    assert table(since="2h")["total"] == 0  # every row is older than two hours


def test_bad_fleet_filters_are_invalid_input() -> None:
    for bad in ({"states": ["SLEEPING"]}, {"since": "yesterday-ish"}, {"since": "0001-01-01"}):
        try:
            queue_filter(**bad)
        except InvalidInput as exc:
            assert exc.message and exc.hint
        else:
            raise AssertionError(f"{bad} was accepted")


class ListingHost:
    """A host with more jobs than its snapshot lists: answers both verbs from ``rows``."""

    def __init__(self, rows: list[dict[str, Any]], listed: int) -> None:
        self.rows, self.listed, self.asked = rows, listed, []  # type: list[list[str]]

    def run_json(self, words: list[str], answer: Any = None) -> Any:
        self.asked.append(words)
        newest = sorted(self.rows, key=lambda r: (r["submitted_at"], r["id"]), reverse=True)
        if words[1] == "fleet-snapshot":
            return {"summary": {}, "jobs": newest[: self.listed], "total_jobs": len(newest)}
        limit = int(words[words.index("--limit") + 1])
        states = {words[i + 1] for i, w in enumerate(words) if w == "--state"}
        chosen = [r for r in newest if not states or r["state"] in states]
        return {"jobs": chosen[:limit], "total": len(chosen)}


def test_the_table_is_complete_past_a_hosts_snapshot(tmp_path: Path) -> None:
    big = ListingHost(
        [_row("", n, "FAILED" if n % 2 else "COMPLETED", []) for n in range(1, 31)], listed=10
    )
    small = ScriptedHost({"summary": {}, "jobs": [_row("", 100, "FAILED", [])], "total_jobs": 1})
    source = FleetSource(lambda: ScriptedFleet(tmp_path, {"big": big, "small": small}))

    def table(offset: int, limit: int, **filters: Any) -> dict[str, Any]:
        views = source.hosts()
        return fleet_table(source, views, queue_filter(**filters), offset=offset, limit=limit)

    first = table(0, 5)
    assert [r["id"][-2:] for r in first["jobs"]] == ["64", "1e", "1d", "1c", "1b"]
    assert first["total"] == 31
    assert [w[1] for w in big.asked] == ["fleet-snapshot"]  # the snapshot answered it
    deep = table(25, 10)  # past the snapshot's 10 rows: the host is asked
    assert [int(r["id"], 16) for r in deep["jobs"]] == [6, 5, 4, 3, 2, 1]
    assert deep["total"] == 31 and big.asked[-1][1] == "fleet-list"
    assert big.asked[-1][big.asked[-1].index("--limit") + 1] == "500"
    failed = table(0, 100, states=["failed"])
    assert failed["total"] == 15 + 1
    assert {int(r["id"], 16) for r in failed["jobs"]} == {100, *range(1, 31, 2)}
    assert ["--state", "FAILED"] == big.asked[-1][-2:]
    calls = len(big.asked)
    assert table(0, 100, states=["failed"])["total"] == 16
    assert len(big.asked) == calls  # cached like every fleet read


class BrokenListingHost(ListingHost):
    def run_json(self, words: list[str], answer: Any = None) -> Any:
        if words[1] == "fleet-list":
            raise SshUnreachable("host big: connection refused")
        return super().run_json(words)


def test_a_host_whose_listing_fails_is_named_not_an_error(tmp_path: Path) -> None:
    big = BrokenListingHost([_row("", n, "FAILED", []) for n in range(1, 31)], listed=10)
    small = ScriptedHost({"summary": {}, "jobs": [_row("", 100, "FAILED", [])], "total_jobs": 1})
    source = FleetSource(lambda: ScriptedFleet(tmp_path, {"big": big, "small": small}))
    page = fleet_table(source, source.hosts(), queue_filter(states=["FAILED"]))
    assert [r["host"] for r in page["jobs"]] == ["small"] and page["total"] == 1
    assert [gap["host"] for gap in page["incomplete"]] == ["big"]
    assert "connection refused" in page["incomplete"][0]["error"]


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
