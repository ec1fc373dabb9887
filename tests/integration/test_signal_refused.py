"""A user's direct signal to a job's group that the kernel refuses (EPERM: every live
member is root's, as when a multi-user job's group holds only its collector or the
command before it drops to the user) counts as "not signalled", never an error: the
KILLED state is durable by then and the root daemon finishes the stop.

Real processes and a real OS user (``runuser``); the group is root's own ``sleep``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.multi_user_support import SRC, USER_PYTHON, needs_multi_user
from vq.executors import procs

pytestmark = needs_multi_user

#: Run as the user: every control verb of the local executor on root's group.
ACT_AS_USER = """
import sys
from pathlib import Path
from vq.executors.base import JobHandle
from vq.executors.local import LocalExecutor
from vq.paths import StatePaths

executor = LocalExecutor(StatePaths(Path("/nonexistent-vq-root")))
handle = JobHandle("refused-signal", int(sys.argv[1]), int(sys.argv[2]))
for act in (executor.cancel, executor.suspend, executor.resume, executor.force_stop):
    print(act(handle))
"""


@pytest.fixture
def roots_group() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_signal_the_user_may_not_send_is_reported_as_not_sent(
    roots_group: subprocess.Popen[bytes],
) -> None:
    leader = procs.read_stat(roots_group.pid)
    assert leader is not None and leader.pgid == roots_group.pid
    argv = ["runuser", "-u", "vqa", "--", "env", f"PYTHONPATH={SRC}", "HOME=/tmp"]
    argv += [USER_PYTHON, "-c", ACT_AS_USER, str(roots_group.pid), str(leader.start_ticks)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "PermissionError" not in done.stderr
    assert done.stdout.split() == ["False", "False", "False", "False"]
    after = procs.read_stat(roots_group.pid)
    assert after is not None and after.alive and after.state != "T"  # untouched
