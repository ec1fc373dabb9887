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

import json
from pathlib import Path
from typing import Any

from tests.conftest import Vq, wait_until
from tests.webhook_support import Receiver, receiver_fixture  # noqa: F401 (the `receiver` fixture)
from vq.domain.admission import Caps
from vq.domain.spec import JobSpec
from vq.domain.states import TERMINAL_NAMES, JobState
from vq.paths import StatePaths
from vq.services.context import ServiceContext
from vq.services.lifecycle import Lifecycle
from vq.store.specs import SpecStore

TERMINAL = tuple(TERMINAL_NAMES)


def _events(vq: Vq, job_id: str) -> list[dict[str, Any]]:
    path = StatePaths(vq.root).events(job_id)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _moves(vq: Vq, job_id: str) -> list[tuple[str, str]]:
    return [(e["from"], e["to"]) for e in _events(vq, job_id) if e["kind"] == "state_transition"]


def _log(vq: Vq) -> str:
    return (vq.root / "daemon.log").read_text()[-3000:]


# --- jobs settled by recovery get the end-of-job bookkeeping ------------------------------


# --- failure_tail on every non-COMPLETED ending --------------------------------------------


def test_killed_and_time_exceeded_jobs_get_failure_tail(vq: Vq) -> None:
    vq.start_daemon("--max-cpus", "8")
    script = "echo 'fatal: basis set missing' >&2; sleep 300"
    killed = vq.submit("--", "sh", "-c", script)
    timed = vq.submit("--wall-time", "1s", "--", "sh", "-c", script)
    wait_until(lambda: vq.spec(killed)["pgid"])
    wait_until(
        lambda: "basis" in vq.run("logs", killed, "--stderr").stdout,
        timeout=20,
    )
    vq.run("kill", killed)
    for job, state in ((killed, "KILLED"), (timed, "TIME_EXCEEDED")):
        vq.wait_state(job, state, timeout=30)
        tail = wait_until(lambda job=job: vq.spec(job)["failure_tail"], timeout=30)
        assert tail == "fatal: basis set missing", (vq.spec(job), _log(vq))


# --- a command that cannot start is a dispatch failure ----------------------------------


def test_a_command_that_cannot_start_fails_dispatch_without_using_retries(
    vq: Vq, tmp_path: Path
) -> None:
    missing_program = vq.submit("--retry", "2", "--", str(tmp_path / "no-such-program"))
    gone = tmp_path / "gone"
    gone.mkdir()
    missing_cwd = vq.submit("--retry", "2", "--cwd", str(gone), "--", "true")
    gone.rmdir()  # removed after submit, before the daemon could enter it
    vq.start_daemon("--max-cpus", "8")
    for job, words in (
        (missing_program, "cannot execute"),
        (missing_cwd, "cannot enter the working directory"),
    ):
        vq.wait_state(job, *TERMINAL, timeout=30)
        spec = vq.spec(job)
        assert spec["state"] == "FAILED", (spec, _log(vq))
        assert spec["retry_count"] == 0
        assert spec["failure_reason"].startswith("launch failed: ")
        assert words in spec["failure_reason"]
        # The event follows the spec write: poll for it.
        wait_until(lambda job=job: len(_moves(vq, job)) >= 2)
        assert _moves(vq, job) == [("pending", "running"), ("running", "failed")]


# --- no executor for a scheduler target ------------------------------------------------------


def test_a_scheduler_target_without_a_lane_fails_at_dispatch(vq: Vq) -> None:
    job = vq.submit("--", "true")  # no daemon yet: stays PENDING

    def aim(spec: JobSpec) -> JobSpec:
        spec.scheduler_target = "cluster-a"
        return spec

    SpecStore(StatePaths(vq.root)).update(job, aim)
    vq.start_daemon()
    vq.wait_state(job, *TERMINAL, timeout=20)
    spec = vq.spec(job)
    assert spec["state"] == "FAILED"
    assert spec["failure_reason"] == (
        "no executor for scheduler target 'cluster-a': no scheduler lane is configured"
    )
    assert spec["started_at"] is None


# --- a refused transition appends no event ------------------------------------------------


def _context(tmp_path: Path) -> ServiceContext:
    paths = StatePaths(tmp_path / "state")
    paths.ensure()
    return ServiceContext(paths, Caps())


def _spec(job_id: str, **fields: object) -> JobSpec:
    return JobSpec.model_validate(
        {
            "id": job_id,
            "submitted_at": "2026-01-01T00:00:00+00:00",
            "command": ["true"],
            "cpus": 1,
            **fields,
        }
    )


def _create(ctx: ServiceContext, spec: JobSpec) -> None:
    """A spec with its workspace, as submit leaves it."""
    ctx.store.create(spec)
    ctx.paths.meta_dir(spec.id).mkdir(parents=True)


def _event_lines(ctx: ServiceContext, job_id: str) -> list[dict[str, Any]]:
    path = ctx.paths.events(job_id)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_refused_dispatch_failure_appends_no_event(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    ended: list[str] = []
    lifecycle = Lifecycle(ctx, on_ended=lambda spec: ended.append(spec.id))
    _create(ctx, _spec("0000000000a1", state="KILLED", failure_reason="killed by operator"))
    moved = lifecycle.fail_dispatch("0000000000a1", "launch failed: the server said no")
    assert not moved.changed
    assert moved.spec.state is JobState.KILLED
    assert moved.spec.failure_reason == "killed by operator"
    assert _event_lines(ctx, "0000000000a1") == []
    # A job that did move gets exactly one event, from the state it really was in.
    _create(ctx, _spec("0000000000a2", state="RUNNING"))
    moved = lifecycle.fail_dispatch("0000000000a2", "launch failed: the server said no")
    assert moved.changed and moved.previous is JobState.RUNNING
    [event] = _event_lines(ctx, "0000000000a2")
    assert (event["from"], event["to"], event["jobid"]) == ("running", "failed", "0000000000a2")
    # The end-of-job bookkeeping ran once for each ended job, never twice.
    lifecycle.ended("0000000000a2")
    assert sorted(ended) == ["0000000000a1", "0000000000a2"]


def test_claim_of_a_job_that_is_not_pending_changes_nothing(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    lifecycle = Lifecycle(ctx)
    _create(ctx, _spec("0000000000b1", state="KILLED"))
    moved = lifecycle.claim("0000000000b1", workdir="/nowhere")
    assert not moved.changed
    assert ctx.store.read("0000000000b1").workdir is None
    assert _event_lines(ctx, "0000000000b1") == []
