"""Arrays and chains as one thing (issue 30 item 8): ``--after GROUP`` waits for every
element, ``vq fetch --group GROUP DEST`` brings every element's workspace into
``DEST/<index>/``, and a dependent job reads its predecessors' workspaces through
``VQ_AFTER_WORKSPACES``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Vq, wait_until

#: an element writes its index into out.txt in its workspace (its working directory)
WRITE_INDEX = 'echo "scan $VQ_ARRAY_INDEX" > out.txt'
#: a collect step: every predecessor's out.txt, through VQ_AFTER_WORKSPACES
COLLECT = 'printf "%s\\n" "$VQ_AFTER_WORKSPACES" | while IFS= read -r d; do cat "$d/out.txt"; done'


def _array(vq: Vq, n: int, script: str) -> tuple[str, list[str]]:
    proc = vq.run("submit", "--json", "--array", f"0-{n - 1}", "--", "sh", "-c", script)
    payload = json.loads(proc.stdout)
    return payload["array_group_id"], [job["id"] for job in payload["jobs"]]


def test_after_group_waits_for_every_element(vq: Vq, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    vq.start_daemon("--max-cpus", "8")
    late = f'if [ "$VQ_ARRAY_INDEX" = 2 ]; then while [ ! -e {gate} ]; do sleep 0.05; done; fi'
    group, ids = _array(vq, 3, late)
    collect = vq.submit("--after", group, "--", "true")
    assert vq.spec(collect)["depends_on"] == ids  # every element, in index order
    wait_until(lambda: [vq.state(j) for j in ids] == ["COMPLETED", "COMPLETED", "RUNNING"])
    assert vq.state(collect) == "PENDING"
    assert vq.status(collect)["pending_reason"] == f"waiting for {ids[2]} (RUNNING)"
    gate.touch()
    vq.wait_state(collect, "COMPLETED")


def test_after_group_prefix_and_chain_group(vq: Vq) -> None:
    vq.start_daemon("--max-cpus", "8")
    proc = vq.run("submit", "--json", "--chain", "2", "--", "true")
    payload = json.loads(proc.stdout)
    chain, segments = payload["chain_group_id"], [job["id"] for job in payload["jobs"]]
    after = vq.submit("--after", chain[:6], "--", "true")
    assert vq.spec(after)["depends_on"] == segments
    vq.wait_state(after, "COMPLETED")


def test_after_group_fails_like_a_failed_predecessor(vq: Vq) -> None:
    vq.start_daemon("--max-cpus", "8")
    group, ids = _array(vq, 3, 'test "$VQ_ARRAY_INDEX" != 1')
    collect = vq.submit("--after", group, "--", "true")
    vq.wait_state(collect, "FAILED")
    assert [vq.state(j) for j in ids] == ["COMPLETED", "FAILED", "COMPLETED"]
    assert ids[1] in (vq.spec(collect)["failure_reason"] or "")
    assert vq.spec(collect)["started_at"] is None  # never ran


def test_unknown_group_after_is_refused(vq: Vq) -> None:
    result = vq.run("submit", "--after", "0123456789ab", "--", "true", check=False)
    assert result.returncode == 3
    assert "nor an array or chain group" in result.stderr


def test_collect_reads_the_scan_through_after_workspaces(vq: Vq) -> None:
    vq.start_daemon("--max-cpus", "8")
    group, ids = _array(vq, 3, WRITE_INDEX)
    single = vq.submit("--", "sh", "-c", 'echo "single" > out.txt')
    collect = vq.submit("--after", group, "--after-any", single, "--", "sh", "-c", COLLECT)
    vq.wait_state(collect, "COMPLETED")
    out = vq.run("logs", collect).stdout
    assert out.splitlines() == ["scan 0", "scan 1", "scan 2", "single"]
    # and the variable itself: the predecessors' workspaces, newline-separated, in order
    shown = vq.submit("--after", group, "--", "sh", "-c", 'printf "%s" "$VQ_AFTER_WORKSPACES"')
    vq.wait_state(shown, "COMPLETED")
    assert vq.run("logs", shown).stdout.split("\n") == [str(vq.root / "jobs" / j) for j in ids]
    plain = vq.submit("--", "sh", "-c", 'echo "[${VQ_AFTER_WORKSPACES-unset}]"')
    vq.wait_state(plain, "COMPLETED")
    assert vq.run("logs", plain).stdout.strip() == "[unset]"


def test_fetch_group_brings_every_element_into_dest_index(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon("--max-cpus", "8")
    group, ids = _array(vq, 3, WRITE_INDEX)
    wait_until(lambda: all(vq.state(j) == "COMPLETED" for j in ids))
    dest = tmp_path / "scan"
    proc = vq.run("fetch", "--group", group, str(dest))
    for index, job_id in enumerate(ids):
        assert (dest / str(index) / "out.txt").read_text() == f"scan {index}\n"
        assert (dest / str(index) / "_vq" / "fetch-manifest.json").is_file()
        assert f"of job {job_id} → {dest / str(index)}" in proc.stdout
    assert f"group {group}: 3 elements → {dest}/<index>/" in proc.stdout
    again = json.loads(vq.run("fetch", "--group", group[:5], str(dest), "--json").stdout)
    assert again["group"] == group and again["failed"] == []
    assert [(e["index"], e["job_id"], e["replaced"]) for e in again["elements"]] == [
        (i, j, True) for i, j in enumerate(ids)
    ]


def test_fetch_group_usage_errors(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon("--max-cpus", "8")
    group, _ = _array(vq, 2, "true")
    wrong = vq.run("fetch", "--group", group, check=False)
    assert wrong.returncode == 2
    assert "vq: error: --group takes one DEST and no job id" in wrong.stderr
    assert "hint:" in wrong.stderr
    none = vq.run("fetch", check=False)
    assert none.returncode == 2 and "vq: error: no job given" in none.stderr
