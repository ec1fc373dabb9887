"""Chaos: SIGKILL the multi-user root daemon while three users' jobs run (§4.7, §7.1).

Every job appends its ``id -u`` to a ledger in its own workspace when it starts. Each of
two rounds submits a job per user and kills the daemon with SIGKILL once one of them
runs, then restarts it; a last batch runs on the restarted daemon. At the end
every job COMPLETED exactly once (one ledger line: 0 lost, 0 run twice), each as its
owner (the line is the owner's uid), and the owners recorded in the specs are intact.
"""

from __future__ import annotations

import functools
import os
import pwd
import re
import signal
import time
from collections.abc import Iterator

import pytest

from tests.conftest import wait_until
from tests.multi_user_support import TERMINAL, System, make_system, needs_multi_user, start

pytestmark = needs_multi_user

USERS = ("vqa", "vqb", "vqteam1")
JOB = "id -u >> ledger; sleep 8"  # outlives a restart on a loaded machine


@pytest.fixture
def system() -> Iterator[System]:
    yield from make_system(USERS)


def _kill_daemon(system: System) -> None:
    pid = system.daemon_pid()
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not os.path.exists(f"/proc/{pid}") or _zombie(pid), timeout=10)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except OSError:
        return True


def _any_running(system: System, batch: list[tuple[str, str]]) -> bool:
    return any(system.state(user, job) == "RUNNING" for user, job in batch)


def test_sigkilled_root_daemon_loses_nothing_and_runs_each_job_once_as_its_owner(
    system: System,
) -> None:
    jobs: list[tuple[str, str]] = []
    for _ in range(2):  # each round: a batch of every user's jobs, killed while one runs
        batch = [(user, system.submit(user, "--", "sh", "-c", JOB)) for user in USERS]
        jobs += batch
        wait_until(functools.partial(_any_running, system, batch), timeout=60)
        _kill_daemon(system)
        time.sleep(0.5)  # jobs go on without their daemon
        start(system)
    jobs += [(user, system.submit(user, "--", "sh", "-c", JOB)) for user in USERS]
    for user, job in jobs:
        system.wait_state(user, job, *TERMINAL, timeout=120)
    log = (system.root / "daemon.log").read_text()
    reattached = [
        int(n) for n in re.findall(r"recovery: \d+ specs examined, (\d+) reattached", log)
    ]
    assert len(reattached) == 3 and sum(reattached) >= 1, reattached  # jobs outlived the kills
    for user, job in jobs:
        uid = pwd.getpwnam(user).pw_uid
        spec = system.spec(user, job)
        assert spec["state"] == "COMPLETED", (user, job, spec.get("failure_reason"))
        assert spec["submitter"] == str(uid)
        ledger = (system.tree(user) / "jobs" / job / "ledger").read_text().split()
        assert ledger == [str(uid)], (user, job, ledger)
