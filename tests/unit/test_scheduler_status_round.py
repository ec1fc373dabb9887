"""One status round (:meth:`LaneRemote.status`) through the real local runner and a
stand-in ``squeue`` on PATH that logs its argv: the login's jobs in one query, a recheck
by id for asked ids it did not list, and the id list when the login's answer is over
the output cap."""

from __future__ import annotations

import os
from pathlib import Path

from vq.dialects import SchedulerPhase, StatusReport, dialect_for
from vq.executors.scheduler.remote import LaneRemote
from vq.transport.local import LocalRunner

from .test_scheduler_stage_submit import _lane

P = SchedulerPhase

#: The stand-in: ``--me`` prints $LOGIN_ROWS (or $LOGIN_BYTES bytes of other jobs'
#: rows); an id list prints the row of each id named in $BY_ID_ROWS.
SQUEUE = r"""#!/bin/sh
echo "$*" >> "$CALLS"
case "$*" in
  *--me*)
    if [ -n "$LOGIN_BYTES" ]; then
      yes '5|PENDING|None|(null)|0:00|1:00' | head -c "$LOGIN_BYTES"
    else
      printf '%b' "$LOGIN_ROWS"
    fi ;;
  *) printf '%b' "$BY_ID_ROWS" ;;
esac
"""


def _remote(tmp_path: Path, **env: str) -> tuple[LaneRemote, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    squeue = bin_dir / "squeue"
    squeue.write_text(SQUEUE)
    squeue.chmod(0o755)
    calls = tmp_path / "calls"
    environ = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls)}
    runner = LocalRunner({**environ, "LOGIN_ROWS": "", "BY_ID_ROWS": "", **env})
    return LaneRemote(_lane(tmp_path / "scratch"), runner, dialect_for("slurm")), calls


def _calls(calls: Path) -> list[str]:
    return calls.read_text().splitlines()


def test_a_round_of_listed_jobs_is_one_query_of_the_login(tmp_path: Path) -> None:
    rows = (
        r"12|RUNNING|None|vm|0:01|2:00\n"
        r"77|PENDING|None|(null)|0:00|1:00\n"  # the login's own job, not vq's
        r"13|PENDING|Priority|(null)|0:00|1:00\n"
    )
    remote, calls = _remote(tmp_path, LOGIN_ROWS=rows)
    report = remote.status(["12", "13"])
    assert isinstance(report, StatusReport)
    assert {k: v.phase for k, v in report.observed.items()} == {"12": P.RUNNING, "13": P.QUEUED}
    assert report.unlisted == () and report.warnings == ()
    assert len(_calls(calls)) == 1 and "--me" in _calls(calls)[0]


def test_ids_the_login_did_not_list_are_asked_by_id(tmp_path: Path) -> None:
    remote, calls = _remote(
        tmp_path,
        LOGIN_ROWS=r"12|RUNNING|None|vm|0:01|2:00\n",
        BY_ID_ROWS=r"13|RUNNING|None|vm|0:05|2:00\n",
    )
    report = remote.status(["12", "13", "14"])
    assert isinstance(report, StatusReport)
    assert set(report.observed) == {"12", "13"} and report.unlisted == ("14",)
    assert _calls(calls)[1].split()[1:3] == ["--states=all", "--jobs=13,14"]


def test_an_oversized_login_answer_falls_back_to_the_id_list(tmp_path: Path) -> None:
    remote, calls = _remote(
        tmp_path,
        LOGIN_BYTES=str((1 << 20) + 4096),
        BY_ID_ROWS=r"12|RUNNING|None|vm|0:01|2:00\n13|COMPLETED|None|vm|0:09|2:00\n",
    )
    report = remote.status(["12", "13"])
    assert isinstance(report, StatusReport)
    assert {k: v.phase for k, v in report.observed.items()} == {"12": P.RUNNING, "13": P.ENDED}
    assert [("--me" in c, "--jobs=12,13" in c) for c in _calls(calls)] == [
        (True, False),
        (False, True),
    ]
