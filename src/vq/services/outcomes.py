"""How an attempt's end is judged: the classification rules and the stderr tail.

Rules (§3.3, §4.4, §4.5, §4.7):

* A known exit code is classified: zero → COMPLETED; nonzero → the *same* spec back to
  PENDING with ``retry_count + 1`` and a backoff ``not_before`` while retry budget
  remains, else FAILED.
* An unknown exit code (collector killed, no marker) becomes ``unknown.state`` (FAILED
  when the daemon saw the collector die, ABORTED_BY_QUEUE in recovery) with a reason;
  FAILED still honours the retry budget.
* Non-COMPLETED endings get ``failure_tail`` from the stderr file, read before the spec
  lock is taken (never slow I/O under the lock).

The writes themselves are :mod:`vq.services.lifecycle`'s; the exit code comes from the
job's executor (the local one reads the collector's marker).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from vq._safe_open import open_beneath
from vq.domain.failure_tail import TAIL_BYTES, failure_tail
from vq.domain.lifecycle import Outcome, classify_exit, retry_backoff_seconds
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.services.context import ServiceContext

__all__ = ["decide_outcome", "read_stderr_tail"]


def read_stderr_tail(ctx: ServiceContext, spec: JobSpec) -> str | None:
    """``failure_tail`` of the job's stderr file; never raises."""
    path = ctx.paths.workspace(spec.id) / spec.stderr_path
    try:
        fd = open_beneath(ctx.paths.tree_of(spec.id), path, os.O_RDONLY)
        with os.fdopen(fd, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - TAIL_BYTES - 1))
            data = handle.read(TAIL_BYTES + 1)
    except OSError:
        return None
    return failure_tail(data)


def decide_outcome(
    spec: JobSpec, exit_code: int | None, unknown: Outcome, now: datetime
) -> Outcome:
    """The next state of a running spec whose attempt ended (see module rules)."""
    if exit_code is not None:
        return classify_exit(spec, exit_code, now)
    if unknown.state is JobState.FAILED and spec.retry_count < spec.retry_max:
        delay = retry_backoff_seconds(spec.retry_count, spec.retry_backoff_seconds or 30)
        return Outcome(
            JobState.PENDING,
            f"{unknown.reason}; retry {spec.retry_count + 1} of {spec.retry_max} in {delay}s",
            now + timedelta(seconds=delay),
        )
    return unknown
