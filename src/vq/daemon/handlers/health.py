"""The ``health`` RPC method (§6.5): the heavier lifecycle check beside ``ping``.

``ping`` proves the daemon answers; ``health`` checks that it is doing its job:

* ``loop`` — the main loop made progress within :func:`loop_bound` (three ticks plus a
  margin); a loop stuck in a slow call fails it;
* ``dispatch`` — when dispatch is held, a reason is known (a drain, an invalid or
  missing config, host memory pressure, a state root that refuses writes); held without
  one fails;
* ``fork_server`` — the fork server answers a ping within :data:`FORK_SERVER_TIMEOUT`;
* ``index`` — a sample of up to :data:`INDEX_SAMPLE` spec files agrees with the
  in-memory index (same state; a file missing from the index only after a rescan has
  had time to see it). A disagreement is re-read once after a short pause so an
  ordinary write in flight does not fail it;
* ``state_root`` — a file can be created, synced and removed in the state root.

The answer is ``{"ok", "checked_at", "checks": [{"name", "ok", "detail"}]}``; ``ok`` is
true only when every check passed. The method never raises for a failed check.
:class:`HealthHandler` receives what it checks through its constructor.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vq.errors import VqError
from vq.executors.base import HostExecutor
from vq.protocol.methods import EmptyParams, HealthResult
from vq.services.context import ServiceContext

from ..holds import Holds
from ..index import JobIndex
from .info import DaemonFacts

__all__ = ["FORK_SERVER_TIMEOUT", "INDEX_SAMPLE", "HealthHandler", "HealthParts", "loop_bound"]

FORK_SERVER_TIMEOUT = 3.0
INDEX_SAMPLE = 32
#: Seconds an index disagreement is given to settle before it counts.
SETTLE_SECONDS = 0.5
#: Beyond this age a spec file the index does not know counts as a missed file.
UNSEEN_GRACE_SECONDS = 30.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


def loop_bound(tick_seconds: float) -> float:
    """How long the main loop may go without a pass before it counts as stuck."""
    return 3 * tick_seconds + 10.0


@dataclass(frozen=True)
class HealthParts:
    """What ``health`` looks at."""

    ctx: ServiceContext
    facts: DaemonFacts
    tick_seconds: float
    holds: Holds
    pressure_hold: Callable[[], bool]
    executor: HostExecutor
    index: JobIndex
    #: The storage hold (``storage_hold`` of ping), or None when writes succeed.
    storage_hold: Callable[[], dict[str, str] | None] = lambda: None


def _loop(parts: HealthParts) -> Check:
    last = parts.facts.loop_progress_at
    if last is None:
        return Check("loop", False, "the main loop has not started")
    age = time.monotonic() - last
    bound = loop_bound(parts.tick_seconds)
    if age > bound:
        return Check("loop", False, f"no loop pass for {age:.1f}s (bound {bound:.0f}s)")
    return Check("loop", True, f"last pass {age:.1f}s ago (bound {bound:.0f}s)")


def _dispatch(parts: HealthParts) -> Check:
    reasons = []
    drain = parts.holds.drain_state
    if drain.active:
        reasons.append(f"drain ({drain.mode})" + (f": {drain.reason}" if drain.reason else ""))
    if parts.holds.config_missing:
        reasons.append(f"the loaded config file {parts.holds.config_missing[0]} is missing")
    elif parts.holds.config_error is not None:
        reasons.append("the configuration is invalid")
    pressure = parts.pressure_hold()
    if pressure:
        reasons.append("host memory pressure")
    storage = parts.storage_hold()
    if storage is not None:
        reasons.append(f"storage: {storage['message']}")
    held = parts.holds.holding or pressure or storage is not None
    if held and not reasons:
        return Check("dispatch", False, "dispatch is held without a known reason")
    if held:
        return Check("dispatch", True, "held: " + "; ".join(reasons))
    return Check("dispatch", True, "not held")


def _fork_server(parts: HealthParts) -> Check:
    ok, detail = parts.executor.launcher_status(FORK_SERVER_TIMEOUT)
    return Check("fork_server", ok, detail)


def _disagreement(parts: HealthParts, job_id: str) -> str | None:
    """Why the index and the disk disagree on ``job_id``, or None."""
    if job_id in parts.index.quarantined:
        return None
    try:
        on_disk = parts.ctx.store.read(job_id)
    except VqError:
        return None  # deleted or unreadable meanwhile: quarantine is the index's concern
    cached = parts.index.get(job_id)
    if cached is None:
        try:
            age = time.time() - parts.ctx.paths.spec(job_id).stat().st_mtime
        except OSError:
            return None
        if age <= UNSEEN_GRACE_SECONDS:
            return None
        return f"{job_id} is on disk ({on_disk.state.value}) but not in the index"
    if cached.state is not on_disk.state:
        return f"{job_id} is {on_disk.state.value} on disk, {cached.state.value} in the index"
    return None


def _index(parts: HealthParts, pick: Callable[[list[str], int], list[str]]) -> Check:
    ids = parts.ctx.store.list_ids()
    sample = pick(ids, min(INDEX_SAMPLE, len(ids)))
    suspects = [job_id for job_id in sample if _disagreement(parts, job_id) is not None]
    if suspects:
        time.sleep(SETTLE_SECONDS)  # a write in flight settles; a real drift stays
    problems = [p for p in (_disagreement(parts, j) for j in suspects) if p is not None]
    if problems:
        return Check("index", False, "; ".join(problems[:5]))
    return Check("index", True, f"{len(sample)} of {len(ids)} spec files agree")


def _state_root(parts: HealthParts) -> Check:
    root = parts.ctx.paths.root
    try:
        fd, name = tempfile.mkstemp(prefix=".vq-health.", dir=root)
        try:
            os.write(fd, b"ok")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(name)
    except OSError as exc:
        return Check("state_root", False, f"{root} is not writable: {exc.strerror}")
    return Check("state_root", True, f"{root} is writable")


class HealthHandler:
    """``health``: every check, in order; never raises for a failed one."""

    def __init__(self, parts: HealthParts) -> None:
        self._parts = parts

    def health(self, _: EmptyParams) -> HealthResult:
        parts = self._parts
        checks = [
            _loop(parts),
            _dispatch(parts),
            _fork_server(parts),
            _index(parts, random.sample),
            _state_root(parts),
        ]
        return HealthResult(
            ok=all(check.ok for check in checks),
            checked_at=parts.ctx.now().isoformat(),
            checks=[check.as_dict() for check in checks],
        )
