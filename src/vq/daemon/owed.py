"""End-of-attempt writes the state root refused (a full disk), owed until they land.

The supervisor keeps each one as a callable that retries the write and, on success,
frees the job's budget; :meth:`OwedWrites.retry` (on the loop) runs them in order, at
most once per ``retry_seconds``, stopping at the first that still fails (the others
would fail the same way).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["OWED_RETRY_SECONDS", "OwedWrites"]

log = logging.getLogger(__name__)

#: How often an owed write is retried.
OWED_RETRY_SECONDS = 1.0


class OwedWrites:
    """Job id → a retry that returns True once its write landed (loop only)."""

    def __init__(
        self,
        monotonic: Callable[[], float] = time.monotonic,
        retry_seconds: float = OWED_RETRY_SECONDS,
    ) -> None:
        self._monotonic = monotonic
        self._retry_seconds = retry_seconds
        self._owed: dict[str, Callable[[], bool]] = {}
        self._tried_at = 0.0

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._owed

    def __bool__(self) -> bool:
        return bool(self._owed)

    def add(self, job_id: str, attempt: Callable[[], bool]) -> None:
        self._owed[job_id] = attempt

    def retry(self) -> None:
        """Retry the owed writes (rate-limited; see the module rules)."""
        if not self._owed or self._monotonic() - self._tried_at < self._retry_seconds:
            return
        self._tried_at = self._monotonic()
        for job_id, attempt in list(self._owed.items()):
            if not attempt():
                return
            del self._owed[job_id]
            log.info("job %s: its end was written after a storage error", job_id)
