"""Operator holds on a daemon (§4.3, §2.1): drain, throttle, and their files.

* ``drain.json`` — ``{"mode": "new" | "full", "reject_submits", "reason", "set_at"}``.
  ``new``: no new dispatch, running jobs go on. ``full``: also pause the running local
  jobs (``paused_by = "drain"``), resumed at undrain. ``reject_submits``: refuse new
  submissions (§4.2) before anything is written. Absent file = not draining.
* ``throttle.json`` — ``{"max_jobs", "max_cpus", "expires_at", "set_at"}``: temporarily
  lower caps (never raise them). Expired or absent = no throttle.
* ``daemon_capacity.json`` — the caps the daemon last advertised: its base caps
  (``max_jobs``, ``max_cpus``, ``max_mem_mb``, ``default_job_mem_mb``) at the top level,
  the throttled ones under ``effective``, plus ``pid`` and ``written_at``. It outlives
  the daemon: without one, readers classify capacity from this snapshot (§4.3).
* ``rpc-audit.jsonl`` — one line per state-changing control call, with the peer's uid.

All files live in the state root, are written atomically, and survive restarts. Reading
a malformed file is reported (and treated as absent) rather than crashing anything.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vq._fs import append_line, atomic_write_json, read_json_regular
from vq.domain.admission import Caps
from vq.errors import Conflict, InvalidInput
from vq.paths import StatePaths
from vq.protocol.answers import CapsJSON, DrainAnswer, ThrottleAnswer, ThrottleJSON, UndrainAnswer

if TYPE_CHECKING:
    from vq.domain.spec import JobSpec
    from vq.services.context import ServiceContext

__all__ = [
    "PAUSED_BY_DRAIN",
    "DrainState",
    "Throttle",
    "audit",
    "check_submits_allowed",
    "drained_job_ids",
    "effective_caps",
    "new_throttle",
    "read_capacity",
    "read_drain",
    "read_throttle",
    "resume_drained",
    "throttle_on_disk",
    "undrain_answer",
    "undrain_on_disk",
    "write_capacity",
    "write_drain",
    "write_throttle",
]

log = logging.getLogger(__name__)


#: ``paused_by`` of the jobs a full drain paused (undrain resumes exactly those).
PAUSED_BY_DRAIN = "drain"


@dataclass(frozen=True)
class DrainState:
    mode: str = "none"  # "none" | "new" | "full"
    reject_submits: bool = False
    reason: str | None = None
    set_at: str | None = None

    @property
    def active(self) -> bool:
        return self.mode != "none"


@dataclass(frozen=True)
class Throttle:
    max_jobs: int | None = None
    max_cpus: int | None = None
    expires_at: str | None = None
    set_at: str | None = None

    def active(self, now: datetime) -> bool:
        if self.max_jobs is None and self.max_cpus is None:
            return False
        return self.expires_at is None or datetime.fromisoformat(self.expires_at) > now


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = read_json_regular(path, 1 << 16)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return None
    return data if isinstance(data, dict) else None


def read_drain(paths: StatePaths) -> DrainState:
    data = _read(paths.drain_file)
    if not data or data.get("mode") not in ("new", "full"):
        return DrainState()
    return DrainState(
        data["mode"], bool(data.get("reject_submits")), data.get("reason"), data.get("set_at")
    )


def write_drain(paths: StatePaths, state: DrainState) -> None:
    path = paths.drain_file
    if not state.active:
        path.unlink(missing_ok=True)
        return
    paths.ensure()
    atomic_write_json(path, asdict(state))


def check_submits_allowed(paths: StatePaths) -> None:
    """Raise Conflict when a drain refuses new submissions (nothing is written then)."""
    drain = read_drain(paths)
    if drain.reject_submits:
        reason = f" ({drain.reason})" if drain.reason else ""
        raise Conflict(
            f"the queue is draining and refuses new submissions{reason}",
            hint="`vq daemon undrain` accepts submissions again",
            reference="draining",
        )


def read_throttle(paths: StatePaths) -> Throttle:
    data = _read(paths.throttle_file)
    if not data:
        return Throttle()
    try:
        throttle = Throttle(
            data.get("max_jobs"), data.get("max_cpus"), data.get("expires_at"), data.get("set_at")
        )
        if throttle.expires_at is not None:
            datetime.fromisoformat(throttle.expires_at)
    except (TypeError, ValueError) as exc:
        log.warning("ignoring malformed %s: %s", paths.throttle_file, exc)
        return Throttle()
    return throttle


def write_throttle(paths: StatePaths, throttle: Throttle) -> None:
    for value in (throttle.max_jobs, throttle.max_cpus):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise InvalidInput("throttle limits must be positive integers")
    path = paths.throttle_file
    if throttle.max_jobs is None and throttle.max_cpus is None:
        path.unlink(missing_ok=True)
        return
    paths.ensure()
    atomic_write_json(path, asdict(throttle))


def effective_caps(configured: Caps, throttle: Throttle, now: datetime) -> Caps:
    """The configured caps, lowered by an active throttle (a throttle never raises one)."""
    if not throttle.active(now):
        return configured

    def lower(cap: int | None, limit: int | None) -> int | None:
        if limit is None:
            return cap
        return limit if cap is None else min(cap, limit)

    return replace(
        configured,
        max_jobs=lower(configured.max_jobs, throttle.max_jobs),
        max_cpus=lower(configured.max_cpus, throttle.max_cpus),
    )


def write_capacity(
    paths: StatePaths, caps: Caps, pid: int, now: datetime, base: Caps | None = None
) -> None:
    """Record the advertised caps: ``base`` (default ``caps``) and the effective ``caps``."""
    atomic_write_json(
        paths.capacity_file,
        {
            **asdict(base or caps),
            "effective": asdict(caps),
            "pid": pid,
            "written_at": now.isoformat(),
        },
    )


_CAP_FIELDS = ("max_jobs", "max_cpus", "max_mem_mb", "default_job_mem_mb")


def read_capacity(paths: StatePaths) -> Caps | None:
    """The base caps of the last advertised snapshot; None when there is none readable
    (missing, malformed, or a field that is not a positive integer or null). Silent:
    a missing snapshot is the ordinary "capacity unknown" case."""
    try:
        data = read_json_regular(paths.capacity_file, 65536)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    values: dict[str, int | None] = {}
    for name in _CAP_FIELDS:
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            return None
        if value is not None and value < 0:
            return None
        values[name] = value
    return Caps(**values)


def audit(paths: StatePaths, record: dict[str, Any]) -> None:
    """Append one control call to ``rpc-audit.jsonl`` (best-effort, like events)."""
    append_line(
        paths.rpc_audit_log,
        json.dumps(record, separators=(",", ":"), default=str),
        log_file=True,
    )


def new_throttle(
    max_jobs: int | None, max_cpus: int | None, seconds: int | None, now: datetime
) -> Throttle:
    """The throttle ``vq daemon throttle`` sets: limits, expiry ``seconds`` after ``now``.

    InvalidInput when neither limit is given (a throttle must lower something).
    """
    if max_jobs is None and max_cpus is None:
        raise InvalidInput(
            "give max_jobs and/or max_cpus (or clear)",
            hint="`vq daemon throttle --max-jobs N`, or `--clear` to remove it",
        )
    expires = (now + timedelta(seconds=seconds)).isoformat() if seconds else None
    return Throttle(max_jobs, max_cpus, expires, now.isoformat())


def drained_job_ids(specs: Iterable[JobSpec]) -> list[str]:
    """The jobs a full drain paused and nothing ended since (``paused_by = "drain"``)."""
    return [spec.id for spec in specs if spec.paused_by == PAUSED_BY_DRAIN and not spec.is_terminal]


def resume_drained(ctx: ServiceContext, job_ids: Iterable[str]) -> list[str]:
    """Resume the given jobs if a drain paused them; the ids actually resumed.

    A job resumed, killed or paused by someone else meanwhile is left alone.
    """
    from vq.errors import VqError
    from vq.services.pause import resume_job

    resumed = []
    for job_id in job_ids:
        try:
            if resume_job(ctx, job_id, only_paused_by=PAUSED_BY_DRAIN).changed:
                resumed.append(job_id)
        except VqError as exc:
            log.info("job %s not resumed after the drain: %s", job_id, exc.message)
    return resumed


def caps_json(caps: Caps) -> CapsJSON:
    """Admission caps as JSON (``ping``, ``throttle``, ``capacity``, ``admin_status``)."""
    return {
        "max_jobs": caps.max_jobs,
        "max_cpus": caps.max_cpus,
        "max_mem_mb": caps.max_mem_mb,
        "default_job_mem_mb": caps.default_job_mem_mb,
    }


def throttle_json(throttle: Throttle) -> ThrottleJSON:
    """A throttle as JSON (``throttle.json``, the ``throttle`` answer)."""
    return {
        "max_jobs": throttle.max_jobs,
        "max_cpus": throttle.max_cpus,
        "expires_at": throttle.expires_at,
        "set_at": throttle.set_at,
    }


def drain_json(state: DrainState) -> DrainAnswer:
    """A drain as JSON (``drain.json``, the ``drain`` answer)."""
    return {
        "mode": state.mode,
        "reject_submits": state.reject_submits,
        "reason": state.reason,
        "set_at": state.set_at,
    }


def undrain_answer() -> UndrainAnswer:
    """The answer of ``undrain`` (daemon and disk alike): no drain, drain pauses undone."""
    return {"mode": "none", "resumed_paused_by": PAUSED_BY_DRAIN}


def undrain_on_disk(ctx: ServiceContext) -> UndrainAnswer:
    """``undrain`` without a daemon: remove ``drain.json``, resume the drain's pauses."""
    write_drain(ctx.paths, DrainState())
    resume_drained(ctx, drained_job_ids(ctx.store.scan().specs.values()))
    return undrain_answer()


def throttle_on_disk(
    ctx: ServiceContext,
    *,
    clear: bool,
    max_jobs: int | None,
    max_cpus: int | None,
    seconds: int | None,
    now: datetime,
) -> ThrottleAnswer:
    """``throttle`` without a daemon: write ``throttle.json``; the daemon's answer shape.

    ``effective_caps`` are ``ctx.caps`` (the configured caps) lowered by the throttle.
    """
    limits = Throttle() if clear else new_throttle(max_jobs, max_cpus, seconds, now)
    write_throttle(ctx.paths, limits)
    return {
        "throttle": throttle_json(limits) if limits.active(now) else None,
        "effective_caps": caps_json(effective_caps(ctx.caps, limits, now)),
    }
