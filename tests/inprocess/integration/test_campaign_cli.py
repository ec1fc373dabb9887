"""`vq campaign` through the real executable: exit codes, messages and --json."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.campaign_support import bound, journal, raw, record, verified
from tests.conftest import VQ_BIN
from vq.domain.artifact import manifest_sha256, parse_manifest


class Cli:
    def __init__(self, tmp_path: Path):
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("VQ_")}
        self.env.update(
            VQ_STATE_DIR=str(tmp_path / "state"),
            VQ_CONFIG_DIR=str(tmp_path / "config"),
            PATH=f"{Path(sys.executable).parent}:{self.env.get('PATH', '/usr/bin:/bin')}",
        )

    def __call__(self, *args: str | Path, code: int = 0) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [VQ_BIN, "campaign", *map(str, args)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr
        if code:
            assert proc.stderr.startswith("vq: error: "), proc.stderr
        return proc

    def json(self, *args: str | Path, code: int = 0) -> Any:
        return json.loads(self(*args, "--json", code=code).stdout)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def write_campaign(tmp_path: Path, data: dict[str, Any] | None = None, indent: int = 2) -> Path:
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(data if data is not None else raw(), indent=indent))
    return path


def with_sources(tmp_path: Path, cli: Cli) -> tuple[Path, dict[str, Any]]:
    (tmp_path / "validate").mkdir()
    (tmp_path / "validate" / "check_scf.py").write_text("print('converged')\n")
    data = raw()
    data["nodes"][1]["sources"] = {"path": "validate", "sha256": "unpinned"}
    path = write_campaign(tmp_path, data)
    report = cli.json("validate", path, code=1)
    data["nodes"][1]["sources"]["sha256"] = report["sources"][0]["actual_sha256"]
    return write_campaign(tmp_path, data), data


# --- validate ------------------------------------------------------------------------------
def test_validate_prints_digest_order_and_edges(cli: Cli, tmp_path: Path) -> None:
    path, _data = with_sources(tmp_path, cli)
    human = cli("validate", path).stdout
    report = cli.json("validate", path)
    assert report["valid"] is True
    assert f"campaign_sha256 {report['campaign_sha256']}" in human
    assert report["order"] == ["calculate", "validate", "render", "cleanup"]
    assert {"from": "calculate", "to": "cleanup", "on": "completion", "via": "after"} in report[
        "edges"
    ]
    assert report["sources"][0]["actual_sha256"] == report["sources"][0]["sha256"]
    assert "calculate -> cleanup  completion (after)" in human


def test_the_digest_ignores_formatting(cli: Cli, tmp_path: Path) -> None:
    first = cli.json("validate", write_campaign(tmp_path, indent=2))["campaign_sha256"]
    second = cli.json("validate", write_campaign(tmp_path, indent=0))["campaign_sha256"]
    assert first == second
    data = raw()
    data["nodes"][0]["cpus"] = 3
    assert cli.json("validate", write_campaign(tmp_path, data))["campaign_sha256"] != first


def test_a_refused_campaign_exits_4_naming_node_and_field(cli: Cli, tmp_path: Path) -> None:
    data = raw()
    data["nodes"][1]["inputs"][0]["source"] = "calc.result"
    data["nodes"][2]["environment"] = {"SECRET": "x"}
    path = write_campaign(tmp_path, data)
    proc = cli("validate", path, code=4)
    assert "node 'render': environment" in proc.stderr  # the model's problems come first
    assert "hint: " in proc.stderr
    data["nodes"][2].pop("environment")
    path = write_campaign(tmp_path, data)
    proc = cli("validate", path, code=4)
    assert "node 'validate': inputs[0].source: names unknown node 'calc'" in proc.stderr
    report = cli.json("validate", path, code=4)
    assert report["valid"] is False
    assert report["problems"][0]["node"] == "validate"
    assert report["problems"][0]["field"] == "inputs[0].source"


def test_missing_and_malformed_files(cli: Cli, tmp_path: Path) -> None:
    assert "does not exist" in cli("validate", tmp_path / "nope.json", code=3).stderr
    broken = tmp_path / "broken.json"
    broken.write_text("{nodes: ")
    assert "not valid JSON" in cli("validate", broken, code=4).stderr


def test_an_edited_source_exits_1_printing_the_actual_digest(cli: Cli, tmp_path: Path) -> None:
    path, data = with_sources(tmp_path, cli)
    (tmp_path / "validate" / "check_scf.py").write_text("print('edited')\n")
    proc = cli("validate", path, code=1)
    report = cli.json("validate", path, code=1)
    actual = report["sources"][0]["actual_sha256"]
    assert actual != data["nodes"][1]["sources"]["sha256"]
    assert actual in proc.stdout and actual in proc.stderr
    assert "sources.sha256" in proc.stderr


def test_a_link_in_the_sources_exits_1(cli: Cli, tmp_path: Path) -> None:
    path, _data = with_sources(tmp_path, cli)
    (tmp_path / "validate" / "lib.py").symlink_to("/etc/hostname")
    proc = cli("validate", path, code=1)
    assert "'lib.py' in the sources of validate is a symbolic link" in proc.stderr


def test_a_source_file_where_an_input_goes_exits_1(cli: Cli, tmp_path: Path) -> None:
    path, data = with_sources(tmp_path, cli)
    (tmp_path / "validate" / "in").write_text("in the way\n")
    report = cli.json("validate", path, code=1)
    data["nodes"][1]["sources"]["sha256"] = report["sources"][0]["actual_sha256"]
    proc = cli("validate", write_campaign(tmp_path, data), code=1)
    assert "inputs[0].path: 'in' is taken by the source entry 'in'" in proc.stderr


# --- artifacts -----------------------------------------------------------------------------
def publish(cli: Cli, tmp_path: Path, path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "out").mkdir(parents=True)
    (ws / "out" / "energy.txt").write_text("-76.02\n")
    manifest = tmp_path / "result.manifest.json"
    manifest.write_text(
        cli(
            "artifact-publish",
            path,
            ws,
            "--node",
            "calculate",
            "--attempt",
            "1",
            "--output",
            "result",
        ).stdout
    )
    return manifest


def test_publish_then_verify(cli: Cli, tmp_path: Path) -> None:
    path = write_campaign(tmp_path)
    manifest = publish(cli, tmp_path, path)
    data = json.loads(manifest.read_text())
    assert data["schema_name"] == "vq.campaign-artifact/1"
    assert data["entries"][0]["path"] == "energy.txt"
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "ws" / "out", copy)
    assert "verified" in cli("artifact-verify", manifest, copy).stdout
    assert cli.json("artifact-verify", manifest, copy)["status"] == "verified"
    (copy / "energy.txt").write_text("-76.03\n")
    (copy / "extra").write_text("x")
    proc = cli("artifact-verify", manifest, copy, code=1)
    assert proc.stdout.splitlines()[0].startswith("digest_mismatch")
    assert "unexpected" in proc.stdout.splitlines()[1]
    assert "digest_mismatch" in proc.stderr
    report = cli.json("artifact-verify", manifest, copy, code=1)
    assert [p["status"] for p in report["problems"]] == ["digest_mismatch", "unexpected"]


def test_publish_refusals(cli: Cli, tmp_path: Path) -> None:
    path = write_campaign(tmp_path)
    publish(cli, tmp_path, path)
    ws = tmp_path / "ws"
    args = ("--node", "calculate", "--attempt", "1", "--output")
    assert "no output 'nope'" in cli("artifact-publish", path, ws, *args, "nope", code=3).stderr
    (ws / "out" / "link").symlink_to("energy.txt")
    proc = cli("artifact-publish", path, ws, *args, "result", code=4)
    assert "symbolic link" in proc.stderr and proc.stdout == ""


# --- status, retry, cleanup ----------------------------------------------------------------
def digest_of(cli: Cli, path: Path) -> str:
    return str(cli.json("validate", path)["campaign_sha256"])


def write_journal(run_dir: Path, data: dict[str, Any]) -> Path:
    run_dir.mkdir(exist_ok=True)
    (run_dir / "journal.json").write_text(json.dumps(data, indent=1))
    return run_dir / "journal.json"


def test_status_reports_nodes_and_what_ran(cli: Cli, tmp_path: Path) -> None:
    path = write_campaign(tmp_path)
    digest = digest_of(cli, path)
    running = record(digest, "calculate", 1, "running")
    running["runtime"] = {"program": "vibe-qc", "version": "1.4", "git_sha": "ab" * 20}
    journal_path = write_journal(tmp_path / "run", journal(digest, running))
    report = cli.json("status", path, journal_path)
    assert report["status"] == "running"
    assert report["campaign_sha256"] == digest
    assert [n["status"] for n in report["nodes"]] == ["running", "waiting", "waiting", "waiting"]
    assert report["attempts"][0]["runtime"]["version"] == "1.4"
    human = cli("status", path, journal_path).stdout
    assert "Ran with" in human and "version=1.4" in human


def test_status_refuses_a_foreign_journal(cli: Cli, tmp_path: Path) -> None:
    path = write_campaign(tmp_path)
    journal_path = write_journal(tmp_path / "run", journal("0" * 64))
    assert "belongs to campaign digest" in cli("status", path, journal_path, code=4).stderr


def make_run(cli: Cli, tmp_path: Path, validate_state: str) -> tuple[Path, Path, str]:
    """A run dir where calculate succeeded (a verified artifact on disk) and validate is in
    ``validate_state``."""
    path = write_campaign(tmp_path)
    digest = digest_of(cli, path)
    manifest_file = publish(cli, tmp_path, path)
    run_dir = tmp_path / "run"
    artifacts = run_dir / "artifacts" / "calculate" / "1"
    artifacts.mkdir(parents=True)
    shutil.copytree(tmp_path / "ws" / "out", artifacts / "result")
    shutil.copy(manifest_file, artifacts / "result.manifest.json")
    sha = manifest_sha256(parse_manifest(json.loads(manifest_file.read_text())))
    attempts = [
        record(digest, "calculate", 1, "succeeded", outputs=[verified("result", sha)]),
        record(
            digest,
            "validate",
            1,
            validate_state,
            inputs=[bound("result", "calculate", 1, "result", sha)],
            outputs=[verified("verdict", "e" * 64)] if validate_state == "succeeded" else [],
        ),
    ]
    write_journal(run_dir, journal(digest, *attempts))
    return path, run_dir, sha


def test_retry_records_the_next_attempt_and_submits_nothing(cli: Cli, tmp_path: Path) -> None:
    path, run_dir, sha = make_run(cli, tmp_path, "failed")
    attempt = cli.json("retry", path, run_dir, "validate")
    assert (attempt["attempt"], attempt["retry_of"], attempt["state"]) == (2, 1, "submitting")
    assert attempt["inputs"][0]["manifest_sha256"] == sha
    stored = json.loads((run_dir / "journal.json").read_text())
    assert [(a["node"], a["attempt"]) for a in stored["attempts"]][-1] == ("validate", 2)
    assert "job_id" not in stored["attempts"][-1]
    status = cli.json("status", path, run_dir / "journal.json")
    assert status["nodes"][1]["status"] == "uncertain"
    assert status["nodes"][1]["next_action"]["key"] == attempt["key"]
    before = (run_dir / "journal.json").read_bytes()
    assert "only a failed or cancelled" in cli("retry", path, run_dir, "validate", code=6).stderr
    assert "no attempt yet" in cli("retry", path, run_dir, "render", code=6).stderr
    assert "no node 'ghost'" in cli("retry", path, run_dir, "ghost", code=3).stderr
    assert (run_dir / "journal.json").read_bytes() == before


def test_retry_refuses_an_altered_artifact(cli: Cli, tmp_path: Path) -> None:
    path, run_dir, _sha = make_run(cli, tmp_path, "failed")
    (run_dir / "artifacts" / "calculate" / "1" / "result" / "energy.txt").write_text("-76.03\n")
    before = (run_dir / "journal.json").read_bytes()
    proc = cli("retry", path, run_dir, "validate", code=6)
    assert "no longer matches" in proc.stderr and "digest_mismatch" in proc.stderr
    assert (run_dir / "journal.json").read_bytes() == before


def test_cleanup_lists_then_applies(cli: Cli, tmp_path: Path) -> None:
    path, run_dir, _sha = make_run(cli, tmp_path, "succeeded")
    for node_id in ("calculate", "validate"):
        (run_dir / "payloads" / node_id / "1").mkdir(parents=True)
        (run_dir / "payloads" / node_id / "1" / "run.py").write_text("x" * 100)
    (run_dir / "incoming" / "validate" / "1").mkdir(parents=True)
    (run_dir / "incoming" / "validate" / "1" / "verdict.json").write_text("{}")
    stage = run_dir / "artifacts" / "validate" / "1" / ".verdict.vqstage-0a1b2c3d"
    stage.parent.mkdir(parents=True)
    stage.write_text("partial")  # an interrupted publication's hidden stage
    listed = cli.json("cleanup", path, run_dir)
    paths = {Path(item["path"]).relative_to(run_dir).as_posix() for item in listed["items"]}
    assert paths == {
        "payloads/calculate/1",
        "payloads/validate/1",
        "incoming/validate/1",
        "artifacts/validate/1/.verdict.vqstage-0a1b2c3d",
    }
    assert listed["applied"] is False and listed["bytes_listed"] == 209
    assert (run_dir / "payloads" / "calculate" / "1").exists()
    # render still needs calculate's artifact: --intermediate keeps it (retention)
    kept = cli.json("cleanup", path, run_dir, "--intermediate")
    assert [i["path"] for i in kept["items"] if "artifacts" in i["path"]] == [str(stage)]
    applied = cli.json("cleanup", path, run_dir, "--apply")
    assert applied["bytes_freed"] == 209 and not stage.exists()
    assert not (run_dir / "payloads" / "calculate" / "1").exists()
    assert (run_dir / "journal.json").exists()
    assert (run_dir / "artifacts" / "calculate" / "1" / "result.manifest.json").exists()
    assert "nothing to clean up" in cli("cleanup", path, run_dir).stdout


def test_cleanup_intermediate_once_every_consumer_succeeded(cli: Cli, tmp_path: Path) -> None:
    path, run_dir, sha = make_run(cli, tmp_path, "succeeded")
    stored = json.loads((run_dir / "journal.json").read_text())
    digest = stored["campaign_sha256"]
    stored["attempts"].append(
        record(
            digest,
            "render",
            1,
            "succeeded",
            inputs=[bound("result", "calculate", 1, "result", sha)],
            outputs=[verified("figure", "f" * 64)],
        )
    )
    write_journal(run_dir, stored)
    report = cli.json("cleanup", path, run_dir, "--intermediate", "--apply")
    assert [Path(i["path"]).relative_to(run_dir).as_posix() for i in report["items"]] == [
        "artifacts/calculate/1/result"
    ]
    assert not (run_dir / "artifacts" / "calculate" / "1" / "result").exists()
    assert (run_dir / "artifacts" / "calculate" / "1" / "result.manifest.json").exists()
    status = cli.json("status", path, run_dir / "journal.json")
    assert status["nodes"][0]["status"] == "succeeded"
    # removed by the cleanup, not tampered with: the status says so
    shown = {(a["node"], a["output"]): a["status"] for a in status["artifacts"]}
    assert shown[("calculate", "result")] == "cleaned_up"
    assert status["nodes"][0]["outputs_verified"] is True


def test_cleanup_refuses_while_the_lock_is_held(cli: Cli, tmp_path: Path) -> None:
    path, run_dir, _sha = make_run(cli, tmp_path, "failed")
    fd = os.open(run_dir / "controller.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert "is held" in cli("cleanup", path, run_dir, code=6).stderr
        assert "is held" in cli("retry", path, run_dir, "validate", code=6).stderr
    finally:
        os.close(fd)
