"""One user must not block another's job (issue 28, finding 4), with real users, a real root
daemon and real CLIs.

* The logs that name jobs (``daemon.log``, the terminal index, …) are the administrators'
  only: ``root:<admin group>`` 0640, so another user cannot learn a job id there.
* The owner the daemon recorded (the submit socket it wrote through, or the first tree it
  found the id in) keeps the job when another user plants a copy of a spec under the same
  id in her own tree: only the impostor copy is quarantined, and the job runs.
* An id found in two trees at a daemon start (no recorded owner) holds every copy, and the
  owner's ``vq status`` says why; removing the other copy releases the job at once, with no
  daemon restart.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.multi_user_support import TERMINAL, System, make_system, needs_multi_user, start

pytestmark = needs_multi_user


@pytest.fixture
def system() -> Iterator[System]:
    yield from make_system()


def _plant(system: System, user: str, job_id: str, spec: dict[str, Any]) -> Path:
    """``user`` writes a copy of ``spec`` under ``job_id`` in her own queue, as she can."""
    who = pwd.getpwnam(user)
    copy = {**spec, "submitter": str(who.pw_uid), "not_before": None}
    path = system.spec_path(user, job_id)
    temp = path.with_name(f".{path.name}.plant")
    temp.write_text(json.dumps(copy))
    os.chown(temp, who.pw_uid, who.pw_gid)
    temp.rename(path)
    return path


def _quarantined(system: System) -> dict[str, str]:
    """path → reason of every quarantined spec, as root's ``vq list --json`` shows them."""
    listing = json.loads(system.admin("list", "--json").stdout)
    return {item["path"]: item["reason"] for item in listing["quarantined"]}


def _reads(user: str, path: Path) -> bool:
    return (
        subprocess.run(
            ["runuser", "-u", user, "--", "cat", str(path)],
            capture_output=True,
            timeout=60,
            check=False,
        ).returncode
        == 0
    )


def test_logs_that_name_jobs_are_for_administrators_only(system: System) -> None:
    job = system.submit("vqa", "--", "true")
    assert system.wait_state("vqa", job, *TERMINAL) == "COMPLETED"
    log = system.root / "daemon.log"
    wait_until(lambda: f"wrote {job}" in log.read_text())
    admins = grp.getgrnam("vq-admins").gr_gid
    # A log left world-readable (by an older vq) is repaired at the next start.
    log.chmod(0o644)
    system.admin("daemon", "stop")
    start(system)
    for path in (log, system.root / "terminal-index.jsonl"):
        info = path.lstat()
        assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, admins, 0o640), path
    assert not _reads("vqb", log) and not _reads("vqb", system.root / "terminal-index.jsonl")
    assert _reads("vqadm", log)


def test_a_planted_copy_is_quarantined_alone_and_the_owners_job_runs(system: System) -> None:
    # Through vqa's submit socket: the daemon records vqa as the owner as it writes it.
    job = system.submit("vqa", "--not-before", "4s", "--", "sh", "-c", "id -u")
    assert system.state("vqa", job) == "PENDING"
    planted = _plant(system, "vqb", job, system.spec("vqa", job))
    reasons = wait_until(lambda: (found := _quarantined(system)) and found, timeout=20)
    assert list(reasons) == [str(planted)], reasons
    assert f"belongs to uid {pwd.getpwnam('vqa').pw_uid}" in reasons[str(planted)]
    # The owner's job is not held: it runs as its owner, in its owner's tree.
    view = json.loads(system.as_user("vqa", "status", job, "--json").stdout)
    assert "several owners" not in json.dumps(view) and "held" not in str(view["pending_reason"])
    assert system.wait_state("vqa", job, *TERMINAL, timeout=30) == "COMPLETED"
    assert system.out("vqa", job).strip() == str(pwd.getpwnam("vqa").pw_uid)
    # The impostor copy is never run nor changed, and its owner is told so.
    assert json.loads(planted.read_text())["state"] == "PENDING"
    assert not (system.tree("vqb") / "jobs" / job).exists()
    theirs = json.loads(system.as_user("vqb", "status", job, "--json").stdout)
    assert theirs["pending_reason"].startswith("quarantined: this id belongs to another owner")


def test_a_collision_found_at_start_holds_the_job_says_why_and_releases_at_once(
    system: System,
) -> None:
    system.admin("daemon", "stop")
    job = system.submit("vqa", "--", "true")  # no daemon: written by vqa's CLI
    planted = _plant(system, "vqb", job, system.spec("vqa", job))
    start(system)  # the daemon finds the id in two trees and recorded neither first
    reasons = wait_until(lambda: (found := _quarantined(system)) and found, timeout=20)
    assert "several owners" in next(iter(reasons.values())), reasons

    def held() -> dict[str, Any] | None:
        view = json.loads(system.as_user("vqa", "status", job, "--json").stdout)
        return view if str(view["pending_reason"]).startswith("held: ") else None

    view = wait_until(held, timeout=20)
    assert "another owner's tree has a job with this id too" in view["pending_reason"]
    assert view["queue_eta"]["eta_seconds"] is None
    assert system.state("vqa", job) == "PENDING"
    text = " ".join(system.as_user("vqa", "status", job).stdout.split())
    assert "held: another owner's tree" in text
    # The other copy goes: the job is released at once, without a daemon restart.
    pid = system.daemon_pid()
    planted.unlink()
    assert system.wait_state("vqa", job, *TERMINAL, timeout=20) == "COMPLETED"
    assert system.daemon_pid() == pid
    assert _quarantined(system) == {}
