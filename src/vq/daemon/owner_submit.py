"""Each user's submit socket of the multi-user daemon (§2.4, §7.1): ``users/<uid>/submit.sock``.

A user's ``vq submit`` would otherwise start the validation and storage layers in a new
interpreter to write its spec (~0.3 s); the daemon has them loaded. So for every owner
tree it listens on ``users/<uid>/submit.sock`` (``<uid>:<primary gid>`` 0600, in the
root-owned ``users/<uid>``, so no one else can connect and the owner cannot replace it)
and serves one method, ``submit``:

* the peer's uid (SO_PEERCRED) must be the tree's, else the call is refused (a check that
  only ever narrows: the socket's mode is what lets the owner in);
* params naming anything of the user's own files or configuration are refused
  (:data:`vq._owner_socket.NOT_SERVED`; the CLI writes such a job itself);
* ``submitter`` is the tree's uid, never the caller's word;
* the submit service then runs on the connection's thread *as the owner*
  (:func:`vq.daemon.fs_identity.acting_as`): the spec, its lock, the workspace and the
  captured environment are created with the owner's permissions and owned by them,
  exactly as the owner's own CLI would have; root code only passes the environment
  through to its file, never applies it;
* the daemon records the tree's uid as the owner of each id it wrote
  (:meth:`vq.paths.OwnerMap.claim`) before it logs it, so a copy of the id planted later
  in another tree is an impostor and never holds the job up;
* the loop is then rung, and discovery reads the new spec under the untrusted-spec rules
  like any other (the owner comes from the tree).

It also serves ``hold``: why the daemon holds one of the caller's jobs (a collision with
another owner's copy, a quarantine), which the owner's ``vq status`` shows; only the
socket's owner asks, and only about their own tree.

One thread accepts on every owner's socket; each connection is served on its own thread.
New owner trees get their socket on the next :meth:`OwnerSubmitSockets.sync`.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import threading
from collections.abc import Callable
from typing import Any

from vq._owner_socket import NOT_SERVED, SOCKET_NAME
from vq.domain.ids import is_job_id
from vq.errors import InvalidInput, PermissionDenied
from vq.paths import MultiUserLayout
from vq.protocol.messages import SubmitParams
from vq.protocol.methods import HoldResult, JobIdParams, SubmitResult
from vq.services.context import ServiceContext
from vq.services.submit import result_payload, submit
from vq.store.owned import MultiOwnerSpecStore

from .fs_identity import FsIdentity, IdentityError, acting_as, supported
from .rpc import Route, RpcServer, SocketAccess, current_peer

__all__ = ["OwnerSubmitSockets"]

log = logging.getLogger("vq.daemon")

#: How long the accepting thread waits before it looks for new sockets (and stop).
_ACCEPT_WAIT_SECONDS = 0.5


class OwnerSubmitSockets:
    """The owners' submit sockets of one multi-user root.

    ``context_for(uid)`` builds the service context of an owner's tree; the
    ``on_submitted`` given to :meth:`start` is called (on the connection's thread) after
    a spec was written.
    """

    def __init__(
        self,
        layout: MultiUserLayout,
        store: MultiOwnerSpecStore,
        context_for: Callable[[int], ServiceContext],
        hold: Callable[[int, str], str | None] = lambda uid, job_id: None,
    ) -> None:
        self._layout = layout
        self._store = store
        self._context_for = context_for
        self._hold = hold
        self._on_submitted: Callable[[], None] = lambda: None
        self._servers: dict[int, RpcServer] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._enabled = False

    def start(self, on_submitted: Callable[[], None]) -> None:
        """Open a socket for every owner tree and start accepting."""
        self._on_submitted = on_submitted
        if not supported():
            log.warning("submit sockets are off: per-thread identities are not known here")
            return
        self._enabled = True
        self.sync()
        self._thread = threading.Thread(target=self._accept, name="vq-submit-sockets", daemon=True)
        self._thread.start()

    def sync(self) -> None:
        """Open the socket of each owner tree that has none yet (cheap: one listdir)."""
        if not self._enabled:
            return
        for uid in self._store.owner_uids():
            if uid in self._servers or uid < self._store.min_uid:
                continue
            server = self._open(uid)
            if server is not None:
                with self._lock:
                    self._servers[uid] = server

    def _open(self, uid: int) -> RpcServer | None:
        try:
            who = FsIdentity.of_uid(uid)
        except KeyError:
            return None  # no passwd entry: start-up refuses such a tree; nothing to serve
        path = self._layout.users_dir / str(uid) / SOCKET_NAME
        routes = {
            "submit": Route(SubmitParams, SubmitResult, lambda params: self._submit(uid, params)),
            "hold": Route(JobIdParams, HoldResult, lambda params: self._held(uid, params)),
        }
        try:
            server = RpcServer(path, routes, access=SocketAccess(who.gid, _peer_is(uid), owner=uid))
        except OSError as exc:
            log.warning("no submit socket for user %d at %s: %s", uid, path, exc)
            return None
        server.timeout = 0  # handle_request() accepts what is ready, never waits
        return server

    def _accept(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                servers = list(self._servers.values())
            with selectors.DefaultSelector() as selector:
                for server in servers:
                    selector.register(server, selectors.EVENT_READ, server)
                try:
                    ready = selector.select(_ACCEPT_WAIT_SECONDS) if servers else []
                except (OSError, ValueError):  # a socket closed by stop()
                    ready = []
                if not servers:
                    self._stopped.wait(_ACCEPT_WAIT_SECONDS)
            for key, _ in ready:
                if self._stopped.is_set():
                    return
                with contextlib.suppress(OSError, ValueError):
                    key.data.handle_request()  # serves the connection on its own thread

    def _submit(self, uid: int, params: SubmitParams) -> SubmitResult:
        named = sorted(key for key in NOT_SERVED if getattr(params, key, None) is not None)
        if named:
            raise InvalidInput(
                f"the submit socket does not take {', '.join(named)}",
                hint="`vq submit` writes such a job into your tree itself",
            )
        stamped = params.model_copy(update={"submitter": str(uid)})
        try:
            who = FsIdentity.of_uid(uid)
            with acting_as(who):
                result = submit(self._context_for(uid), stamped)
        except (KeyError, IdentityError) as exc:
            raise PermissionDenied(
                f"user {uid}'s job could not be written as that user: {exc}",
                hint="`vq submit` writes the job into your tree itself when the socket fails",
            ) from None
        for spec in result.specs:
            self._layout.owners.claim(spec.id, uid)  # before the id is named anywhere
        log.info(
            "submit socket of user %d: wrote %s", uid, ", ".join(spec.id for spec in result.specs)
        )
        self._on_submitted()
        return SubmitResult.model_validate(result_payload(result))

    def _held(self, uid: int, params: JobIdParams) -> HoldResult:
        if not is_job_id(params.id):
            raise InvalidInput(f"{params.id!r} is not a job id", hint="give a full job id")
        return HoldResult(reason=self._hold(uid, params.id))

    def stop(self) -> None:
        """Stop accepting, close every socket and remove its file."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * _ACCEPT_WAIT_SECONDS + 1)
        with self._lock:
            servers, self._servers = self._servers, {}
        for uid, server in servers.items():
            server.server_close()
            with contextlib.suppress(OSError):
                (self._layout.users_dir / str(uid) / SOCKET_NAME).unlink()


def _peer_is(uid: int) -> Callable[[str, dict[str, Any]], None]:
    """The socket's guard: the connecting process runs as the tree's owner."""

    def guard(method: str, params: dict[str, Any]) -> None:
        peer = current_peer().get("uid")
        if peer != uid:
            raise PermissionDenied(
                f"this submit socket is user {uid}'s (the caller is uid {peer})",
                hint="submit as the user the job belongs to",
            )

    return guard
