"""`vq campaign run` against a real daemon: a whole campaign, restarts, failures, retries."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq

CHECK = """\
import json, pathlib
energy = pathlib.Path("in/energy.txt").read_text()
pathlib.Path("verdict.json").write_text(json.dumps({"ok": energy.startswith("-76")}))
raise SystemExit(0 if energy.startswith("-76") else 3)
"""


def make_campaign(
    tmp_path: Path, vq: Vq, calculate: str = "echo -76.02", render: str = "true"
) -> Path:
    (tmp_path / "check").mkdir(exist_ok=True)
    (tmp_path / "check" / "check.py").write_text(CHECK)
    data: dict[str, Any] = {
        "schema_name": "vq.campaign/1",
        "campaign_id": "h2o",
        "nodes": [
            {
                "id": "calculate",
                "kind": "compute",
                "command": ["sh", "-c", f"mkdir -p out && {calculate} > out/energy.txt"],
                "outputs": [{"name": "result", "path": "out", "kind": "directory"}],
            },
            {
                "id": "validate",
                "kind": "validate",
                "command": ["python3", "check.py"],
                "sources": {"path": "check", "sha256": "unpinned"},
                "inputs": [{"name": "result", "source": "calculate.result", "path": "in"}],
                "outputs": [{"name": "verdict", "path": "verdict.json", "kind": "file"}],
            },
            {
                "id": "render",
                "kind": "render",
                "host": "localhost",
                "command": ["sh", "-c", f"{render}; cat in/energy.txt > figure.png"],
                "inputs": [{"name": "result", "source": "calculate.result", "path": "in"}],
                "after": [{"node": "validate", "on": "success"}],
                "outputs": [{"name": "figure", "path": "figure.png", "kind": "file"}],
            },
            {
                "id": "cleanup",
                "kind": "other",
                "command": ["true"],
                "after": [{"node": "calculate", "on": "completion"}],
            },
        ],
    }
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(data))
    report = json.loads(vq.run("campaign", "validate", str(path), "--json", check=False).stdout)
    data["nodes"][1]["sources"]["sha256"] = report["sources"][0]["actual_sha256"]
    path.write_text(json.dumps(data, indent=2))
    return path


def run(vq: Vq, path: Path, run_dir: Path, *extra: str, code: int = 0) -> dict[str, Any]:
    proc = vq.run(
        "campaign",
        "run",
        str(path),
        str(run_dir),
        "--interval",
        "0.2",
        "--json",
        *extra,
        check=False,
        timeout=120,
    )
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def job_count(vq: Vq) -> int:
    return len(vq.json("list")["jobs"])


def test_a_campaign_runs_to_success_and_a_rerun_submits_nothing(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon()
    path = make_campaign(tmp_path, vq)
    run_dir = tmp_path / "run"
    report = run(vq, path, run_dir)
    assert report["status"] == "succeeded"
    assert [n["status"] for n in report["nodes"]] == ["succeeded"] * 4
    names = sorted(job["job_name"] for job in vq.json("list")["jobs"])
    assert names == ["h2o.calculate.a1", "h2o.cleanup.a1", "h2o.render.a1", "h2o.validate.a1"]
    verdict = run_dir / "artifacts" / "validate" / "1" / "verdict"
    assert json.loads(verdict.read_text()) == {"ok": True}
    for node, output in (("calculate", "result"), ("validate", "verdict"), ("render", "figure")):
        manifest = run_dir / "artifacts" / node / "1" / f"{output}.manifest.json"
        copy = run_dir / "artifacts" / node / "1" / output
        vq.run("campaign", "artifact-verify", str(manifest), str(copy))
    payload = run_dir / "payloads" / "validate" / "1"
    assert sorted(p.relative_to(payload).as_posix() for p in payload.rglob("*")) == [
        "check.py",
        "in",
        "in/energy.txt",
    ]
    registry = json.loads((vq.root / "campaigns.json").read_text())
    assert registry["campaigns"][0]["run_dir"] == str(run_dir.resolve())
    assert run(vq, path, run_dir)["status"] == "succeeded"
    assert job_count(vq) == 4
    status = json.loads(
        vq.run("campaign", "status", str(path), str(run_dir / "journal.json"), "--json").stdout
    )
    assert status["status"] == "succeeded"


def test_a_submission_interrupted_before_it_was_recorded_is_reconciled(
    vq: Vq, tmp_path: Path
) -> None:
    vq.start_daemon()
    path = make_campaign(tmp_path, vq)
    run_dir = tmp_path / "run"
    first = run(vq, path, run_dir, "--once")
    assert first["nodes"][0]["state"] in ("accepted", "running", "succeeded")
    job_id = first["nodes"][0]["job_id"]
    # as if the controller died after sending the request and before recording the job
    journal = json.loads((run_dir / "journal.json").read_text())
    journal["attempts"][0]["state"] = "submitting"
    del journal["attempts"][0]["job_id"]
    (run_dir / "journal.json").write_text(json.dumps(journal))
    status = json.loads(
        vq.run("campaign", "status", str(path), str(run_dir / "journal.json"), "--json").stdout
    )
    assert status["nodes"][0]["status"] == "uncertain"
    assert status["nodes"][0]["next_action"]["action"] == "reconcile"
    report = run(vq, path, run_dir)
    assert report["status"] == "succeeded"
    assert report["nodes"][0]["job_id"] == job_id  # the same job, not a second one
    assert job_count(vq) == 4


def test_a_failed_validation_blocks_rendering_until_a_retry(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon()
    path = make_campaign(tmp_path, vq, calculate="echo 12.5")
    run_dir = tmp_path / "run"
    report = run(vq, path, run_dir, code=1)
    by_node = {n["node"]: n for n in report["nodes"]}
    assert report["status"] == "failed"
    assert by_node["validate"]["status"] == "failed"
    assert by_node["render"]["status"] == "blocked"
    assert by_node["cleanup"]["status"] == "succeeded"
    assert job_count(vq) == 3  # render was never submitted
    retried = json.loads(
        vq.run("campaign", "retry", str(path), str(run_dir), "validate", "--json").stdout
    )
    assert (retried["attempt"], retried["retry_of"]) == (2, 1)
    assert job_count(vq) == 3  # retry submits nothing
    again = run(vq, path, run_dir, code=1)
    assert {n["node"]: n["attempt"] for n in again["nodes"]}["validate"] == 2
    names = sorted(job["job_name"] for job in vq.json("list")["jobs"])
    assert "h2o.validate.a2" in names and not any("render" in name for name in names)


def test_a_missing_output_is_reported_and_blocks_consumers(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon()
    path = make_campaign(tmp_path, vq)
    data = json.loads(path.read_text())
    data["nodes"][0]["command"] = ["true"]
    path.write_text(json.dumps(data))
    report = run(vq, path, tmp_path / "run", code=1)
    by_node = {n["node"]: n for n in report["nodes"]}
    assert by_node["calculate"]["status"] == "succeeded"
    assert by_node["validate"]["status"] == "blocked"
    assert any("output result missing" in line for line in report["needs_attention"])


def test_refusals_before_anything_is_submitted(vq: Vq, tmp_path: Path) -> None:
    path = make_campaign(tmp_path, vq)
    data = json.loads(path.read_text())
    data["nodes"][0]["host"] = "cluster-a"
    path.write_text(json.dumps(data))
    proc = vq.run("campaign", "run", str(path), str(tmp_path / "run"), check=False)
    assert proc.returncode == 4 and "neither this machine nor a configured host" in proc.stderr
    assert not (vq.root / "queue").exists() or job_count(vq) == 0
    path = make_campaign(tmp_path, vq)
    (tmp_path / "check" / "check.py").write_text("print('edited')\n")
    proc = vq.run("campaign", "run", str(path), str(tmp_path / "run"), check=False)
    assert proc.returncode == 1 and "sources.sha256" in proc.stderr


def test_a_second_controller_is_refused(vq: Vq, tmp_path: Path) -> None:
    path = make_campaign(tmp_path, vq)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    fd = os.open(run_dir / "controller.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        proc = vq.run("campaign", "run", str(path), str(run_dir), check=False)
        assert proc.returncode == 6 and "is held" in proc.stderr
    finally:
        os.close(fd)


@pytest.mark.parametrize("state", ["PENDING", "RUNNING"])
def test_attempt_states_never_move_backwards(state: str) -> None:
    from vq.campaign.controller import attempt_state

    assert attempt_state(state, False, "running") == "running"
    assert attempt_state("COMPLETED", True, "running") == "succeeded"
    assert attempt_state("KILLED", True, "accepted") == "cancelled"
    assert attempt_state("OOM_KILLED", True, "running") == "failed"


def test_a_controller_killed_at_random_points_never_submits_twice(vq: Vq, tmp_path: Path) -> None:
    """SIGKILL the controller at random moments, rerun it each time: the campaign ends
    succeeded with exactly one job per node."""
    import random
    import signal
    import subprocess
    import time

    from tests.conftest import VQ_BIN

    vq.start_daemon()
    path = make_campaign(tmp_path, vq, calculate="sleep 0.3; echo -76.02", render="sleep 0.3")
    run_dir = tmp_path / "run"
    rng = random.Random(1650)
    kills = 0
    progress: list[str] = []
    journal = run_dir / "journal.json"

    def stage() -> str:
        if not journal.exists():
            return ""
        attempts = json.loads(journal.read_text())["attempts"]
        return " ".join(f"{a['node']}:{a['state']}" for a in attempts)

    for _round in range(12):
        before = stage()
        proc = subprocess.Popen(
            [VQ_BIN, "campaign", "run", str(path), str(run_dir), "--interval", "0.05"],
            env=vq.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # Kill once the controller has moved the journal past where the last round left it
        # (so the kills land at different stages however loaded the machine is), after a
        # random extra moment (fault injection, not a wait for a condition).
        deadline = time.monotonic() + 60
        while proc.poll() is None and stage() == before and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.15))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait(timeout=60)
        now = stage()
        if now:
            progress.append(now)
            if now.count(":succeeded") == 4:
                break
    assert kills >= 2
    assert len(set(progress)) >= 2, progress  # the kills landed at different stages
    final = run(vq, path, run_dir)
    assert final["status"] == "succeeded"
    names = [job["job_name"] for job in vq.json("list")["jobs"]]
    assert sorted(names) == [
        "h2o.calculate.a1",
        "h2o.cleanup.a1",
        "h2o.render.a1",
        "h2o.validate.a1",
    ]


def test_status_and_run_show_a_tampered_published_artifact_as_tampered(
    vq: Vq, tmp_path: Path
) -> None:
    vq.start_daemon()
    path = make_campaign(tmp_path, vq)
    run_dir = tmp_path / "run"
    assert run(vq, path, run_dir)["status"] == "succeeded"
    journal = str(run_dir / "journal.json")
    clean = json.loads(vq.run("campaign", "status", str(path), journal, "--json").stdout)
    assert {a["status"] for a in clean["artifacts"]} == {"verified"} and len(
        clean["artifacts"]
    ) == 3
    # the same size, other bytes: only a digest tells them apart
    energy = run_dir / "artifacts" / "calculate" / "1" / "result" / "energy.txt"
    energy.write_text(energy.read_text().replace("-76.02", "-76.03"))
    shown = json.loads(vq.run("campaign", "status", str(path), journal, "--json").stdout)
    tampered = [a for a in shown["artifacts"] if a["status"] != "verified"]
    assert [(a["node"], a["output"], a["status"]) for a in tampered] == [
        ("calculate", "result", "tampered")
    ]
    assert "energy.txt" in tampered[0]["problem"] and "digest_mismatch" in tampered[0]["problem"]
    calculate = next(n for n in shown["nodes"] if n["node"] == "calculate")
    assert calculate["outputs_verified"] is False
    record = next(a for a in shown["attempts"] if a["node"] == "calculate")["outputs"][0]
    assert record["copy"] == "tampered"
    human = vq.run("campaign", "status", str(path), journal).stdout
    assert "TAMPERED" in human and "energy.txt" in human
    again = run(vq, path, run_dir, code=1)  # nothing resubmitted, and not a success
    assert [a["status"] for a in again["artifacts"] if a["node"] == "calculate"] == ["tampered"]
    assert any("tampered" in line for line in again["needs_attention"])
    assert job_count(vq) == 4
    energy.write_text(energy.read_text().replace("-76.03", "-76.02"))  # restored: verified
    restored = json.loads(vq.run("campaign", "status", str(path), journal, "--json").stdout)
    assert {a["status"] for a in restored["artifacts"]} == {"verified"}


def test_status_keeps_job_ids_whole_at_80_columns(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon()
    path = make_campaign(tmp_path, vq)
    run_dir = tmp_path / "run"
    run(vq, path, run_dir)
    vq.env["COLUMNS"] = "80"
    shown = vq.run("campaign", "status", str(path), str(run_dir / "journal.json")).stdout
    assert "…" not in shown
    assert all(len(line) <= 80 for line in shown.splitlines()), shown
    for job in vq.json("list")["jobs"]:
        assert f"localhost:{job['id']}" in shown, shown  # whole, on one line
