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
from tests.system.test_pack_slurm import slurm_testbed  # noqa: F401 - the fixture
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
