"""The daemon's Unix-socket RPC server (§2.1): line-delimited JSON, one thread per peer.

Contract: a malformed, oversized or failing request gets a JSON error response; it never
kills the daemon or the connection loop (an oversized line closes that one connection,
because its framing is lost). The socket is created mode 0600; in multi-user mode
(``access``) it is ``root:<admin group>`` 0660 and every request passes ``access.guard``
(the admin token of writes, :mod:`vq.services.admin_token`) before its method runs.

The server serves a table of :class:`Route` (:mod:`vq.daemon.routes`): it validates the
request's params into the route's params model (invalid params are an ``invalid-input``
error naming the field, code 4, never a traceback), calls the handler with them and
answers the handler's typed result as JSON.

A method that blocks (``wait_change``) calls :func:`peer_closed` between short waits: it
peeks at the connection being served on this thread without consuming anything, so a
peer that hung up early frees its thread within one wait slice.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import socketserver
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from vq.errors import DaemonBusy, ProtocolError, UsageError, VqError
from vq.protocol.framing import MAX_MESSAGE_BYTES, decode_message, error_response
from vq.protocol.messages import parse_params

from .storage import StorageGuard

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "IDLE_SECONDS",
    "Handler",
    "Route",
    "RpcServer",
    "SocketAccess",
    "current_peer",
    "peer_closed",
]

#: Connections served at once (each holds one thread, e.g. a ``wait_change`` long-poll);
#: beyond it a connection is answered DaemonBusy at once, without a thread.
DEFAULT_MAX_CONNECTIONS = 256
#: A connection that sends no complete request for this long is closed (a slow or
#: stalled peer never pins a thread).
IDLE_SECONDS = 60.0
#: How long a refused connection may take to send its request line (read on the
#: accepting thread, so short).
_REFUSE_READ_SECONDS = 0.2

_peer = threading.local()


def current_peer() -> dict[str, int | None]:
    """The peer of the request being handled on this thread (pid, uid, gid; best-effort)."""
    return getattr(_peer, "creds", {"pid": None, "uid": None, "gid": None})


def peer_closed() -> bool:
    """Whether the peer of the request being handled on this thread hung up (EOF or reset).

    A non-blocking ``MSG_PEEK``: pending bytes (a pipelined request) mean "still there"
    and stay unread; False outside a request thread.
    """
    sock: socket.socket | None = getattr(_peer, "sock", None)
    if sock is None:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


log = logging.getLogger(__name__)

#: A handler: typed params in, typed result out (raises VqError for refusals).
Handler = Callable[[Any], BaseModel]


@dataclass(frozen=True)
class Route:
    """One served method: its params model, its result model and its handler."""

    params: type[BaseModel]
    result: type[BaseModel]
    handler: Handler

    def answer(self, method: str, params: dict[str, Any]) -> bytes:
        """Validate ``params``, run the handler, and return its result as JSON text."""
        typed = parse_params(
            self.params, params, hint=f"see the `{method}` method in docs/architecture.md"
        )
        result = self.handler(typed)
        if not isinstance(result, self.result):
            raise TypeError(f"{method} answered {type(result).__name__}")
        return result.model_dump_json(exclude_unset=True).encode()


@dataclass(frozen=True)
class SocketAccess:
    """Multi-user access: the socket's group (0660) and a check run before every method.

    ``owner`` (a user's submit socket, :mod:`vq.daemon.owner_submit`): the socket is
    ``<owner>:<gid>`` 0600 instead."""

    gid: int
    guard: Callable[[str, dict[str, Any]], None]
    owner: int | None = None


class _Handler(socketserver.StreamRequestHandler):
    server: RpcServer

    def handle(self) -> None:
        _peer.sock = self.request
        try:
            self._serve()
        finally:
            _peer.sock = None

    def _serve(self) -> None:
        try:
            raw = self.request.getsockopt(
                socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
            )
            pid, uid, gid = struct.unpack("3i", raw)
            _peer.creds = {"pid": pid, "uid": uid, "gid": gid}
        except (OSError, AttributeError, struct.error):
            _peer.creds = {"pid": None, "uid": None, "gid": None}
        while True:
            try:
                # Only the read of a request is timed: a method (a long-poll, whose
                # peer_closed() peeks without blocking) runs on a blocking socket.
                self.request.settimeout(self.server.idle_seconds)
                line = self.rfile.readline(MAX_MESSAGE_BYTES + 1)
                self.request.settimeout(None)
            except OSError:  # includes the idle timeout
                return
            if not line:
                return
            if len(line) > MAX_MESSAGE_BYTES:
                self._send(error_response(None, ProtocolError("request too large").to_payload()))
                return
            if not line.strip():
                continue
            if not self._send(self.server.respond(line)):
                return

    def _send(self, response: dict[str, Any] | bytes) -> bool:
        """Write one response line (a dict is encoded here; bytes are a ready line)."""
        try:
            if isinstance(response, dict):
                response = json.dumps(response, separators=(",", ":")).encode() + b"\n"
            self.wfile.write(response)
            self.wfile.flush()
        except (OSError, ValueError, TypeError) as exc:
            log.warning("could not answer an RPC peer: %s", exc)
            return False
        return True


class RpcServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = False
    #: Long-polls (``wait_change``) hold a connection each: let many connect at once.
    request_queue_size = 256

    def __init__(
        self,
        path: Path,
        routes: Mapping[str, Route],
        *,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        idle_seconds: float = IDLE_SECONDS,
        access: SocketAccess | None = None,
        storage: StorageGuard | None = None,
    ) -> None:
        self.routes = routes
        self.access = access
        #: Told of a write the state root refused while answering (dispatch then holds).
        self.storage = storage
        self.max_connections = max_connections
        self.idle_seconds = idle_seconds
        self._slots = threading.BoundedSemaphore(max_connections)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # stale: we hold the daemon lock, so no live daemon owns it
        old_umask = os.umask(0o177)
        try:
            super().__init__(str(path), _Handler)
        finally:
            os.umask(old_umask)
        if access is None:
            os.chmod(path, 0o600)
        elif access.owner is not None:
            os.chown(path, access.owner, access.gid)
            os.chmod(path, 0o600)
        else:
            os.chown(path, 0, access.gid)
            os.chmod(path, 0o660)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on its own thread while a slot is free; else refuse it
        (DaemonBusy) on this thread and close it."""
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, request: socket.socket) -> None:
        request_id: Any = None
        with contextlib.suppress(OSError, ValueError):
            request.settimeout(_REFUSE_READ_SECONDS)
            data = request.recv(MAX_MESSAGE_BYTES).split(b"\n", 1)[0]
            request_id = json.loads(data).get("id") if data else None
        busy = DaemonBusy(
            f"the daemon is serving {self.max_connections} connections already",
            hint="retry in a few seconds; [daemon] max_connections raises the cap",
        )
        response = error_response(request_id, busy.to_payload())
        with contextlib.suppress(OSError, TypeError, ValueError):
            request.sendall(json.dumps(response, separators=(",", ":")).encode() + b"\n")
        self.shutdown_request(request)

    def respond(self, line: bytes) -> dict[str, Any] | bytes:
        """The response to one request line: an error object, or the encoded result line."""
        request_id: Any = None
        try:
            message = decode_message(line)
            request_id = message.get("id")
            method = message.get("method")
            params = message.get("params") or {}
            if not isinstance(method, str) or method not in self.routes:
                raise UsageError(
                    f"unknown method {method!r}",
                    hint="known methods: " + ", ".join(sorted(self.routes)),
                    reference="unknown-method",
                )
            if not isinstance(params, dict):
                raise ProtocolError("params must be a JSON object")
            if self.access is not None:
                self.access.guard(method, params)
            result = self.routes[method].answer(method, params)
            head = json.dumps({"id": request_id}, separators=(",", ":")).encode()
            return head[:-1] + b',"result":' + result + b"}\n"
        except VqError as exc:
            return error_response(request_id, exc.to_payload())
        except Exception as exc:
            full = None if self.storage is None else self.storage.failed_write(exc)
            if full is not None:  # a full disk is that call's error, not an internal one
                return error_response(request_id, full.to_payload())
            log.exception("RPC request failed")
            return error_response(
                request_id,
                VqError(f"internal error: {exc}", hint="see daemon.log").to_payload(),
            )
