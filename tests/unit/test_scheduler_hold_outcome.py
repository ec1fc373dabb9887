"""Controls of a lane job against the scheduler's answer.

* Pause and resume (§7.3): an accepted hold records ``held``; a refused one restores the
  spec with the exact inverse write and raises Conflict; a lost answer keeps the intended
  state and records ``hold_outcome_unknown`` (``release_outcome_unknown``).
* Kill: a cancel whose answer is lost leaves the job ``cancel_pending``, still holding
  its lane capacity, and the cancel is sent again when its retry is due.

The cluster is a scripted runner port: each call returns the scheduler's recorded answer
or loses it."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from vq.domain.spec import JobSpec
from vq.errors import Conflict, TransportError
from vq.executors.scheduler.jobs import LaneJob
from vq.executors.scheduler.lane import SchedulerLane
from vq.executors.scheduler.ports import LaneContext
from vq.paths import StatePaths
from vq.transport.runner import RunResult

from .dialect_transcripts import transcript
from .test_scheduler_stage_submit import _lane

NOW = datetime(2026, 1, 1, tzinfo=UTC)
JOB = "a1b2c3d4e5f6"


def _commands(runner: Any) -> list[list[str]]:
    """Each scheduler command the runner was asked to run, without the ``timeout`` that
    bounds it on the login host (checked here)."""
    for call in runner.calls:
        assert call[:3] == ["timeout", "-k", "1"] and float(call[3]) > 0, call
    return [call[4:] for call in runner.calls]


class ScriptedRunner:
    """The lane's runner port: answers each call with the next scripted result (a
    transport failure is raised) and keeps every argv it was asked to run."""

    def __init__(self, *answers: RunResult | TransportError) -> None:
        self.answers = list(answers)
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], **_: Any) -> RunResult:
        self.calls.append(list(argv))
        answer = self.answers.pop(0)
        if isinstance(answer, TransportError):
            raise answer
        return answer

    def close(self) -> None:
        pass


class OneSpec:
    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec

    def read(self, job_id: str) -> JobSpec:
        assert job_id == self.spec.id
        return self.spec

    def list_ids(self) -> list[str]:
        return [self.spec.id]


class RecordingLifecycle:
    """The lifecycle port: scheduler-field writes and the pause service's inverse writes."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, dict[str, Any]]] = []
        self.inverse: list[tuple[str, str]] = []

    def record_scheduler(self, job_id: str, fields: dict[str, Any], **_: Any) -> None:
        self.writes.append((job_id, fields))

    def resume(self, job_id: str, **_: Any) -> None:
        self.inverse.append(("resume", job_id))

    def pause(self, job_id: str, by: str, **_: Any) -> None:
        self.inverse.append(("pause", job_id))


def _spec() -> JobSpec:
    spec = JobSpec(id=JOB, submitted_at=NOW, command=["true"], cwd="/tmp", cpus=1)
    spec.scheduler_target, spec.scheduler_job_id = "cluster", "7"
    return spec


class Loop:
    """The test thread as the daemon loop: worker answers queue here and run only when
    the test drives them (so every lane method runs on the lane's loop thread)."""

    def __init__(self) -> None:
        self.calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()

    def until(self, done: Callable[[], object], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            assert left > 0, "the lane's answer did not come"
            try:
                self.calls.get(timeout=min(left, 0.1))()
            except queue.Empty:
                continue


def hold_or_release(lane: SchedulerLane, loop: Loop, action: Any) -> object:
    """The hold (release) as the daemon asks it: on the loop, its reply awaited."""
    replies: list[object] = []
    lane.control.hold_or_release(JOB, action, replies.append)
    loop.until(lambda: replies)
    if isinstance(replies[0], BaseException):
        raise replies[0]
    return replies[0]


def _answer(name: str) -> RunResult:
    recorded = transcript(name)
    return RunResult(recorded.returncode, recorded.stdout.encode(), recorded.stderr.encode())


@pytest.fixture
def build(tmp_path: Path) -> Iterator[Any]:
    built: list[SchedulerLane] = []
    loop = Loop()

    def make(runner: ScriptedRunner) -> tuple[SchedulerLane, RecordingLifecycle, Loop]:
        lifecycle = RecordingLifecycle()
        lane = SchedulerLane(
            _lane(tmp_path / "scratch"),
            LaneContext(StatePaths(tmp_path), OneSpec(_spec()), lambda: NOW),
            lifecycle,  # type: ignore[arg-type]
            runner,  # type: ignore[arg-type]
            pending=lambda name: [],
            call_soon=loop.calls.put,
            monotonic=lambda: 100.0,
        )
        built.append(lane)
        return lane, lifecycle, loop

    yield make
    for lane in built:
        lane.close()


@pytest.mark.parametrize(("action", "state"), [("hold", "held"), ("release", "queued")])
def test_an_accepted_hold_or_release_records_the_scheduler_state(
    build: Any, action: str, state: str
) -> None:
    runner = ScriptedRunner(RunResult(0, b"", b""))
    lane, lifecycle, loop = build(runner)
    assert hold_or_release(lane, loop, action) is True
    assert _commands(runner) == [["scontrol", action, "7"]]
    assert lifecycle.writes == [(JOB, {"scheduler_state": state})]
    assert lifecycle.inverse == []


@pytest.mark.parametrize("action", ["hold", "release"])
def test_a_lost_answer_keeps_the_intent_and_says_the_outcome_is_unknown(
    build: Any, action: str
) -> None:
    lost = TransportError("ssh: connection reset", transient=True)
    lane, lifecycle, loop = build(ScriptedRunner(lost))
    assert hold_or_release(lane, loop, action) is False
    assert lifecycle.writes == [(JOB, {"scheduler_state": f"{action}_outcome_unknown"})]
    assert lifecycle.inverse == []  # the intended state stays; the next poll shows the truth


@pytest.mark.parametrize(
    ("action", "recorded", "inverse"),
    [
        ("hold", "slurm/live_scontrol_hold_unknown", "resume"),
        ("release", "slurm/live_scontrol_release_unknown", "pause"),
    ],
)
def test_a_refused_hold_or_release_is_undone_and_reported(
    build: Any, action: str, recorded: str, inverse: str
) -> None:
    lane, lifecycle, loop = build(ScriptedRunner(_answer(recorded)))
    with pytest.raises(Conflict, match=f"refused the {action}"):
        hold_or_release(lane, loop, action)
    assert lifecycle.inverse == [(inverse, JOB)]
    assert lifecycle.writes == []


def test_a_lost_cancel_is_pending_keeps_the_capacity_and_is_sent_again(build: Any) -> None:
    lost = TransportError("ssh: connection reset", transient=True)
    runner = ScriptedRunner(lost, RunResult(0, b"", b""))
    lane, lifecycle, loop = build(runner)
    job = LaneJob(JOB, "queued", "7")
    lane.jobs.track(job)
    lane.cancel(JOB)
    loop.until(lambda: lifecycle.writes)
    assert lifecycle.writes == [(JOB, {"scheduler_state": "cancel_pending"})]
    assert (job.phase, job.cancel_wanted, lane.held) == ("cancel_pending", True, 1)
    lane._advance(job)  # its retry is due: the cancel goes out again
    loop.until(lambda: not job.cancel_wanted)
    assert _commands(runner) == [["scancel", "7"], ["scancel", "7"]]
    assert lane.held == 1  # capacity is released only once a poll shows the job gone
