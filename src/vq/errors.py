"""The one error tree of vq and its exit-code table.

This module is a leaf: it imports nothing from vq, so every layer (pure domain code, the
store, the daemon, the CLI) can raise these errors without creating an import cycle.

Tree::

    VqError                      exit 1   base; carries reference, message, hint
     ├── UsageError              exit 2   bad option values or combinations
     ├── NotFound                exit 3   unknown job id, missing file named by the user
     ├── InvalidInput            exit 4   a value or a source that vq refuses (bad duration,
     │    └── UnsafeArchive      exit 4   archive member escaping the workspace, device file…)
     ├── DaemonNotRunning        exit 5   a verb that needs the daemon found none answering
     ├── Conflict                exit 6   the request contradicts current state
     ├── CorruptSpec             exit 7   a spec file that cannot be parsed
     │    └── UnsupportedSpecVersion  exit 7   a spec written by a newer vq
     ├── ConfigError             exit 9   malformed or invalid configuration
     ├── ProtocolError           exit 10  malformed RPC traffic
     ├── TransportError          exit 11  an external command or a remote host failed us;
     │    │                               ``transient`` says whether retrying may help
     │    ├── CommandNotStarted            the program is missing or cannot be executed
     │    ├── CommandTimeout               the deadline expired; the command was killed
     │    ├── OutputTooLarge               a stream exceeded its cap; the command was killed
     │    ├── CommandFailed                a command exited non-zero where that is an error
     │    │    └── RemoteCommandFailed     … on a remote host
     │    ├── SshUnreachable               no SSH connection (refused, timed out, dropped)
     │    ├── HostKeyUnknown               the host's key is not in known_hosts
     │    ├── HostKeyChanged               the host's key differs from known_hosts
     │    ├── AuthFailed                   the host refused our credentials
     │    ├── RemoteProtocolError          the remote output lacks vq's framing: outcome unknown
     │    └── HostDown                     the host is marked ``down = true`` in the config
     ├── OutcomeUnknown          exit 12  a delegated submit may or may not have been accepted
     ├── HostUnavailable         exit 13  a host that might own the job could not be read
     └── WaitTimeout             exit 124 ``vq wait --timeout`` expired (as timeout(1) does)

Every error renders on the CLI as one ``vq: error: <message>`` line plus a ``hint: <hint>``
line, and over RPC/HTTP as ``{"code", "reference", "message", "hint"}`` where ``code`` is
the exit code. ``docs/cli.md`` documents the same table; a test keeps them in sync.
"""

from __future__ import annotations

import errno

# typing is imported for the type checker only: this module is on the Click-free
# `vq submit` fast path, where importing typing costs milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, NotRequired, TypedDict

    class ErrorPayload(TypedDict):
        """An error over RPC and HTTP (:meth:`VqError.to_payload`); defined for the type
        checker only, so this module still imports no ``typing`` at run time."""

        code: int
        reference: str
        message: str
        hint: str | None
        type: str
        #: a transport error only: whether retrying may help
        transient: NotRequired[bool]


__all__ = [
    "EXIT_CODES",
    "AmbiguousId",
    "AuthFailed",
    "CommandFailed",
    "CommandNotStarted",
    "CommandTimeout",
    "ConfigError",
    "Conflict",
    "CorruptSpec",
    "DaemonBusy",
    "DaemonNotRunning",
    "HostDown",
    "HostKeyChanged",
    "HostKeyUnknown",
    "HostUnavailable",
    "InvalidInput",
    "NotFound",
    "OutcomeUnknown",
    "OutputTooLarge",
    "PermissionDenied",
    "ProtocolError",
    "RemoteCommandFailed",
    "RemoteProtocolError",
    "SshUnreachable",
    "StorageError",
    "TransportError",
    "UnsafeArchive",
    "UnsupportedSpecVersion",
    "UsageError",
    "VqError",
    "WaitTimeout",
    "error_from_payload",
    "storage_error",
    "storage_error_under",
]


class VqError(Exception):
    """Base of every error vq reports to a user.

    ``reference`` is a stable kebab-case identifier (safe to match on in scripts);
    ``message`` is one line saying what went wrong; ``hint`` says what to do about it.
    """

    exit_code: ClassVar[int] = 1
    default_reference: ClassVar[str] = "internal-error"

    def __init__(self, message: str, *, hint: str | None = None, reference: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.reference = reference or self.default_reference

    def to_payload(self) -> ErrorPayload:
        """The JSON-safe form used by the RPC protocol and the HTTP API."""
        return {
            "code": self.exit_code,
            "reference": self.reference,
            "message": self.message,
            "hint": self.hint,
            "type": type(self).__name__,
        }


class UsageError(VqError):
    exit_code = 2
    default_reference = "usage"


class NotFound(VqError):
    exit_code = 3
    default_reference = "not-found"


class InvalidInput(VqError):
    exit_code = 4
    default_reference = "invalid-input"


class UnsafeArchive(InvalidInput):
    default_reference = "unsafe-archive"


class DaemonNotRunning(VqError):
    exit_code = 5
    default_reference = "daemon-not-running"


class DaemonBusy(VqError):
    """The daemon is at its connection cap (``[daemon] max_connections``): this request
    was not served; retrying in a few seconds will be (HTTP 503 with Retry-After). Not a
    DaemonNotRunning: a busy daemon runs, so nobody falls back to working without it."""

    exit_code = 5
    default_reference = "daemon-busy"


class Conflict(VqError):
    exit_code = 6
    default_reference = "conflict"


class CorruptSpec(VqError):
    exit_code = 7
    default_reference = "corrupt-spec"


class UnsupportedSpecVersion(CorruptSpec):
    default_reference = "unsupported-spec-version"


class StorageError(VqError):
    """A write failed because the filesystem cannot take it: no space (ENOSPC), a quota
    (EDQUOT) or an I/O error (EIO). An error of that one operation: nothing it was
    writing was acknowledged, and the writer keeps running."""

    exit_code = 14
    default_reference = "no-space"


#: errno values that make a write a :class:`StorageError` rather than a crash.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})


def storage_error(exc: BaseException, where: object) -> StorageError | None:
    """The :class:`StorageError` for ``exc`` if it is a full disk, a quota or an I/O
    error while writing under ``where`` (named in the message), else None."""
    if not isinstance(exc, OSError) or exc.errno not in STORAGE_ERRNOS:
        return None
    if exc.errno == errno.EIO:
        return StorageError(
            f"I/O error writing to {where}",
            hint="check the disk (dmesg); vq retries what it must once writes succeed",
            reference="io-error",
        )
    words = "disk quota exceeded on" if exc.errno == errno.EDQUOT else "no space left on"
    return StorageError(
        f"{words} {where}",
        hint="free space there (`df -h`, `vq cleanup`); nothing was written by this request",
    )


def storage_error_under(exc: BaseException, root: object) -> StorageError | None:
    """:func:`storage_error` naming ``root`` when the failed file lies under it (or the
    error names no file), else the failed file's own directory."""
    import os.path

    filename = getattr(exc, "filename", None)
    where: object = root
    if isinstance(filename, str) and filename:
        top = os.path.abspath(str(root))
        full = os.path.abspath(filename)
        if full != top and not full.startswith(top.rstrip("/") + "/"):
            where = os.path.dirname(full) or full
    return storage_error(exc, where)


class ConfigError(VqError):
    exit_code = 9
    default_reference = "config-error"


class ProtocolError(VqError):
    exit_code = 10
    default_reference = "protocol-error"


class TransportError(VqError):
    """Running an external command, locally or over SSH, failed.

    ``transient`` is True when the same call may succeed later unchanged (a timeout, an
    unreachable host, a dropped connection) and False when something must be fixed first
    (a missing program, an unknown host key, refused credentials). ``detail`` keeps the
    underlying tool's own words (for example ssh's last stderr line) for logs.
    """

    exit_code = 11
    default_reference = "transport-error"
    transient: bool = False

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        reference: str | None = None,
        transient: bool | None = None,
        detail: str = "",
    ):
        super().__init__(message, hint=hint, reference=reference)
        if transient is not None:
            self.transient = transient
        self.detail = detail

    def to_payload(self) -> ErrorPayload:
        return {**super().to_payload(), "transient": self.transient}


class CommandNotStarted(TransportError):
    default_reference = "command-not-started"


class CommandTimeout(TransportError):
    default_reference = "command-timeout"
    transient = True


class OutputTooLarge(TransportError):
    default_reference = "output-too-large"


class CommandFailed(TransportError):
    default_reference = "command-failed"


class RemoteCommandFailed(CommandFailed):
    default_reference = "remote-command-failed"


class SshUnreachable(TransportError):
    default_reference = "ssh-unreachable"
    transient = True


class HostKeyUnknown(TransportError):
    default_reference = "host-key-unknown"


class HostKeyChanged(TransportError):
    default_reference = "host-key-changed"


class AuthFailed(TransportError):
    default_reference = "ssh-auth-failed"


class RemoteProtocolError(TransportError):
    default_reference = "remote-protocol-error"
    transient = True


class HostDown(TransportError):
    default_reference = "host-down"


class OutcomeUnknown(VqError):
    """A delegated request reached the remote host but its answer was lost.

    It may or may not have taken effect; rerunning with the same idempotency key
    resolves it without creating a second job.
    """

    exit_code = 12
    default_reference = "outcome-unknown"


class HostUnavailable(VqError):
    """The answer depends on a host that could not be read: no negative evidence."""

    exit_code = 13
    default_reference = "host-unavailable"


class AmbiguousId(VqError):
    """A short job id (a prefix) that matches more than one job."""

    exit_code = 8
    default_reference = "ambiguous-id"


class PermissionDenied(VqError):
    """The caller may not do this (not root, not the job's owner, not in the admin group)."""

    exit_code = 15
    default_reference = "permission-denied"


class WaitTimeout(VqError):
    exit_code = 124
    default_reference = "wait-timeout"


_ALL: tuple[type[VqError], ...] = (
    VqError,
    UsageError,
    NotFound,
    InvalidInput,
    UnsafeArchive,
    DaemonNotRunning,
    DaemonBusy,
    Conflict,
    CorruptSpec,
    UnsupportedSpecVersion,
    AmbiguousId,
    StorageError,
    ConfigError,
    ProtocolError,
    TransportError,
    CommandNotStarted,
    CommandTimeout,
    OutputTooLarge,
    CommandFailed,
    RemoteCommandFailed,
    SshUnreachable,
    HostKeyUnknown,
    HostKeyChanged,
    AuthFailed,
    RemoteProtocolError,
    HostDown,
    OutcomeUnknown,
    HostUnavailable,
    PermissionDenied,
    WaitTimeout,
)

#: Exit code of each error class, by class name. The CLI's only source of exit codes.
EXIT_CODES: dict[str, int] = {cls.__name__: cls.exit_code for cls in _ALL}

_BY_NAME: dict[str, type[VqError]] = {cls.__name__: cls for cls in _ALL}
#: The most general class of each exit code (the first in _ALL order).
_BY_CODE: dict[int, type[VqError]] = {}
for _cls in _ALL:
    _BY_CODE.setdefault(_cls.exit_code, _cls)


def error_from_payload(payload: dict[str, Any]) -> VqError:
    """Rebuild a typed error from its :meth:`VqError.to_payload` form (used by the client).

    Unknown or missing types become a plain :class:`VqError` so a newer daemon can add
    error types without breaking an older client.
    """
    cls = _BY_NAME.get(str(payload.get("type", "")))
    if cls is None:  # a subclass this side does not know: keep its exit code's family
        cls = _BY_CODE.get(payload.get("code"), VqError)  # type: ignore[arg-type]
    return cls(
        str(payload.get("message", "unknown error")),
        hint=payload.get("hint"),
        reference=payload.get("reference"),
    )
