"""What a submit command's own answer means for a lane (pure): accepted, a controller it
never reached (nothing submitted: retried with backoff, never a failure), ambiguous (only
the scheduler can tell) or the scheduler's refusal; read from answers recorded live."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.dialect_transcripts import transcript
from vq.dialects import SLURM, CommandResult, ParseFailure
from vq.executors.scheduler.jobs import controller_unreached, submit_verdict
from vq.executors.scheduler.outcome import unreached_retry

from .test_scheduler_stage_submit import _lane


@pytest.mark.parametrize(
    ("name", "verdict"),
    [
        ("live_sbatch_parsable", "accepted"),
        ("live_sbatch_controller_down", "unreached"),
        ("sbatch_rejected", "refused"),
        ("sbatch_garbage", "ambiguous"),
        ("sbatch_empty", "ambiguous"),
    ],
)
def test_recorded_sbatch_answers(name: str, verdict: str) -> None:
    answer = SLURM.submit("/tmp/x.sh").parse(transcript(f"slurm/{name}"))
    assert submit_verdict(answer) == verdict


@pytest.mark.parametrize(
    ("stderr", "verdict"),
    [
        (
            "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation",
            "ambiguous",
        ),
        (
            "sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying",
            "ambiguous",
        ),
        ("qsub: cannot connect to server pbs01 (errno=111) Connection refused", "unreached"),
        (
            "sbatch: error: Batch job submission failed: Invalid account or "
            "account/partition combination specified",
            "refused",
        ),
    ],
)
def test_words_of_a_failed_submit(stderr: str, verdict: str) -> None:
    answer = SLURM.submit("/tmp/x.sh").parse(CommandResult(1, "", stderr))
    assert isinstance(answer, ParseFailure)
    assert submit_verdict(answer) == verdict


def test_a_timeout_after_connecting_is_never_read_as_unreached() -> None:
    assert controller_unreached("Unable to contact slurm controller (connect failure)")
    assert not controller_unreached("connect failure: socket timed out after sending")


def test_the_retry_delay_doubles_up_to_the_backoff() -> None:
    lane = _lane(Path("/tmp")).model_copy(update={"poll_interval": 2.0, "backoff_seconds": 30.0})
    delays = [unreached_retry(lane, tries, "connect failure")[0] for tries in range(1, 7)]
    assert delays == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert (
        "could not be reached (connect failure)" in unreached_retry(lane, 1, "connect failure")[1]
    )
