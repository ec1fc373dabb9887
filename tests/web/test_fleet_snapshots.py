"""The host side of the fleet console: ``vq web fleet-snapshot`` / ``fleet-list`` payloads
over a real daemon on a temp state root (the queue sends only the newest rows)."""

from __future__ import annotations

import json

from tests.conftest import Vq
from vq.paths import StatePaths
from vq.web.fleet.snapshots import Snapshots


def _newest_first(rows: list[dict[str, object]]) -> list[str]:
    ordered = sorted(rows, key=lambda r: (str(r["submitted_at"]), str(r["id"])), reverse=True)
    return [str(r["id"]) for r in ordered]


def test_the_newest_rows_are_exact_also_when_an_array_ties_across_the_cut(vq: Vq) -> None:
    vq.start_daemon()
    later = ("--not-before", "1h", "--", "true")
    array = json.loads(vq.run("submit", "--json", "--array", "0-5", *later).stdout)
    singles = [vq.submit(*later) for _ in range(3)]
    snapshots = Snapshots(StatePaths.from_env(vq.env))
    everything = snapshots.listing({}, 100)
    assert everything["total"] == 9 and len(everything["jobs"]) == 9
    expected = _newest_first(everything["jobs"])
    assert [r["id"] for r in everything["jobs"]] == expected
    assert set(expected[:3]) == set(singles)  # submitted after the array
    moments = {r["submitted_at"] for r in everything["jobs"] if r["id"] not in singles}
    assert len(moments) == 1  # the array's members tie: the queue's order may not be ours
    for limit in (0, 2, 3, 4, 7, 9):  # 4 and 7 cut through the array's shared moment
        page = snapshots.listing({}, limit)
        assert [r["id"] for r in page["jobs"]] == expected[:limit], limit
        assert page["total"] == 9
    held = snapshots.listing({"states": ["PENDING"], "group": array["array_group_id"]}, 4)
    assert held["total"] == 6 and len(held["jobs"]) == 4
    host = snapshots.host()
    assert [r["id"] for r in host["jobs"]] == expected and host["total_jobs"] == 9
    assert host["running"] == []
