"""A chemist's campaign with real daemons: an H2 bond scan with PySCF on netns host vq-h1,
validated and rendered here, cleaned up whatever the scan's outcome.

``scan`` (compute, on h1, program ``pyscf``: PySCF RHF/STO-3G at R = 0.50 ... 1.00 A)
→ ``check`` (validate, here: converged, 11 points, grid minimum at 0.70 A with E in
-1.118 ... -1.116 Ha) → ``report`` (render, here: report.md and curve.svg), and
``cleanup`` (other, completion edge on ``scan``). PySCF is installed by
``scripts/install-pyscf.sh`` into a world-readable venv registered on h1 as
``[programs.pyscf]``. The same scan also runs as a Slurm job on the testbed's lane
(``[hosts.cluster]``, this machine; the job calls the venv's interpreter itself). The
scripts live in tests/fixtures/h2scan/.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq
from tests.system.remote_fleet import RemoteFleet, remote_fleet_of
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.system.test_scheduler_slurm import lane, scratch  # noqa: F401 - the fixtures
from tests.testbed import REPO, SshTestbed, testbed  # noqa: F401 - the fixture

PYSCF_VENV = Path("/opt/vq-testbed/pyscf-venv")
FIXTURES = REPO / "tests" / "fixtures" / "h2scan"

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def pyscf() -> Path:
    """PySCF's world-readable venv (``scripts/install-pyscf.sh`` is idempotent)."""
    subprocess.run(
        [str(REPO / "scripts" / "install-pyscf.sh"), str(PYSCF_VENV)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return PYSCF_VENV


@pytest.fixture(scope="module")
def fleet(testbed: SshTestbed, pyscf: Path) -> Iterator[RemoteFleet]:  # noqa: F811 - the fixture
    with remote_fleet_of(testbed) as made:
        config = Path(f"{made.remote_state('h1')}-config")
        config.mkdir(parents=True, exist_ok=True)
        (config / "config.toml").write_text(
            '[programs.pyscf]\nkind = "import"\n'
            f'python = "{PYSCF_VENV / "bin" / "python"}"\nmodule = "pyscf"\n'
        )
        shutil.chown(config, made.testbed.user)
        shutil.chown(config / "config.toml", made.testbed.user)
        for verb in ("stop", "start"):  # h1's daemon reads its programs at start
            done = made.remote_vq("h1", "daemon", verb)
            assert done.returncode == 0, done.stderr
        started = made.vq("daemon", "start")  # the local nodes run in this queue
        assert started.returncode == 0, started.stderr
        try:
            yield made
        finally:
            with contextlib.suppress(subprocess.SubprocessError):
                made.vq("daemon", "stop")


def make_campaign(
    vq: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
    *,
    expect_r: str = "0.70",
    scan_gate: Path | None = None,
    on_lane: str | None = None,
) -> Path:
    """The campaign with its sources pinned (``vq`` runs the CLI); the scan on h1 with the
    registered program, or on ``on_lane`` with the PySCF venv's interpreter (a scheduler job
    never gets the driver's program paths)."""
    shutil.copytree(FIXTURES, tmp_path, dirs_exist_ok=True)
    python = '"$VQ_PROGRAM_PYTHON"' if on_lane is None else str(PYSCF_VENV / "bin" / "python")
    scan = f"{python} scan.py"
    if scan_gate is not None:  # fails until the gate exists (a first attempt that fails)
        scan = f"test -e {scan_gate} || {{ echo gate closed >&2; exit 3; }}; {scan}"
    data: dict[str, Any] = {
        "schema_name": "vq.campaign/1",
        "campaign_id": f"h2-scan-{uuid.uuid4().hex[:6]}",
        "nodes": [
            {
                "id": "scan",
                "kind": "compute",
                "host": on_lane or "h1",
                **({"program": "pyscf"} if on_lane is None else {}),
                "command": ["sh", "-c", scan],
                "cpus": 1,
                "sources": {"path": "scan", "sha256": "unpinned"},
                "outputs": [{"name": "scan", "path": "scan", "kind": "directory"}],
            },
            {
                "id": "check",
                "kind": "validate",
                "command": ["python3", "check.py", "in", expect_r, "-1.118", "-1.116"],
                "sources": {"path": "check", "sha256": "unpinned"},
                "inputs": [{"name": "scan", "source": "scan.scan", "path": "in"}],
                "outputs": [{"name": "verdict", "path": "verdict.json", "kind": "file"}],
            },
            {
                "id": "report",
                "kind": "render",
                "command": ["python3", "report.py", "in"],
                "sources": {"path": "report", "sha256": "unpinned"},
                "inputs": [{"name": "scan", "source": "scan.scan", "path": "in"}],
                "after": [{"node": "check", "on": "success"}],
                "outputs": [
                    {"name": "report", "path": "report.md", "kind": "file"},
                    {"name": "curve", "path": "curve.svg", "kind": "file"},
                ],
            },
            {
                "id": "cleanup",
                "kind": "other",
                "command": ["true"],
                "after": [{"node": "scan", "on": "completion"}],
            },
        ],
    }
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(data))
    report = json.loads(vq("campaign", "validate", str(path), "--json").stdout)
    for node, check in zip((0, 1, 2), report["sources"], strict=True):
        data["nodes"][node]["sources"]["sha256"] = check["actual_sha256"]
    path.write_text(json.dumps(data, indent=2))
    assert vq("campaign", "validate", str(path)).returncode == 0
    return path


def run(fleet: RemoteFleet, path: Path, run_dir: Path, code: int) -> dict[str, Any]:
    done = fleet.vq(
        "campaign", "run", str(path), str(run_dir), "--interval", "0.5", "--json", timeout=500
    )
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def statuses(result: dict[str, Any]) -> dict[str, str]:
    return {node["node"]: node["status"] for node in result["nodes"]}


def test_the_h2_scan_succeeds_and_the_report_names_the_minimum(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    path = make_campaign(fleet.vq, tmp_path)
    run_dir = tmp_path / "run"
    result = run(fleet, path, run_dir, 0)
    assert result["status"] == "succeeded", result
    artifacts = run_dir / "artifacts"
    scan = artifacts / "scan" / "1" / "scan"
    assert len((scan / "energies.csv").read_text().splitlines()) == 12
    assert len(list(scan.glob("point-*.json"))) == 11
    verdict = json.loads((artifacts / "check" / "1" / "verdict").read_text())
    assert verdict["ok"] and verdict["minimum"]["r_angstrom"] == 0.70
    assert -1.118 <= verdict["minimum"]["energy_hartree"] <= -1.116
    report = (artifacts / "report" / "1" / "report").read_text()
    assert "Minimum on the grid: R = 0.70 A, E = -1.117" in report
    assert (artifacts / "report" / "1" / "curve").read_text().startswith("<svg")
    # the scan ran on h1 with the registered PySCF, and the record says which
    journal = json.loads((run_dir / "journal.json").read_text())
    scan_attempt = next(a for a in journal["attempts"] if a["node"] == "scan")
    assert scan_attempt["host"] == "h1"
    assert scan_attempt["runtime"]["program"] == "pyscf"
    # an import program's queue records the program (no version: it is not probed at
    # submit or dispatch); the manifest carries the same record
    manifest = json.loads((artifacts / "scan" / "1" / "scan.manifest.json").read_text())
    assert manifest["executed_runtime"] == scan_attempt["runtime"]
    status = fleet.vq("campaign", "status", str(path), str(run_dir / "journal.json"))
    assert "Ran with" in status.stdout and "program=pyscf" in status.stdout


def test_a_check_wanting_another_minimum_blocks_the_report_and_fails(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    path = make_campaign(fleet.vq, tmp_path, expect_r="0.90")
    run_dir = tmp_path / "run"
    result = run(fleet, path, run_dir, 1)
    assert result["status"] == "failed"
    assert statuses(result) == {
        "scan": "succeeded",
        "check": "failed",
        "report": "blocked",
        "cleanup": "succeeded",
    }
    assert not (run_dir / "artifacts" / "report").exists()


def test_a_failed_scan_is_retried_and_its_consumers_staged_from_attempt_2(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    gate = Path(f"/tmp/vq-h2-gate-{uuid.uuid4().hex[:8]}")
    path = make_campaign(fleet.vq, tmp_path / "c", scan_gate=gate)
    run_dir = tmp_path / "run"
    try:
        first = run(fleet, path, run_dir, 1)
        assert statuses(first)["scan"] == "failed"
        assert statuses(first)["check"] == "blocked"
        gate.write_text("open")
        retried = fleet.vq("campaign", "retry", str(path), str(run_dir), "scan", "--json")
        assert retried.returncode == 0, retried.stderr
        assert json.loads(retried.stdout)["retry_of"] == 1
        final = run(fleet, path, run_dir, 0)
    finally:
        gate.unlink(missing_ok=True)
    assert final["status"] == "succeeded"
    assert set(statuses(final).values()) == {"succeeded"}
    journal = json.loads((run_dir / "journal.json").read_text())
    check = next(a for a in journal["attempts"] if a["node"] == "check")
    assert check["inputs"][0]["attempt"] == 2
    scans = [a for a in journal["attempts"] if a["node"] == "scan"]
    assert [(a["attempt"], a["state"], a.get("retry_of")) for a in scans] == [
        (1, "failed", None),
        (2, "succeeded", 1),
    ]


def test_the_h2_scan_on_the_slurm_lane_succeeds(
    pyscf: Path,
    lane: Vq,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    """The same scan as a Slurm job on the testbed's lane (``[hosts.cluster]``, driven by
    this queue, whose daemon also runs check, report and cleanup): the node is this
    machine, the job runs as the lane's user with the PySCF venv's interpreter."""
    path = make_campaign(lambda *a: lane.run(*a, check=False), tmp_path / "c", on_lane="cluster")
    run_dir = tmp_path / "run"
    done = lane.run(
        "campaign", "run", str(path), str(run_dir), "--interval", "1", "--json",
        check=False, timeout=500,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout, done.stderr)
    result = json.loads(done.stdout)
    assert set(statuses(result).values()) == {"succeeded"}, result
    journal = json.loads((run_dir / "journal.json").read_text())
    scan_attempt = next(a for a in journal["attempts"] if a["node"] == "scan")
    assert scan_attempt["host"] == "cluster"
    spec = lane.spec(scan_attempt["job_id"])
    assert spec["scheduler_target"] == "cluster" and spec["scheduler_job_id"].isdigit()
    artifacts = run_dir / "artifacts"
    scan = artifacts / "scan" / "1" / "scan"
    assert len((scan / "energies.csv").read_text().splitlines()) == 12
    verdict = json.loads((artifacts / "check" / "1" / "verdict").read_text())
    assert verdict["ok"] and verdict["minimum"]["r_angstrom"] == 0.70
    report = (artifacts / "report" / "1" / "report").read_text()
    assert "Minimum on the grid: R = 0.70 A, E = -1.117" in report
