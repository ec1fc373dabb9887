"""Staging and submitting in one call under the submit guard
(:meth:`LaneRemote.stage_and_submit`) through the real local runner, real ``sh``, ``tar``
and ``flock``, with a stand-in ``sbatch`` on PATH; and which transport failures prove that
nothing ran on the login host."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vq.config.hosts import LaneSettings
from vq.dialects import ParseFailure, SubmitAccepted, dialect_for
from vq.dialects.submit_guard import GuardState, records_dir
from vq.errors import (
    AuthFailed,
    CommandTimeout,
    RemoteProtocolError,
    SshUnreachable,
    TransportError,
)
from vq.executors.scheduler.jobs import not_started
from vq.executors.scheduler.remote import SCRIPT_NAME, LaneRemote, stage_archive
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


def _submit(
    remote: LaneRemote, archive: bytes, token: str, supersede: str | None = None
) -> tuple[GuardState, SubmitAccepted | ParseFailure]:
    records = records_dir(remote.lane.scratch_root, "job1.0123abcd")
    state = remote.stage_and_submit("job1", archive, records, token, supersede)
    return state, remote.parse_submit("job1", state)


def test_one_call_unpacks_then_submits_and_reads_only_the_submit_answer(
    tmp_path: Path,
) -> None:
    remote, calls = _remote(tmp_path, 'echo "4242;cluster"')
    state, answer = _submit(remote, _archive(tmp_path), "a" * 16)
    assert isinstance(answer, SubmitAccepted) and answer.scheduler_job_id == "4242"
    assert (state.kind, state.recorded) == ("answer", False)
    staged = Path(remote.workspace("job1"))
    assert (staged / "input.txt").read_text() == "payload"
    assert (staged / SCRIPT_NAME).is_file()
    assert calls.read_text().split() == ["--parsable", remote.script_path("job1")]
    # A second call of the same attempt gets the recorded answer: sbatch never runs twice.
    state, again = _submit(remote, _archive(tmp_path / "ws"), "b" * 16)
    assert isinstance(again, SubmitAccepted) and again.scheduler_job_id == "4242"
    assert state.recorded
    assert len(calls.read_text().splitlines()) == 1


def test_a_refused_submit_is_the_schedulers_answer(tmp_path: Path) -> None:
    remote, _ = _remote(tmp_path, 'echo "sbatch: error: invalid partition" >&2; exit 1')
    _, answer = _submit(remote, _archive(tmp_path), "a" * 16)
    assert isinstance(answer, ParseFailure)
    assert "invalid partition" in answer.detail


def test_a_staging_failure_is_definite_and_never_submits(tmp_path: Path) -> None:
    remote, calls = _remote(tmp_path, "echo 1")
    (tmp_path / "scratch").write_text("a file where the scratch root should be")
    state, _ = _submit(remote, _archive(tmp_path), "a" * 16)
    assert state.kind == "stage_failed"
    assert not calls.exists()  # sbatch never ran
    (tmp_path / "scratch").unlink()
    state, _ = _submit(remote, b"not a tar archive", "b" * 16)
    assert state.kind == "stage_failed"
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
