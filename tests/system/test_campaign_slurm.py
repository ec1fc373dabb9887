"""`vq campaign run` with a node on a Slurm lane this queue drives (testbed Slurm 22.05).

The lane is ``[hosts.cluster]`` (the Slurm lane tests' configuration); this queue's own
daemon drives it and runs the local nodes. Needs root (the testbed); skipped without it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.system.test_scheduler_slurm import lane, scratch  # noqa: F401 - the fixtures

pytestmark = pytest.mark.timeout(300)


def test_a_lane_node_feeds_a_local_validation(lane: Vq, tmp_path: Path) -> None:  # noqa: F811
    data: dict[str, Any] = {
        "schema_name": "vq.campaign/1",
        "campaign_id": "lane-scan",
        "nodes": [
            {
                "id": "scan",
                "kind": "compute",
                "host": "cluster",
                "command": ["sh", "-c", "mkdir -p scan && echo 0.70,-1.117 > scan/energies.csv"],
                "outputs": [{"name": "scan", "path": "scan", "kind": "directory"}],
            },
            {
                "id": "check",
                "kind": "validate",
                "command": ["sh", "-c", "grep -q 0.70 in/energies.csv && echo ok > verdict"],
                "inputs": [{"name": "scan", "source": "scan.scan", "path": "in"}],
                "outputs": [{"name": "verdict", "path": "verdict", "kind": "file"}],
            },
        ],
    }
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(data))
    run_dir = tmp_path / "run"
    proc = lane.run(
        "campaign",
        "run",
        str(path),
        str(run_dir),
        "--interval",
        "1",
        "--json",
        check=False,
        timeout=240,
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert json.loads(proc.stdout)["status"] == "succeeded"
    journal = json.loads((run_dir / "journal.json").read_text())
    scan = next(a for a in journal["attempts"] if a["node"] == "scan")
    assert scan["host"] == "cluster"
    spec = lane.spec(scan["job_id"])
    assert spec["scheduler_target"] == "cluster" and spec["scheduler_job_id"].isdigit()
    copied = run_dir / "artifacts" / "scan" / "1" / "scan" / "energies.csv"
    assert copied.read_text() == "0.70,-1.117\n"
    names = sorted(job["job_name"] for job in lane.json("list")["jobs"])
    assert names == ["lane-scan.check.a1", "lane-scan.scan.a1"]


def test_a_lane_node_bound_to_a_generation_runs_it_and_a_writable_one_exits_126(
    lane: Vq,  # noqa: F811
    tmp_path: Path,
) -> None:
    import shutil
    import tempfile

    source = tmp_path / "runtime" / "bin"
    source.mkdir(parents=True)
    (source / "tool").write_text("#!/bin/sh\necho lane generation ran\n")
    (source / "tool").chmod(0o755)
    root = Path(tempfile.mkdtemp(prefix="vq-lane-gen-", dir="/tmp"))  # seen by the node
    root.chmod(0o755)
    try:
        deployed = lane.run("runtime", "deploy", str(source.parent), "--root", str(root), "--json")
        digest = json.loads(deployed.stdout)["digest"]

        def campaign(campaign_id: str) -> Path:
            data = {
                "schema_name": "vq.campaign/1",
                "campaign_id": campaign_id,
                "nodes": [
                    {
                        "id": "calc",
                        "kind": "compute",
                        "host": "cluster",
                        "runtime_root": str(root),
                        "runtime_digest": digest,
                        "command": ["sh", "-c", '"$VQ_RUNTIME_PAYLOAD"/bin/tool > out.txt'],
                        "outputs": [{"name": "out", "path": "out.txt", "kind": "file"}],
                    }
                ],
            }
            path = tmp_path / f"{campaign_id}.json"
            path.write_text(json.dumps(data))
            return path

        def run(path: Path, run_dir: Path, code: int) -> dict[str, Any]:
            proc = lane.run(
                "campaign", "run", str(path), str(run_dir), "--interval", "1", "--json",
                check=False, timeout=240,
            )  # fmt: skip
            assert proc.returncode == code, (proc.stdout, proc.stderr)
            result: dict[str, Any] = json.loads(proc.stdout)
            return result

        good = tmp_path / "good"
        assert run(campaign("lane-gen"), good, 0)["status"] == "succeeded"
        assert (good / "artifacts" / "calc" / "1" / "out").read_text() == "lane generation ran\n"
        attempt = json.loads((good / "journal.json").read_text())["attempts"][0]
        assert attempt["runtime"]["artifact_identity"] == digest  # taken after COMPLETED/0
        tool = root / "generations" / digest / "payload" / "bin" / "tool"
        tool.chmod(0o775)
        bad = tmp_path / "bad"
        failed = run(campaign("lane-gen-writable"), bad, 1)
        assert failed["status"] == "failed"
        attempt = json.loads((bad / "journal.json").read_text())["attempts"][0]
        assert attempt["state"] == "failed" and "runtime" not in attempt
        spec = lane.spec(attempt["job_id"])
        assert spec["exit_code"] == 126
        stderr = (lane.root / "jobs" / attempt["job_id"] / "stderr.log").read_text()
        assert "group or world writable" in stderr and "command not started" in stderr
        assert not (bad / "artifacts").exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)
