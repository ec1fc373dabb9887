"""The lifecycle writer's promises, on a real daemon (and, where timing would make a
real daemon flaky, on the real components in-process).

* Every path to a terminal state gets the same end-of-job bookkeeping: jobs settled by
  the startup recovery pass get their webhook, rerun sibling and workdir sweep; KILLED
  and watchdog verdicts get ``failure_tail`` once the group is gone.
* A command the collector cannot start is a dispatch failure, never a payload exit code
  consuming a retry.
* A spec aimed at a scheduler lane that is not configured is FAILED at dispatch.
* A refused transition appends no event.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from tests.conftest import Vq, wait_until
from tests.webhook_support import Receiver, receiver_fixture  # noqa: F401 (the `receiver` fixture)
from vq._proc_stat import is_alive


def _config(vq: Vq, text: str) -> None:
    config_dir = Path(vq.env["VQ_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(text)


def _kill_daemon(vq: Vq) -> None:
    pid = vq.daemon_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not is_alive(pid), timeout=15)


def _log(vq: Vq) -> str:
    return (vq.root / "daemon.log").read_text()[-3000:]


# --- jobs settled by recovery get the end-of-job bookkeeping ------------------------------


def test_jobs_settled_by_recovery_get_webhook_rerun_and_sweep(
    vq: Vq,
    tmp_path: Path,
    receiver: Callable[..., Receiver],
) -> None:
    server = receiver()
    _config(vq, f'[notifications]\nwebhook_url = "{server.url}"\n')
    go = tmp_path / "go"
    wait_for_go = f"while [ ! -e {go} ]; do sleep 0.05; done"
    vq.start_daemon("--max-cpus", "8")
    rerun = vq.submit(
        "--rerun-until-file-exists", "never-there", "--rerun-max", "1", "--",
        "sh", "-c", wait_for_go,
    )  # fmt: skip
    swept = vq.submit(
        "--clean-workdir", "--", "sh", "-c", f'touch "$VQ_WORKDIR/scratch"; {wait_for_go}; exit 3'
    )
    aborted = vq.submit("--", "sleep", "300")
    for job in (rerun, swept, aborted):
        wait_until(lambda job=job: vq.spec(job)["pgid"])
    wait_until(lambda: (vq.root / "workdirs" / swept / "scratch").exists())
    _kill_daemon(vq)
    # While no daemon runs: two jobs end and their collectors record it; the third job's
    # whole group is killed, so it leaves no marker (ABORTED_BY_QUEUE at the restart).
    os.killpg(vq.spec(aborted)["pgid"], signal.SIGKILL)
    go.touch()
    for job in (rerun, swept):
        wait_until(lambda job=job: (vq.root / "jobs" / job / "_vq" / "exit-code").exists())
    assert server.bodies() == []
    vq.start_daemon("--max-cpus", "8")
    assert vq.state(rerun) == "COMPLETED"
    assert vq.state(swept) == "FAILED"
    assert vq.state(aborted) == "ABORTED_BY_QUEUE"
    # The webhook (§6.2: orphan recovery and queue abort are call sites).
    wait_until(lambda: len(server.bodies()) >= 3, timeout=20)
    states = {b["job"]["id"]: b["job"]["state"] for b in server.bodies()}
    assert {rerun: "COMPLETED", swept: "FAILED", aborted: "ABORTED_BY_QUEUE"}.items() <= (
        states.items()
    ), _log(vq)
    # The --rerun-until-file-exists sibling.
    wait_until(
        lambda: any(j.get("parent_jobid") == rerun for j in vq.json("list")["jobs"]), timeout=20
    )
    # The --clean-workdir sweep.
    wait_until(lambda: vq.spec(swept).get("workdir_swept_at"), timeout=20)
    assert not (vq.root / "workdirs" / swept).exists()


# --- failure_tail on every non-COMPLETED ending --------------------------------------------


# --- a command that cannot start is a dispatch failure ----------------------------------


# --- no executor for a scheduler target ------------------------------------------------------


# --- a refused transition appends no event ------------------------------------------------
