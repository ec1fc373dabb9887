"""``POST /api/v1/jobs`` takes ``recover_on_reboot`` (``vq submit --auto-resume``, §4.7)
and ``expected_sha`` (``--expected-sha``, §3.4) like the CLI: the flag reaches the spec,
enters the idempotency intent, and earns a sibling when a restart lost the job."""

from __future__ import annotations

import os
import signal

from tests.conftest import wait_until
from tests.inprocess.web.test_agent_api import queue_ids, submit
from tests.web.conftest import Web
from vq._proc_stat import is_alive


def test_an_api_job_asking_for_auto_resume_gets_a_sibling_after_a_lost_restart(
    web: Web,
) -> None:
    vq = web.vq
    vq.start_daemon()
    admin = web.admin()
    body = {"command": ["sleep", "300"], "idempotency_key": "resume-1", "recover_on_reboot": True}
    answer = submit(web, body, admin)
    assert answer.status_code == 201, answer.text
    marked = answer.json()["id"]
    assert answer.json()["recover_on_reboot"] is True
    again = submit(web, body, admin)  # the same intent: the same job
    assert again.status_code == 200 and again.json()["id"] == marked
    other = submit(web, {**body, "recover_on_reboot": False}, admin)
    assert other.status_code == 409, other.text  # the flag is part of the intent
    plain = submit(web, {"command": ["sleep", "300"], "idempotency_key": "plain-1"}, admin)
    assert plain.status_code == 201 and plain.json()["recover_on_reboot"] is False
    unmarked = plain.json()["id"]

    groups = {job: wait_until(lambda job=job: vq.spec(job)["pgid"]) for job in (marked, unmarked)}
    daemon = vq.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)  # a crash: the jobs' groups are lost with it
    wait_until(lambda: not is_alive(daemon), timeout=15)
    for pgid in groups.values():
        os.killpg(pgid, signal.SIGKILL)
    vq.start_daemon()

    assert vq.state(marked) == vq.state(unmarked) == "ABORTED_BY_QUEUE"
    siblings = [job for job in queue_ids(vq) if job not in (marked, unmarked)]
    assert len(siblings) == 1, siblings
    assert vq.spec(siblings[0])["parent_jobid"] == marked
    vq.run("kill", siblings[0])


def test_an_expected_sha_without_a_program_is_refused_and_nothing_is_written(web: Web) -> None:
    web.vq.start_daemon()
    body = {"command": ["true"], "idempotency_key": "pin-1", "expected_sha": "abcdef12"}
    answer = submit(web, body, web.admin())
    assert 400 <= answer.status_code < 500, answer.text
    error = answer.json()["error"]
    assert "needs --program" in error["message"] and error["hint"]
    assert queue_ids(web.vq) == []
