"""Staging and submitting in one call (:meth:`LaneRemote.stage_and_submit`) through the
real local runner, real ``sh`` and ``tar``, with a stand-in ``sbatch`` on PATH; and which
transport failures prove that nothing ran on the login host."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vq.dialects import ParseFailure, SubmitAccepted, dialect_for
from vq.errors import (
    AuthFailed,
    CommandTimeout,
    RemoteProtocolError,
    SshUnreachable,
    TransportError,
)
from vq.executors.scheduler.jobs import not_started
from vq.executors.scheduler.remote import SCRIPT_NAME, LaneRemote, StageFailed, stage_archive
from vq.hosts_config import LaneSettings
from vq.transport.local import LocalRunner


def _lane(scratch: Path) -> LaneSettings:
    return LaneSettings(
        name="cluster",
        dialect="slurm",
        ssh="localhost",
        ssh_options=(),
        host_key_policy="strict",
        ssh_timeout=5.0,
        scratch_root=str(scratch),
        driver="localhost",
        partition=None,
        account=None,
        qos=None,
        mem_directive="omit",
        node_scratch_dir=None,
        prologue=(),
        epilogue=(),
        program_hooks={},
        gnu_time_command="/usr/bin/time",
        max_jobs=4,
        poll_interval=30.0,
        rpc_per_minute=6,
        accounting="sacct",
    )


def _remote(tmp_path: Path, sbatch_body: str) -> tuple[LaneRemote, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "sbatch-calls"
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n{sbatch_body}\n')
    sbatch.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    runner = LocalRunner(env)
    return LaneRemote(_lane(tmp_path / "scratch"), runner, dialect_for("slurm")), calls


def _archive(tmp_path: Path) -> bytes:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "input.txt").write_text("payload")
    return stage_archive(workspace, "#!/bin/sh\ntrue\n")


def test_one_call_unpacks_then_submits_and_reads_only_the_submit_answer(
    tmp_path: Path,
) -> None:
    remote, calls = _remote(tmp_path, 'echo "4242;cluster"')
    answer = remote.stage_and_submit("job1", _archive(tmp_path))
    assert isinstance(answer, SubmitAccepted) and answer.scheduler_job_id == "4242"
    staged = Path(remote.workspace("job1"))
    assert (staged / "input.txt").read_text() == "payload"
    assert (staged / SCRIPT_NAME).is_file()
    assert calls.read_text().split() == ["--parsable", remote.script_path("job1")]
    # Idempotent: staging the same job again overwrites, and submits again.
    again = remote.stage_and_submit("job1", _archive(tmp_path / "ws"))
    assert isinstance(again, SubmitAccepted) and again.scheduler_job_id == "4242"
    assert len(calls.read_text().splitlines()) == 2


def test_a_refused_submit_is_the_schedulers_answer(tmp_path: Path) -> None:
    remote, _ = _remote(tmp_path, 'echo "sbatch: error: invalid partition" >&2; exit 1')
    answer = remote.stage_and_submit("job1", _archive(tmp_path))
    assert isinstance(answer, ParseFailure)
    assert "invalid partition" in answer.detail


def test_a_staging_failure_is_definite_and_never_submits(tmp_path: Path) -> None:
    remote, calls = _remote(tmp_path, "echo 1")
    (tmp_path / "scratch").write_text("a file where the scratch root should be")
    with pytest.raises(StageFailed):
        remote.stage_and_submit("job1", _archive(tmp_path))
    assert not calls.exists()  # sbatch never ran
    with pytest.raises(StageFailed):
        remote.stage_and_submit("job1", b"not a tar archive")
    assert not calls.exists()


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (SshUnreachable("x", detail="ssh: connect to host h port 1: Connection refused"), True),
        (SshUnreachable("x", detail="ssh: Could not resolve hostname h: unknown"), True),
        (AuthFailed("x", detail="Permission denied (publickey)."), True),
        (SshUnreachable("x", detail="Timeout, server h not responding."), False),
        (SshUnreachable("x", detail=""), False),  # no answer within the deadline
        (RemoteProtocolError("x", detail="Connection closed by h"), False),
        (CommandTimeout("x"), False),
    ],
)
def test_only_a_connection_never_made_proves_nothing_ran(
    exc: TransportError, expected: bool
) -> None:
    assert not_started(exc) is expected
