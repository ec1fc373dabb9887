"""The ``vq top`` read model (§6.3): live jobs, their latest samples, queue counts, capacity.

:func:`build_top` is pure: it takes the ``vq list`` rows of *all* jobs (see
:func:`vq.services.query.list_row`), the latest watchdog sample per job, the daemon's
admission caps (None when no daemon answers) and "now", and returns the JSON snapshot
below. :func:`read_latest_sample` is its only I/O helper: a bounded tail read of
``<workspace>/_vq/samples.jsonl`` that never raises.

Stable JSON schema (``vq top --json``)::

    {
      "generated_at": "<ISO 8601, UTC>",
      "daemon": {"running": bool, "pid": int | null},
      "counts": {"PENDING": n, "RUNNING": n, ...},   # every JobState, zeros included
      "capacity_source": "daemon" | "last_advertised" | null,
      "capacity": {
        "cpus":   {"reserved": n, "cap": n | null},
        "mem_mb": {"reserved": n, "cap": n | null},
        "jobs":   {"reserved": n, "cap": n | null}
      },
      "jobs": [
        {
          "id": str, "job_name": str | null, "state": "RUNNING" | "SUSPENDED",
          "cpus": int,
          "cpu_affinity": [int] | null,       # the cores the job is pinned to
          "cpu_percent": float | null,        # latest sample's cpu_percent
          "rss_mb": float | null,             # latest sample's rss_mb
          "mem_limit_mb": int | null,         # effective memory: mem_mb, else the default
          "mem_percent": float | null,        # rss_mb / mem_limit_mb * 100
          "elapsed_seconds": float | null,    # latest sample's (active) elapsed, else
                                              # now - started_at
          "wall_time_seconds": int | null,
          "wall_percent": float | null,       # elapsed_seconds / wall_time_seconds * 100
          "sample_age_seconds": float | null, # now - latest sample's ts
          "stale": bool,
          "phase": str | null,                # a lane job's cluster phase (queued, held,
                                              # running, finishing, ...), else null
          "phase_label": str | null           # its STATE text: "queued (slurm: Priority)"
        }
      ],
      "lanes": {"jobs": n, "cpus": n, "running_jobs": n, "running_cpus": n,
                "unconfirmed_scheduler_jobs": n, "unconfirmed_scheduler_cpus": n}
    }

Semantics:

* ``capacity.*.reserved`` sums declared reservations (cpus, effective memory, one job slot)
  over this host's RUNNING and SUSPENDED jobs; these are reservations, not measured use.
  A scheduler lane's jobs run on a cluster: they are in ``jobs`` but never in
  ``capacity``; ``lanes`` counts them (see :class:`~vq.protocol.report_answers.LaneUse`).
  ``cap`` is the daemon's budget; null means unlimited (``jobs`` without ``max_jobs``) or
  unknown (``capacity_source`` null: no daemon answered and no last advertised snapshot
  is readable).
* ``capacity_source`` says where the caps come from: the answering daemon, the caps it
  last advertised (``daemon_capacity.json``, when no daemon answers), or null: unknown.
* ``stale`` is true when a RUNNING job's latest sample is older than
  :data:`STALE_SECONDS`, or when it has no sample yet and started more than
  :data:`STALE_SECONDS` ago. SUSPENDED jobs are never stale: the watchdog does not
  sample paused jobs, so their last reading is expected to age.
* A scheduler lane job (``phase`` not null) has no watchdog samples: its
  ``elapsed_seconds`` is the list row's, counted from the cluster's start (null while
  the cluster queues it), and it is never ``stale``.
* Percentages are rounded to one decimal; null when either side is unknown or the limit
  is zero.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict, cast

from vq._fs import read_tail_lines
from vq.domain.admission import Caps, effective_mem_mb
from vq.domain.states import ACTIVE, JobState
from vq.protocol.answers import ListRow
from vq.protocol.report_answers import TopAnswer, TopJob
from vq.services.rows import is_local, lane_use

__all__ = [
    "STALE_SECONDS",
    "TAIL_BYTES",
    "Sample",
    "build_top",
    "parse_sample",
    "read_latest_sample",
]

#: A sample older than this (the watchdog writes one every 5 s) marks the job stale.
STALE_SECONDS = 30.0
#: How much of the end of ``samples.jsonl`` is read to find the latest record.
TAIL_BYTES = 8192

_ACTIVE_NAMES = frozenset(state.value for state in ACTIVE)


class Sample(TypedDict, total=False):
    """One watchdog record of ``samples.jsonl`` (:mod:`vq.daemon.watchdog` writes it).
    ``ts`` is checked when a line is read; the file sits in the job's workspace, so a
    reader checks any other value's type before use."""

    ts: str
    elapsed_seconds: float
    rss_mb: float
    cpu_percent: float | None
    cpu_time_seconds: float
    cpu_time_source: str
    cgroup_lookup: str
    cgroup_path: str | None
    sample_pid: int
    sample_pgid: int
    process_count: int


def read_latest_sample(path: Path) -> Sample | None:
    """The last well-formed record of a ``samples.jsonl``, or None. Never raises.

    Reads at most the last :data:`TAIL_BYTES`. A record is well-formed when it is a JSON
    object whose ``ts`` is an ISO 8601 timestamp; a torn final line (a write in progress)
    is skipped in favour of the one before it.
    """
    try:
        lines = read_tail_lines(path, TAIL_BYTES)
    except OSError:
        return None
    for raw in reversed(lines):
        record = parse_sample(raw)
        if record is not None:
            return record
    return None


def parse_sample(raw: bytes) -> Sample | None:
    """A well-formed sample line: a JSON object whose ``ts`` is an ISO 8601 time."""
    if not raw.strip():
        return None
    try:
        record = json.loads(raw)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return None
    if not isinstance(record, dict) or _timestamp(record.get("ts")) is None:
        return None
    return cast(Sample, record)


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.astimezone()


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _percent(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return round(100.0 * part / whole, 1)


def _job_row(
    row: ListRow, sample: Mapping[str, Any] | None, caps: Caps | None, now: datetime
) -> tuple[TopJob, int]:
    """The ``jobs[]`` item of one live job, and the memory it reserves."""
    mem_mb = row.get("mem_mb")  # read with .get: an older daemon's row may lack a key
    reserved_mem = effective_mem_mb(mem_mb, caps or Caps())
    limit = reserved_mem or None  # 0: nothing declared and no default
    started = _timestamp(row.get("started_at"))
    sample_at = _timestamp(sample.get("ts")) if sample is not None else None
    age = max(0.0, (now - sample_at).total_seconds()) if sample_at is not None else None

    elapsed = _number(sample.get("elapsed_seconds")) if sample is not None else None
    lane = row.get("scheduler_target") is not None
    if lane:  # never sampled; counted from the cluster's start, not vq's claim
        elapsed = row.get("elapsed_seconds")
    elif elapsed is None and started is not None:
        elapsed = round(max(0.0, (now - started).total_seconds()), 3)
    rss = _number(sample.get("rss_mb")) if sample is not None else None
    wall = row.get("wall_time_seconds")

    if row["state"] != JobState.RUNNING.value or lane:
        stale = False
    elif age is not None:
        stale = age > STALE_SECONDS
    else:
        stale = started is not None and (now - started).total_seconds() > STALE_SECONDS

    return {
        "id": row["id"],
        "job_name": row.get("job_name"),
        "state": row["state"],
        "cpus": row.get("cpus", 0),
        "cpu_affinity": row.get("cpu_affinity"),
        "cpu_percent": _number(sample.get("cpu_percent")) if sample is not None else None,
        "rss_mb": rss,
        "mem_limit_mb": limit,
        "mem_percent": _percent(rss, limit),
        "elapsed_seconds": elapsed,
        "wall_time_seconds": wall,
        "wall_percent": _percent(elapsed, wall),
        "sample_age_seconds": round(age, 1) if age is not None else None,
        "stale": stale,
        "phase": row.get("phase"),
        "phase_label": row.get("phase_label"),
    }, reserved_mem


def build_top(
    rows: Iterable[ListRow],
    samples: Mapping[str, Mapping[str, Any] | None],
    caps: Caps | None,
    now: datetime,
    daemon_pid: int | None = None,
    counts: Mapping[str, int] | None = None,
    *,
    daemon_running: bool | None = None,
) -> TopAnswer:
    """The ``vq top`` snapshot (the module's JSON schema). Pure.

    ``rows`` are list rows of every job (they feed ``counts``); ``samples`` maps a job id
    to its latest sample (absent or None: no reading); ``caps`` is None when no daemon
    answered, in which case memory limits fall back to the declared ``mem_mb`` and every
    ``cap`` is null; ``daemon_running`` says whether a daemon answered (default: whether
    ``caps`` were given; False with ``caps`` means they are the last advertised ones);
    ``daemon_pid`` is the answering daemon's pid, if any. ``counts``,
    when given (the daemon counts its whole index), replaces counting ``rows``, which
    may then hold only the live jobs.
    """
    rows = list(rows)
    tally: dict[str, int] = {state.value: 0 for state in JobState}
    jobs: list[TopJob] = []
    reserved_jobs = reserved_cpus = reserved_mem = 0
    if counts is not None:
        tally.update(counts)
    for row in rows:
        state = row["state"]
        if counts is None:
            tally[state] = tally.get(state, 0) + 1
        if state not in _ACTIVE_NAMES:
            continue
        item, memory = _job_row(row, samples.get(row["id"]), caps, now)
        jobs.append(item)
        if not is_local(row):
            continue  # runs on a cluster: reserves nothing of this host
        reserved_jobs += 1
        reserved_cpus += int(row.get("cpus") or 0)
        reserved_mem += memory
    running = caps is not None if daemon_running is None else daemon_running
    source = None if caps is None else ("daemon" if running else "last_advertised")
    return {
        "generated_at": now.isoformat(),
        "daemon": {"running": running, "pid": daemon_pid},
        "capacity_source": source,
        "counts": tally,
        "capacity": {
            "cpus": {"reserved": reserved_cpus, "cap": caps.max_cpus if caps else None},
            "mem_mb": {"reserved": reserved_mem, "cap": caps.max_mem_mb if caps else None},
            "jobs": {"reserved": reserved_jobs, "cap": caps.max_jobs if caps else None},
        },
        "jobs": jobs,
        "lanes": lane_use(rows),
    }
