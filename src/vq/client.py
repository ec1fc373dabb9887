"""A small, stdlib-only client of the daemon's RPC socket (used by the CLI and tests).

It imports only ``json``, ``socket`` and vq's leaf modules so ``vq submit`` stays fast.
A missing or refusing socket raises :class:`~vq.errors.DaemonNotRunning`; an error
answer is re-raised as the typed error the daemon sent.
"""

from __future__ import annotations

import itertools
import os
import socket

from vq import _owner_socket
from vq.errors import DaemonNotRunning, ProtocolError, VqError
from vq.protocol.framing import encode_message, result_of

# typing is imported for the type checker only: this module is on the Click-free
# `vq submit` fast path, where importing typing costs milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from vq.protocol.answers import PingAnswer, SubmitAnswer


__all__ = ["Client", "owner_hold", "ring_doorbell", "submit_to_owner_socket"]

#: Responses (e.g. a listing of 100,000 jobs) may be larger than requests.
MAX_RESPONSE_BYTES = 512 * 1024 * 1024

_ids = itertools.count(1)


class Client:
    """One connection per call; cheap (~0.2 ms) and robust against daemon restarts."""

    def __init__(self, socket_path: str, timeout: float = 60.0) -> None:
        self.socket_path = socket_path
        self.timeout = timeout

    def _connect(self, timeout: float) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(self.socket_path)
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
            sock.close()
            raise DaemonNotRunning(
                f"no vq daemon is answering on {self.socket_path}",
                hint="start one with `vq daemon start`",
            ) from exc
        except PermissionError as exc:
            sock.close()
            raise DaemonNotRunning(
                f"the daemon socket {self.socket_path} is not open to this user "
                "(a multi-user daemon's socket is for its admin group)",
                hint="your own jobs are read and written in your tree without the daemon",
            ) from exc
        except OSError:
            sock.close()
            raise
        return sock

    def call(
        self,
        method: str,
        params: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """Send one request and return its result (or raise the daemon's error): the
        decoded JSON, typed by the caller (:class:`vq.gateway.daemon.DaemonLink` types it
        per method)."""
        request_id = next(_ids)
        data = encode_message({"id": request_id, "method": method, "params": dict(params or {})})
        with self._connect(self.timeout if timeout is None else timeout) as sock:
            try:
                sock.sendall(data)
                with sock.makefile("rb") as reader:
                    line = reader.readline(MAX_RESPONSE_BYTES + 1)
            except OSError as exc:  # the daemon died or stalled mid-call
                raise ProtocolError(
                    f"the daemon connection failed during {method!r} ({exc}); "
                    "the request may or may not have taken effect",
                    hint="check with `vq list`; `vq submit --idempotency-key` makes retries safe",
                ) from exc
        return result_of(line, method)

    def ping(self, timeout: float = 2.0) -> PingAnswer | None:
        """The daemon's ping answer, or None if no daemon answers."""
        try:
            result: PingAnswer | None = self.call("ping", timeout=timeout)
        except (DaemonNotRunning, OSError, ProtocolError):
            return None
        return result if isinstance(result, dict) else None


def ring_doorbell(path: str | os.PathLike[str]) -> bool:
    """Ring a multi-user daemon's doorbell (``vq.daemon.doorbell``): one datagram, best
    effort, never blocking; True if it was delivered. It carries nothing but "look now"."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            sock.sendto(b"!", os.fspath(path))
        return True
    except OSError:
        return False


def submit_to_owner_socket(
    system_root: str | None, params: Mapping[str, Any], env: Mapping[str, str]
) -> SubmitAnswer | None:
    """Multi-user mode: the daemon's answer on this user's ``users/<euid>/submit.sock``
    (:mod:`vq._owner_socket`), or None when the submit is not one it serves, the caller
    is root, or no daemon answers there (nothing was written then: the caller writes the
    spec itself). The daemon's refusal of a served submit is raised as the typed error
    it sent."""
    euid = os.geteuid()
    if system_root is None or euid == 0 or not _owner_socket.served(params, env):
        return None
    sock = _owner_socket.submit_socket(system_root, euid)
    if not os.path.exists(sock):
        return None
    try:
        payload: SubmitAnswer = Client(sock).call("submit", dict(params))
    except DaemonNotRunning:
        return None
    return payload


#: How long a ``vq status`` waits for the daemon's ``hold`` answer (it only reads memory).
HOLD_TIMEOUT_SECONDS = 2.0


def owner_hold(system_root: str, job_id: str) -> str | None:
    """Multi-user mode: why the root daemon holds this user's job ``job_id`` (the ``hold``
    of ``users/<euid>/submit.sock``: a collision with another owner's copy, a quarantine),
    or None when nothing does, or no daemon (of this version) answers there."""
    euid = os.geteuid()
    sock = _owner_socket.submit_socket(system_root, euid)
    if euid == 0 or not os.path.exists(sock):
        return None
    try:
        answer = Client(sock, timeout=HOLD_TIMEOUT_SECONDS).call("hold", {"id": job_id})
    except (VqError, OSError):
        return None  # advisory: the status stands without it
    reason = answer.get("reason") if isinstance(answer, dict) else None
    return reason if isinstance(reason, str) else None
