"""Caps on concurrent long-polls (``GET /api/v1/jobs/{id}/wait``) in the console.

A wait holds an HTTP connection and a daemon-socket connection for up to 300 s, so
unbounded waits exhaust file descriptors (and daemon threads). :class:`WaitSlots` admits
at most :data:`PER_TOKEN` waits per credential (a token, a session or account name,
"anonymous"), :data:`PER_PEER` per client address and :data:`TOTAL` in all by default
(``[web] wait_max_per_credential``, ``wait_max_per_peer``, ``wait_max_total``); a wait over
any cap is refused with 503 and ``Retry-After`` before it touches the daemon. The daemon
has its own cap (``[daemon] max_connections``) for every client together.

Everything runs on the event loop, so plain counters need no lock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from vq.web.errors import RETRY_AFTER_SECONDS, ApiError

__all__ = ["PER_PEER", "PER_TOKEN", "TOTAL", "WaitSlots"]

PER_TOKEN = 128
PER_PEER = 128
TOTAL = 256


class WaitSlots:
    """Counts the waits in flight (see the module rules)."""

    def __init__(self, per_token: int = PER_TOKEN, per_peer: int = PER_PEER, total: int = TOTAL):
        self.per_token = per_token
        self.per_peer = per_peer
        self.total = total
        self._by_token: Counter[str] = Counter()
        self._by_peer: Counter[str] = Counter()
        self._all = 0

    @contextmanager
    def hold(self, token: str, peer: str) -> Iterator[None]:
        """One slot for the ``with`` body, or ApiError 503 (``Retry-After``) at a cap."""
        if self._all >= self.total:
            self._refuse(f"{self.total} waits are in progress on this console")
        if self._by_token[token] >= self.per_token:
            self._refuse(f"{self.per_token} waits are in progress with these credentials")
        if self._by_peer[peer] >= self.per_peer:
            self._refuse(f"{self.per_peer} waits are in progress from this address")
        self._all += 1
        self._by_token[token] += 1
        self._by_peer[peer] += 1
        try:
            yield
        finally:
            self._all -= 1
            self._by_token[token] -= 1
            self._by_peer[peer] -= 1
            if not self._by_token[token]:
                del self._by_token[token]
            if not self._by_peer[peer]:
                del self._by_peer[peer]

    @staticmethod
    def _refuse(message: str) -> None:
        raise ApiError(
            503,
            "too-many-waits",
            message,
            hint="wait for one to answer, or retry after the Retry-After delay",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
