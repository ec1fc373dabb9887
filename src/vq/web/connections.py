"""Connection hygiene for the console's HTTP server (uvicorn with h11).

uvicorn times out an idle keep-alive connection (``timeout_keep_alive``) but not one
that is still sending its request head: a client that trickles header bytes (slowloris)
would hold its connection forever. :class:`HeaderTimeoutH11Protocol` closes a connection
whose next request head is not complete within :data:`HEADER_SECONDS` of the connection
opening (or of the previous response ending). The body and the response are not timed:
long-polls are bounded by their own ``timeout`` and capped by :mod:`vq.web.waits`.

:data:`UVICORN_OPTIONS` are the server limits ``vq web serve`` and the ``--web``
sidecar run with.
"""

from __future__ import annotations

import asyncio
from typing import TypedDict

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEADER_SECONDS", "UVICORN_OPTIONS", "HeaderTimeoutH11Protocol"]

#: A request head must be complete this long after the connection opened (or the
#: previous response ended).
HEADER_SECONDS = 10.0


class UvicornOptions(TypedDict):
    timeout_keep_alive: int
    h11_max_incomplete_event_size: int
    limit_concurrency: int


UVICORN_OPTIONS: UvicornOptions = {
    "timeout_keep_alive": 5,  # idle keep-alive connections are closed after 5 s
    "h11_max_incomplete_event_size": 16 * 1024,  # a request head larger than 16 KiB: 400
    # Connections and tasks at once; beyond it uvicorn answers 503. Well under a 1024-fd
    # limit, since a long-poll also holds a daemon-socket connection.
    "limit_concurrency": 400,
}


class HeaderTimeoutH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on every request head (see module)."""

    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        self._arm()  # the next request head is due (handle_events below may disarm it)
        super().on_response_complete()

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a request head arrived: its deadline is met
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(HEADER_SECONDS, self._head_overdue)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_overdue(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()
