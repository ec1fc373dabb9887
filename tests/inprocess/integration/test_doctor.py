"""`vq doctor` on a healthy and on a deliberately broken state root."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Vq


def _checks(vq: Vq) -> tuple[int, dict[str, list[dict[str, str]]]]:
    result = vq.run("doctor", "--json", check=False)
    payload = json.loads(result.stdout)
    by_name: dict[str, list[dict[str, str]]] = {}
    for check in payload["checks"]:
        by_name.setdefault(check["name"], []).append(check)
    assert payload["ok"] is (result.returncode == 0)
    return result.returncode, by_name


def test_doctor_healthy(vq: Vq) -> None:
    vq.start_daemon()
    vq.wait_state(vq.submit("--", "true"), "COMPLETED")
    code, checks = _checks(vq)
    assert code == 0
    assert checks["state root"][0]["status"] == "ok"
    assert checks["daemon"][0]["status"] == "ok"
    assert checks["config"][0]["status"] == "ok"
    assert checks["specs"][0]["message"] == "1 spec(s), all readable"
    assert checks["cgroups"][0]["status"] in ("ok", "warn")
    assert "stale files" not in checks
    human = vq.run("doctor").stdout
    assert "✓ daemon:" in human


def test_doctor_unusable_state_root(vq: Vq, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    vq.env["VQ_STATE_DIR"] = str(blocker / "state")
    code, checks = _checks(vq)
    assert code == 1
    assert checks["state root"][0]["status"] == "fail"


LANES = """[hosts.cluster]
ssh = "login.example"
scheduler_dialect = "slurm"
scratch_root = "/scratch/me"

[hosts.cluster.scheduler_program_hooks.fit]
prologue = ["module load fit"]

[hosts.cluster.scheduler_program_hooks.ghost]
prologue = ["module load ghost"]

[hosts.cluster.scheduler_programs.fit]
python = "/opt/fit/bin/python"
git_dir = "/opt/fit"

[hosts.cluster.scheduler_programs.tool]
python = "/opt/tool/bin/python"
git_dir = "/opt/tool"

[programs.fit]
kind = "venv"
python = "/usr/bin/python3"
git_dir = "/nonexistent/fit-checkout"

[programs.tool]
kind = "binary"
path = "/bin/true"
"""


GOOD_LANE = """[hosts.cluster]
ssh = "login.example"
scheduler_dialect = "slurm"
scratch_root = "/scratch/me"

[hosts.cluster.scheduler_program_hooks.fit]
prologue = ["module load fit"]

[programs.fit]
kind = "venv"
python = "/usr/bin/python3"
git_dir = "/nonexistent/fit-checkout"
"""


def test_doctor_checks_that_lane_program_keys_name_registered_programs(vq: Vq) -> None:
    config_dir = Path(vq.env["VQ_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(LANES)
    _, checks = _checks(vq)
    messages = sorted(c["message"] for c in checks["lane programs"])
    assert all(c["status"] == "warn" for c in checks["lane programs"])
    assert messages == [
        "[hosts.cluster.scheduler_program_hooks.ghost] names no registered program",
        "[hosts.cluster.scheduler_programs.tool]: program 'tool' is not a managed runtime "
        "(binary); the entry is never used",
    ]
    (config_dir / "config.toml").write_text(GOOD_LANE)
    _, checks = _checks(vq)
    assert [c["status"] for c in checks["lane programs"]] == ["ok"]
    assert checks["lane programs"][0]["message"] == "1 lane program entries name programs"
