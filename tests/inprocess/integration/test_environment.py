"""Jobs run in the submitting shell's environment (``--export``/``--env``), end to end."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.conftest import Vq, wait_until

PROBE = 'echo "basis=${MYBASIS-unset} other=${OTHER-unset} job=$VQ_JOB_ID"; command -v python'


def _fake_venv(tmp_path: Path) -> Path:
    """A directory with its own `python`, as `source chem/bin/activate` would put first."""
    bin_dir = tmp_path / "chem" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text("#!/bin/sh\necho chem-python\n")
    python.chmod(0o755)
    return bin_dir


def _run(vq: Vq, env: dict[str, str], *args: str) -> str:
    shell = Vq(vq.root, env)
    job = shell.submit(*args, "--", "sh", "-c", PROBE)
    assert shell.run("wait", job, check=False).returncode == 0
    return job


def test_local_submit_exports_the_whole_shell(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon()
    bin_dir = _fake_venv(tmp_path)
    env = {**vq.env, "MYBASIS": "def2-svp", "PATH": f"{bin_dir}:{vq.env['PATH']}"}
    job = _run(vq, env)
    out = vq.run("logs", job).stdout
    assert f"basis=def2-svp other=unset job={job}" in out
    assert out.strip().endswith(str(bin_dir / "python"))
    stored = vq.root / "jobs" / job / "_vq" / "environment"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert json.loads(stored.read_text())["variables"]["MYBASIS"] == "def2-svp"
    # The value is in the private file only: not in the spec, status, events or the log.
    assert "def2-svp" not in vq.run("status", job, "--json").stdout
    assert "def2-svp" not in vq.run("events", job, "--json").stdout
    assert "def2-svp" not in (vq.root / "queue" / f"{job}.json").read_text()
    assert "def2-svp" not in (vq.root / "daemon.log").read_text(errors="replace")


def test_export_none_names_and_env(vq: Vq) -> None:
    vq.start_daemon()
    env = {**vq.env, "MYBASIS": "def2-svp", "OTHER": "x"}
    job = _run(vq, env, "--export", "NONE", "--env", "OTHER=set-by-flag")
    assert "basis=unset other=set-by-flag" in vq.run("logs", job).stdout
    job = _run(vq, env, "--export", "MYBASIS,OTHER=given")
    assert "basis=def2-svp other=given" in vq.run("logs", job).stdout
    job = _run(vq, env, "--export", "MYBASIS")
    assert "basis=def2-svp other=unset" in vq.run("logs", job).stdout


def test_config_changes_the_default_and_flags_win(vq: Vq) -> None:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('[submit]\nexport = "NONE"\n')
    vq.start_daemon()
    env = {**vq.env, "MYBASIS": "def2-svp"}
    job = _run(vq, env)
    assert "basis=unset" in vq.run("logs", job).stdout
    assert not (vq.root / "jobs" / job / "_vq" / "environment").exists()
    job = _run(vq, env, "--export", "ALL")
    assert "basis=def2-svp" in vq.run("logs", job).stdout


def test_without_a_daemon_the_capture_is_kept_until_one_starts(vq: Vq) -> None:
    env = {**vq.env, "MYBASIS": "def2-svp"}
    job = Vq(vq.root, env).submit("--", "sh", "-c", PROBE)
    vq.start_daemon()
    assert vq.run("wait", job, check=False).returncode == 0
    assert "basis=def2-svp" in vq.run("logs", job).stdout


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--env", "1BAD=x"), "'1BAD' is not a variable name"),
        (("--env", "NOVALUE"), "needs a value"),
        (("--env", "VQ_JOB_ID=x"), "VQ_JOB_ID is reserved"),
        (("--export", ",,"), "--export needs"),
    ],
)
def test_bad_environment_flags_are_refused(vq: Vq, args: tuple[str, ...], named: str) -> None:
    proc = vq.run("submit", *args, "--", "true", check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("vq: error: ") and named in proc.stderr
    assert "hint:" in proc.stderr and "Traceback" not in proc.stderr
    assert not (vq.root / "queue").exists() or not list((vq.root / "queue").glob("*.json"))


def test_retries_and_resubmit_reuse_the_capture(vq: Vq) -> None:
    vq.start_daemon()
    env = {**vq.env, "MYBASIS": "def2-svp"}
    script = 'echo "basis=$MYBASIS"; test -e again || { touch again; exit 3; }'
    job = Vq(vq.root, env).submit("--retry", "1", "--retry-backoff", "1s", "--", "sh", "-c", script)
    assert vq.run("wait", job, check=False).returncode == 0
    assert vq.run("logs", job).stdout.count("basis=def2-svp") == 2
    clone = vq.run("resubmit", job).stdout.strip().split()[-1]
    wait_until(lambda: vq.state(clone) == "COMPLETED")
    assert "basis=def2-svp" in vq.run("logs", clone).stdout
    copied = vq.root / "jobs" / clone / "_vq" / "environment"
    assert stat.S_IMODE(copied.stat().st_mode) == 0o600


def test_vq_variables_stay_vqs(vq: Vq) -> None:
    """A submit from inside a job (VQ_JOB_ID set in the shell) gets its own VQ_* values."""
    vq.start_daemon()
    env = {**vq.env, "VQ_JOB_ID": "000000000000", "VQ_CPUS": "64"}
    job = Vq(vq.root, env).submit("--cpus", "1", "--", "sh", "-c", "echo $VQ_JOB_ID $VQ_CPUS")
    assert vq.run("wait", job, check=False).returncode == 0
    assert vq.run("logs", job).stdout == f"{job} 1\n"
    assert os.environ.get("VQ_JOB_ID") != job
