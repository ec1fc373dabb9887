"""The submit guard (vq.dialects.submit_guard) run by a real ``sh`` with a real ``flock``:
an attempt's submit command runs at most once, whoever calls and however often, unless a
call proved never submitted is superseded by its exact token.

The "submit command" is a small script that counts its runs in a file and prints a job
id; a slow one holds the guard's lock while the test makes other calls.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.conftest import wait_until
from vq.dialects.submit_guard import (
    BUSY,
    IN_DOUBT,
    STAGE_FAILED,
    GuardState,
    guarded_submit_argv,
    parse_guard,
    probe_argv,
    records_dir,
)

A, B, C = "a" * 16, "b" * 16, "c" * 16


def _submitter(tmp_path: Path, *, pause: float = 0.0, rc: int = 0) -> list[str]:
    script = tmp_path / "fake-sbatch"
    script.write_text(
        "#!/bin/sh\n"
        f'echo run >>"{tmp_path}/runs"\n'
        f"sleep {pause}\n"
        f'n=$(wc -l <"{tmp_path}/runs"); echo "400$n"; echo "said on stderr" >&2\n'
        f"exit {rc}\n"
    )
    script.chmod(0o755)
    return [str(script), "--parsable", "/job.sh"]


def _runs(tmp_path: Path) -> int:
    try:
        return len((tmp_path / "runs").read_text().splitlines())
    except FileNotFoundError:
        return 0


def _call(argv: list[str], stdin: bytes = b"") -> tuple[int, GuardState]:
    done = subprocess.run(argv, input=stdin, capture_output=True, timeout=30, check=False)
    return done.returncode, parse_guard(done.stdout.decode(), done.stderr.decode())


def _probe(records: str) -> GuardState:
    return _call(probe_argv(records))[1]


def test_a_fresh_call_runs_once_and_every_later_call_gets_the_recorded_answer(
    tmp_path: Path,
) -> None:
    records = str(tmp_path / "rec")
    assert _probe(records).kind == "none"
    rc, first = _call(guarded_submit_argv(records, A, _submitter(tmp_path)))
    assert (rc, first.kind, first.rc, first.token, first.recorded) == (0, "answer", 0, A, False)
    assert first.stdout.strip() == "4001"
    assert "said on stderr" in first.stderr
    for token in (B, C):
        rc, again = _call(guarded_submit_argv(records, token, _submitter(tmp_path)))
        assert (again.kind, again.rc, again.token, again.recorded) == ("answer", 0, A, True)
        assert again.stdout.strip() == "4001"
    assert _runs(tmp_path) == 1
    probed = _probe(records)
    assert (probed.kind, probed.token, probed.stdout.strip()) == ("answer", A, "4001")


def test_a_refusal_is_recorded_with_its_status_and_never_retried_by_another_call(
    tmp_path: Path,
) -> None:
    records = str(tmp_path / "rec")
    rc, first = _call(guarded_submit_argv(records, A, _submitter(tmp_path, rc=1)))
    assert (rc, first.kind, first.rc) == (1, "answer", 1)
    _, again = _call(guarded_submit_argv(records, B, _submitter(tmp_path)))
    assert (again.kind, again.rc, again.recorded) == ("answer", 1, True)
    assert _runs(tmp_path) == 1


def test_a_call_while_another_is_in_flight_is_busy_and_runs_nothing(tmp_path: Path) -> None:
    records = str(tmp_path / "rec")
    slow = subprocess.Popen(
        guarded_submit_argv(records, A, _submitter(tmp_path, pause=3)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_until(lambda: _runs(tmp_path) == 1, 10)
    rc, busy = _call(guarded_submit_argv(records, B, _submitter(tmp_path)))
    assert (rc, busy.kind) == (BUSY, "busy")
    assert _probe(records).kind == "busy"
    out, err = slow.communicate(timeout=30)
    assert parse_guard(out.decode(), err.decode()).kind == "answer"
    assert _runs(tmp_path) == 1


def test_a_guard_killed_mid_submit_keeps_the_lock_until_the_submit_command_ends(
    tmp_path: Path,
) -> None:
    """kill -9 of the guard's shell (the SSH session's process) does not free the lock
    while the submit command it started still runs: the command may still land."""
    records = str(tmp_path / "rec")
    guard = subprocess.Popen(
        guarded_submit_argv(records, A, _submitter(tmp_path, pause=3)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_until(lambda: _runs(tmp_path) == 1, 10)
    os.kill(guard.pid, signal.SIGKILL)
    guard.wait(timeout=10)
    assert _probe(records).kind == "busy"
    rc, busy = _call(guarded_submit_argv(records, B, _submitter(tmp_path), supersede=A))
    assert (rc, busy.kind) == (BUSY, "busy")
    # Once the orphaned command is gone, the call is in doubt: it started, no answer.
    wait_until(lambda: _probe(records).kind == "in_doubt", 20)
    rc, doubt = _call(guarded_submit_argv(records, B, _submitter(tmp_path)))
    assert (rc, doubt.kind, doubt.token) == (IN_DOUBT, "in_doubt", A)
    assert _runs(tmp_path) == 1
    # Only the exact token of the call in doubt supersedes it.
    _, wrong = _call(guarded_submit_argv(records, C, _submitter(tmp_path), supersede=B))
    assert wrong.kind == "in_doubt"
    rc, fresh = _call(guarded_submit_argv(records, C, _submitter(tmp_path), supersede=A))
    assert (rc, fresh.kind, fresh.token, fresh.recorded) == (0, "answer", C, False)
    assert _runs(tmp_path) == 2
    # The superseding call's answer is the one recorded from now on.
    _, later = _call(guarded_submit_argv(records, A, _submitter(tmp_path), supersede=A))
    assert (later.token, later.recorded, later.stdout.strip()) == (C, True, "4002")
    assert _runs(tmp_path) == 2


def test_staging_happens_under_the_guard_and_a_failed_stage_runs_nothing(
    tmp_path: Path,
) -> None:
    records, workspace = str(tmp_path / "rec"), tmp_path / "ws"
    rc, failed = _call(
        guarded_submit_argv(records, A, _submitter(tmp_path), workspace=str(workspace)),
        b"not a tar",
    )
    assert (rc, failed.kind) == (STAGE_FAILED, "stage_failed")
    assert _runs(tmp_path) == 0 and _probe(records).kind == "none"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("input.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    rc, staged = _call(
        guarded_submit_argv(records, B, _submitter(tmp_path), workspace=str(workspace)),
        buffer.getvalue(),
    )
    assert (rc, staged.kind) == (0, "answer")
    assert (workspace / "input.txt").read_text() == "hi"
    # A late call never stages over the submitted job's workspace.
    (workspace / "input.txt").write_text("job output")
    _call(
        guarded_submit_argv(records, C, _submitter(tmp_path), workspace=str(workspace)),
        buffer.getvalue(),
    )
    assert (workspace / "input.txt").read_text() == "job output"


@pytest.mark.parametrize(
    ("stdout", "kind"),
    [
        ("Loading cluster module\nvq-submit-answer 0 " + A + " fresh\n123\n", "answer"),
        ("vq-submit-busy\n", "busy"),
        ("vq-submit-in-doubt " + A + "\n", "in_doubt"),
        ("vq-submit-none\n", "none"),
        ("vq-submit-nolock\n", "no_lock"),
        ("vq-stage-failed\n", "stage_failed"),
        ("", "unreadable"),
        ("123\n", "unreadable"),
        ("vq-submit-answer 0 not-a-token fresh\n123\n", "unreadable"),
        ("vq-submit-answer 9999 " + A + " fresh\n", "unreadable"),
    ],
)
def test_parse_guard_reads_the_first_marker_only(stdout: str, kind: str) -> None:
    state = parse_guard(stdout, "")
    assert state.kind == kind
    if kind == "answer":
        assert state.stdout.strip() == "123"


def test_records_dir_refuses_a_name_that_could_leave_its_root() -> None:
    assert records_dir("/scratch/", "abc.0123") == "/scratch/.vibeqc-cluster/submits/abc.0123"
    for bad in ("../x", "a/b", "", ".hidden", "a..b"):
        with pytest.raises(ValueError):
            records_dir("/scratch", bad)
