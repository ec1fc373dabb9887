"""The gateway's daemon half: asking the daemon of one state root over its socket.

Contract: every method answers without raising for "no daemon" except
:meth:`DaemonLink.daemon_only`. :meth:`DaemonLink.call` is None when no daemon answers
(the caller falls back to the disk); :meth:`DaemonLink.ask` is None also when a daemon
dies mid-call (read-only snapshots only); :meth:`DaemonLink.daemon_only` raises
:class:`~vq.errors.DaemonNotRunning` (or PermissionDenied for a socket open to its admin
group only). Imports only the stdlib client, errors and paths: no pydantic.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TypeVar

from vq._fs import read_regular
from vq.client import Client
from vq.errors import DaemonNotRunning, PermissionDenied, ProtocolError
from vq.paths import StatePaths
from vq.protocol.answers import Rpc

A = TypeVar("A")

__all__ = ["SNAPSHOT_TIMEOUT_SECONDS", "DaemonLink"]

#: How long a read-only snapshot waits for the daemon before reading the disk instead.
SNAPSHOT_TIMEOUT_SECONDS = 10.0


class DaemonLink:
    """The RPC side of a gateway: ``paths`` names the socket, ``timeout`` bounds a call."""

    def __init__(self, paths: StatePaths, timeout: float = 60.0) -> None:
        self.paths = paths
        self.timeout = timeout

    def client(self, timeout: float | None = None) -> Client:
        return Client(str(self.paths.daemon_sock), timeout=timeout or self.timeout)

    def call(self, method: Rpc[A], params: Mapping[str, object] | None = None) -> A | None:
        """The daemon's answer, or None when no daemon is answering (use the fallback).

        ``method`` (:mod:`vq.protocol.answers`) names the RPC and types its answer; the
        daemon validated the answer against the method's result model before sending it.
        """
        if not self.paths.daemon_sock.exists():
            return None
        try:
            answer: A = self.client().call(method.name, params)
            return answer
        except DaemonNotRunning:
            return None

    def ask(
        self,
        method: Rpc[A],
        params: Mapping[str, object] | None = None,
        timeout: float = SNAPSHOT_TIMEOUT_SECONDS,
    ) -> A | None:
        """Like :meth:`call`, but a daemon that fails mid-call also yields None (reads only)."""
        if not self.paths.daemon_sock.exists():
            return None
        try:
            answer: A = self.client(timeout).call(method.name, params)
            return answer
        except (DaemonNotRunning, ProtocolError, OSError):
            return None

    def daemon_only(self, method: Rpc[A], params: Mapping[str, object] | None = None) -> A:
        """The daemon's answer to a verb that needs it; DaemonNotRunning when none answers."""
        sock = self.paths.daemon_sock
        if sock.exists() and not os.access(sock, os.R_OK | os.W_OK):
            raise PermissionDenied(
                f"the daemon's socket {sock} is open to its admin group only",
                hint="your own jobs are read and written in your own tree without it",
            )
        answer = self.call(method, params)
        if answer is None:
            raise DaemonNotRunning(
                f"no vq daemon is running for {self.paths.root}",
                hint="start one with `vq daemon start`",
            )
        return answer

    def daemon_pid(self) -> int | None:
        """The pid in ``daemon.pid`` when that process is alive (no RPC)."""
        try:
            pid = int(read_regular(self.paths.daemon_pid, 64).decode().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid if pid > 0 else None
