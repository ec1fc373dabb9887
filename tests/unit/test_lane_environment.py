"""A lane job's named variables: read from its capture, exported by the batch script
(run here by real dash under GNU time), and its ``_vq/environment`` never staged."""

from __future__ import annotations

import io
import json
import os
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from vq.dialects import SLURM, TORQUE, SchedulerDialect, UnsafeSchedulerValue
from vq.domain.environment import CapturedEnvironment
from vq.executors.scheduler.forwarded import UnreadableEnvironment, forwarded_variables
from vq.executors.scheduler.remote import stage_archive
from vq.paths import StateLayout

from .dialect_requests import CASES
from .test_dialect_script_run import HOSTILE_TEXT, Run

JOB = "0123456789ab"


def _layout(tmp_path: Path) -> StateLayout:
    layout = StateLayout(tmp_path / "state")
    layout.meta_dir(JOB).mkdir(parents=True)
    return layout


def test_forwarded_variables_come_from_a_named_capture(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    assert forwarded_variables(layout, JOB) == {}  # the submit named nothing
    named = CapturedEnvironment("daemon", {"MYBASIS": "def2-svp", "OTHER": "x"})
    layout.environment(JOB).write_bytes(named.to_bytes())
    assert forwarded_variables(layout, JOB) == {"MYBASIS": "def2-svp", "OTHER": "x"}


def test_a_whole_shell_from_before_lanes_defaulted_to_none_is_not_forwarded(
    tmp_path: Path,
) -> None:
    layout = _layout(tmp_path)
    whole = CapturedEnvironment("submitter", {"HOME": "/home/me", "PATH": "/home/me/bin"})
    layout.environment(JOB).write_bytes(whole.to_bytes())
    assert forwarded_variables(layout, JOB) == {}


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (json.dumps({"variables": {"1BAD": "secret-value"}}).encode(), "is not a variable"),
    ],
)
def test_an_unusable_capture_is_an_error_without_values(
    tmp_path: Path, content: bytes, why: str
) -> None:
    layout = _layout(tmp_path)
    layout.environment(JOB).write_bytes(content)
    with pytest.raises(UnreadableEnvironment, match=why) as caught:
        forwarded_variables(layout, JOB)
    assert "secret-value" not in str(caught.value)


def test_a_fifo_in_its_place_fails_at_once(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    os.mkfifo(layout.environment(JOB))
    with pytest.raises(UnreadableEnvironment, match="cannot be read"):
        forwarded_variables(layout, JOB)


def test_the_capture_is_never_staged(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "_vq").mkdir(parents=True)
    (workspace / "input.xyz").write_text("H 0 0 0\n")
    (workspace / "_vq" / "environment").write_text('{"variables": {"A": "secret"}}')
    archive = stage_archive(workspace, "#!/bin/sh\ntrue\n")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        names = tar.getnames()
    assert "input.xyz" in names and "_vq/job.sh" in names
    assert "_vq/environment" not in names and b"secret" not in archive


@pytest.mark.parametrize("dialect", [SLURM, TORQUE], ids=["slurm", "torque"])
def test_the_script_exports_them_quoted_after_its_tools_are_checked(
    tmp_path: Path, dialect: SchedulerDialect
) -> None:
    values = {f"V{i}": text for i, text in enumerate(HOSTILE_TEXT) if "\x00" not in text}
    values["PATH"] = "/opt/chem/bin:/usr/bin:/bin"  # as sbatch --export would set it
    probe = "; ".join(f'printf "%s\\000" "${name}"' for name in sorted(values))
    run = Run(tmp_path, dialect, command=("sh", "-c", probe), user_environment=values)
    done = run.run()
    assert done.returncode == 0, done.stderr
    assert run.marker("exit-code").strip() == "0"
    assert run.receipt()["exit_code"] == 0
    printed = run.stdout().split(b"\0")[:-1]
    assert [p.decode() for p in printed] == [values[name] for name in sorted(values)]
    script = run.script.read_text()
    assert script.index("GNU time and the receipt formatter") < script.index("export PATH=")


@pytest.mark.parametrize("name", ["vq_time", "VQ_JOB_ID", "Vq_x", "1BAD", "A-B", ""])
def test_vq_names_and_non_identifiers_are_refused(name: str) -> None:
    request = replace(CASES["basic"], user_environment={name: "x"})
    with pytest.raises(UnsafeSchedulerValue, match="user_environment"):
        SLURM.render_script(request)
