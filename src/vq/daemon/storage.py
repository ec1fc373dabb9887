"""The storage hold: no dispatch while the state root cannot take a spec write.

A full disk (ENOSPC), a quota (EDQUOT) or an I/O error (EIO) on a write is an error of
that one operation (:class:`vq.errors.StorageError`), never the daemon's death. Whoever
meets one reports it here (:meth:`StorageGuard.note`, any thread). From then on:

* dispatch holds (a claim is a spec write; a launch writes the start record), and a
  PENDING job's ``pending_reason`` says why;
* on every loop pass the guard probes the state root with a spec-sized durable write
  (rate-limited to one per :data:`PROBE_SECONDS`); the first one that succeeds clears the
  hold and dispatch resumes;
* ``vq daemon admin-status`` (``storage_hold``), ``ping`` and so ``vq doctor`` show the
  hold and since when.

Terminal writes that failed are retried by the supervisor (it keeps the outcome in
memory and the job's budget held until the write lands); a collector that cannot write
its exit marker keeps the code and retries (so the job is never classified while it can
still report).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vq.errors import StorageError, storage_error, storage_error_under
from vq.paths import StatePaths

__all__ = ["PROBE_BYTES", "PROBE_SECONDS", "StorageGuard"]

log = logging.getLogger(__name__)

#: The probe writes this much: a spec is a few KiB; headroom for a claim and an event.
PROBE_BYTES = 64 * 1024
#: At most one probe per this many seconds while holding.
PROBE_SECONDS = 1.0


@dataclass(frozen=True)
class StorageHold:
    message: str
    since: datetime

    def as_dict(self) -> dict[str, Any]:
        return {"message": self.message, "since": self.since.isoformat()}


class StorageGuard:
    """Whether the state root can take writes (see the module rules)."""

    def __init__(
        self,
        paths: StatePaths,
        now: Callable[[], datetime],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.paths = paths
        self._now = now
        self._monotonic = monotonic
        self._hold: StorageHold | None = None
        self._last_probe = 0.0
        self._lock = threading.Lock()

    @property
    def holding(self) -> bool:
        return self._hold is not None

    @property
    def hold(self) -> StorageHold | None:
        return self._hold

    def hold_dict(self) -> dict[str, str] | None:
        """The hold as JSON (``storage_hold`` in ping and admin-status), or None."""
        hold = self._hold
        return None if hold is None else hold.as_dict()

    def note(self, error: StorageError) -> None:
        """A write under the state root failed for lack of space (or EIO): hold."""
        with self._lock:
            if self._hold is None:
                self._hold = StorageHold(error.message, self._now())
                self._last_probe = self._monotonic()
                log.error("%s: dispatch holds until writes succeed again", error.message)

    def failed_write(self, exc: BaseException) -> StorageError | None:
        """The StorageError for ``exc`` when it is a write the disk refused (noted: dispatch
        holds), else None. For callers that meet a raw OSError (any thread)."""
        if isinstance(exc, StorageError):
            error: StorageError | None = exc
        else:
            error = storage_error_under(exc, self.paths.root)
        if error is not None:
            self.note(error)
        return error

    def check(self) -> bool:
        """On the loop: while holding, probe (rate-limited); True once writes succeed."""
        if self._hold is None:
            return True
        if self._monotonic() - self._last_probe < PROBE_SECONDS:
            return False
        self._last_probe = self._monotonic()
        if not self.probe():
            return False
        with self._lock:
            hold, self._hold = self._hold, None
        if hold is not None:
            log.info("the state root takes writes again (held since %s)", hold.since)
        return True

    def probe(self) -> bool:
        """A spec-sized durable write (then removed) in the queue directory."""
        path = self.paths.storage_probe
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, b"\0" * PROBE_BYTES)
                os.fsync(fd)
            finally:
                os.close(fd)
            return True
        except OSError as exc:
            if storage_error(exc, self.paths.root) is None:
                log.warning("storage probe failed: %s", exc)
            return False
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
