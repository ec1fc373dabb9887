"""The daemon's Unix-socket RPC server (§2.1): line-delimited JSON, one thread per peer.

Contract: a malformed, oversized or failing request gets a JSON error response; it never
kills the daemon or the connection loop (an oversized line closes that one connection,
because its framing is lost). The socket is created mode 0600.

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vq.errors import ProtocolError, UsageError, VqError
from vq.protocol.framing import MAX_MESSAGE_BYTES, decode_message, error_response

__all__ = ["Method", "RpcServer", "current_peer", "peer_closed"]

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

Method = Callable[[dict[str, Any]], Any]


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
                line = self.rfile.readline(MAX_MESSAGE_BYTES + 1)
            except OSError:
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

    def _send(self, response: dict[str, Any]) -> bool:
        try:
            self.wfile.write(json.dumps(response, separators=(",", ":")).encode() + b"\n")
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

    def __init__(self, path: Path, methods: dict[str, Method]) -> None:
        self.methods = methods
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # stale: we hold the daemon lock, so no live daemon owns it
        old_umask = os.umask(0o177)
        try:
            super().__init__(str(path), _Handler)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)

    def respond(self, line: bytes) -> dict[str, Any]:
        request_id: Any = None
        try:
            message = decode_message(line)
            request_id = message.get("id")
            method = message.get("method")
            params = message.get("params") or {}
            if not isinstance(method, str) or method not in self.methods:
                raise UsageError(
                    f"unknown method {method!r}",
                    hint="known methods: " + ", ".join(sorted(self.methods)),
                    reference="unknown-method",
                )
            if not isinstance(params, dict):
                raise ProtocolError("params must be a JSON object")
            return {"id": request_id, "result": self.methods[method](params)}
        except VqError as exc:
            return error_response(request_id, exc.to_payload())
        except Exception as exc:
            log.exception("RPC request failed")
            return error_response(
                request_id,
                VqError(f"internal error: {exc}", hint="see daemon.log").to_payload(),
            )
