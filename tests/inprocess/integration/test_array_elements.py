"""Array elements start in index order and show their index, value and group everywhere."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Vq, wait_until


def test_elements_start_in_index_order(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon("--max-jobs", "1")
    order = tmp_path / "order.txt"
    proc = vq.run("submit", "--array", "0-9", "--", "sh", "-c", f"echo $VQ_ARRAY_INDEX >> {order}")
    ids = proc.stdout.split()
    assert len(ids) == 10
    group = vq.spec(ids[0])["array_group_id"]
    assert f"array group {group}: 10 jobs" in proc.stderr
    wait_until(lambda: all(vq.state(j) == "COMPLETED" for j in ids), timeout=60)
    assert order.read_text().split() == [str(i) for i in range(10)]


def test_status_list_and_json_show_index_value_and_group(vq: Vq, tmp_path: Path) -> None:
    lengths = tmp_path / "bonds.txt"
    lengths.write_text("0.74\n0.80\n0.95\n")
    proc = vq.run("submit", "--json", "--array-from", str(lengths), "--", "true")
    payload = json.loads(proc.stdout)
    group = payload["array_group_id"]
    jobs = [job["id"] for job in payload["jobs"]]
    assert f"array group {group}: 3 jobs" in proc.stderr
    status = vq.run("status", jobs[1]).stdout
    assert f"[1] of 3 in group {group}" in status
    assert "array value" in status and "0.80" in status
    listing = vq.run("list").stdout.splitlines()
    assert listing[0].split()[:2] == ["ID", "IDX"]
    assert [line.split()[1] for line in listing[1:]] == ["[0]", "[1]", "[2]"]
    single = vq.submit("--", "true")
    assert vq.run("list").stdout.splitlines()[-1].split()[:2] == [single, "-"]
