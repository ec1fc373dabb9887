"""SshRunner: the only code in vq that runs ``ssh``; the Runner contract on another host.

Every call is::

    ssh -T -o BatchMode=yes -o ControlMaster=auto -o ControlPath=<dir>/cm-<key>
        -o ControlPersist=60 -o ConnectTimeout=5 -o ServerAliveInterval=5
        -o ServerAliveCountMax=3 -o StrictHostKeyChecking=<yes|accept-new>
        [ssh_options…] DEST -- <framed command>

so ``~/.ssh/config`` applies (``ssh_options=("-F", path)`` picks another file). The
command is framed (:mod:`vq.transport.framing`): the remote login shell must be a POSIX
shell; its start-up noise is discarded on both streams, the exit status comes from the
END trailer, and a missing trailer is :class:`~vq.errors.RemoteProtocolError` (outcome
unknown). The remote shell's process group is killed (over the same master connection)
when the deadline expires or an output cap is hit after the command started.

Multiplexing: one master per connection shape in the control directory
(``$XDG_RUNTIME_DIR/vq``, else ``<tmp>/vq-ssh-<uid>``; mode 0700 and owned by this user,
or refused): ``<key>`` hashes the destination, the ssh options, the host key policy and
the ssh configuration files (:func:`vq.transport.ssh_control.control_path`), so two host
entries that reach one machine differently (a ProxyCommand, another port or user) never
share a master, and one's stalled proxy never stalls the other. A call that fails on a
broken master before its command started has that master checked (``-O check``); a dead
one's socket is removed and the call retried once.

Failures (ssh's own exit status 255, read by :mod:`vq.transport.ssh_diagnose`):
:class:`~vq.errors.SshUnreachable` (also: no answer within the deadline; transient),
:class:`~vq.errors.HostKeyUnknown`, :class:`~vq.errors.HostKeyChanged`,
:class:`~vq.errors.AuthFailed`. ``StrictHostKeyChecking=no`` is never used nor accepted;
``host_key_policy="accept-new"`` is the explicit opt-in to trust a host's first key.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from vq.errors import (
    AuthFailed,
    CommandNotStarted,
    CommandTimeout,
    HostKeyChanged,
    HostKeyUnknown,
    OutputTooLarge,
    RemoteProtocolError,
    SshUnreachable,
    TransportError,
)
from vq.transport.framing import MarkerStripper, new_nonce, unframe, wrap_command
from vq.transport.process import Captured, capture, describe_os_error
from vq.transport.runner import DEFAULT_DEADLINE_S, DEFAULT_MAX_OUTPUT_BYTES, Argv, RunResult
from vq.transport.ssh_control import (
    check_socket_room,
    control_path,
    default_control_dir,
    ensure_control_dir,
)
from vq.transport.ssh_diagnose import Failure, classify, last_line
from vq.transport.stream import ProcessStream

__all__ = ["HostKeyPolicy", "SshRunner", "SshStream"]

HostKeyPolicy = Literal["strict", "accept-new"]

#: Allowance for shell start-up noise on top of the payload cap, per stream.
_NOISE_SLACK = 64 << 10
_KILL_DEADLINE_S = 5.0
_CHECK_DEADLINE_S = 5.0
_NO_STRICT = re.compile(r"stricthostkeychecking\s*[= ]\s*(no|off|false)", re.I)


class SshRunner:
    """Runs commands on ``destination`` over ssh (see the module docstring)."""

    def __init__(
        self,
        destination: str,
        *,
        ssh_options: Sequence[str] = (),
        host_key_policy: HostKeyPolicy = "strict",
        control_dir: Path | None = None,
        ssh_program: str = "ssh",
        control_persist_s: int = 60,
    ) -> None:
        if not destination or destination.startswith("-"):
            raise CommandNotStarted(
                f"invalid SSH destination {destination!r}", hint="use [user@]host or a Host alias"
            )
        if _NO_STRICT.search(" ".join(ssh_options)):
            raise CommandNotStarted(
                "refusing StrictHostKeyChecking=no in the ssh options",
                hint="add the host's key to known_hosts (ssh-keyscan), or use "
                "host_key_policy='accept-new' to trust a host's first key",
            )
        if host_key_policy not in ("strict", "accept-new"):
            raise CommandNotStarted(
                f"unknown host_key_policy {host_key_policy!r}", hint="use strict or accept-new"
            )
        self.destination = destination
        control_dir = control_dir or default_control_dir()
        check_socket_room(control_dir)
        self.control_dir = ensure_control_dir(control_dir)
        strict = "yes" if host_key_policy == "strict" else "accept-new"
        self.control_path = control_path(
            self.control_dir,
            ssh_program=ssh_program,
            destination=destination,
            host_key_policy=strict,
            ssh_options=ssh_options,
        )
        self._ssh = [ssh_program, "-T"]
        self._options = [
            *("-o", "BatchMode=yes", "-o", "ControlMaster=auto"),
            *("-o", f"ControlPath={self.control_path}"),
            *("-o", f"ControlPersist={control_persist_s}", "-o", "ConnectTimeout=5"),
            *("-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"),
            *("-o", f"StrictHostKeyChecking={strict}"),
            *ssh_options,
        ]

    # --- argv ---------------------------------------------------------------------------
    def ssh_argv(self, remote: str | None = None, *control: str) -> list[str]:
        """The ssh command line; ``control`` such as ("-O", "check") for the master."""
        argv = [*self._ssh, *self._options, *control, self.destination]
        return argv if remote is None else [*argv, "--", remote]

    # --- the Runner contract ------------------------------------------------------------
    def run(
        self,
        argv: Argv,
        *,
        stdin: bytes | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> RunResult:
        if not argv:
            raise CommandNotStarted("empty command", hint="give the program to run")
        until = time.monotonic() + deadline_s
        for attempt in (1, 2):
            nonce = new_nonce()
            got = self._capture(
                wrap_command(argv, nonce), stdin, until - time.monotonic(), max_output_bytes
            )
            out, err = unframe(got.stdout, nonce), unframe(got.stderr, nonce)
            if got.timed_out or got.overflow:
                self._kill_remote(out.remote_pgid)
                if got.overflow:
                    raise self._too_large(got.overflow, max_output_bytes)
                if out.began:
                    raise CommandTimeout(
                        f"on {self.destination}: the command timed out after {deadline_s:g}s; "
                        "its process group was killed",
                        hint="raise the deadline, or find out why the command hangs",
                    )
                raise self._unreachable(f"no answer within {deadline_s:g}s", got.stderr)
            if out.rc is not None:
                for name, framed in (("stdout", out), ("stderr", err)):
                    if len(framed.payload) > max_output_bytes:
                        raise self._too_large(name, max_output_bytes)
                return RunResult(out.rc, out.payload, err.payload, where=self.destination)
            if out.began:
                raise RemoteProtocolError(
                    f"on {self.destination}: the command started but its end was not seen "
                    f"(ssh exit status {got.rc}); its outcome is unknown",
                    hint="the connection may have dropped; check the host before retrying "
                    "a command that is not idempotent",
                    detail=last_line(got.stderr),
                )
            failure = classify(got.stderr) if got.rc == 255 else Failure.OTHER
            if failure is Failure.MUX and attempt == 1:
                self._drop_stale_master()
                continue
            raise self._failure(failure, got)
        raise AssertionError("unreachable")  # pragma: no cover

    def open_stream(
        self,
        argv: Argv,
        *,
        stdin: bytes | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_stderr_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        idle_s: float | None = None,
    ) -> SshStream:
        if not argv:
            raise CommandNotStarted("empty command", hint="give the program to run")
        nonce = new_nonce()
        try:
            proc = ProcessStream(
                [*self.ssh_argv(wrap_command(argv, nonce))],
                stdin=stdin,
                deadline_s=deadline_s,
                max_stderr_bytes=max_stderr_bytes + _NOISE_SLACK,
            )
        except OSError as exc:
            raise CommandNotStarted(
                describe_os_error(self._ssh[0], exc), hint="install the OpenSSH client"
            ) from exc
        return SshStream(self, proc, nonce, deadline_s, max_stderr_bytes, idle_s)

    def close(self) -> None:
        """Stop this destination's master connection, if any (``ssh -O exit``)."""
        with contextlib.suppress(TransportError, OSError):
            capture(
                self.ssh_argv(None, "-O", "exit"),
                stdin=None,
                deadline_s=_CHECK_DEADLINE_S,
                max_output_bytes=DEFAULT_MAX_OUTPUT_BYTES,
            )

    # --- helpers ------------------------------------------------------------------------
    def _capture(self, remote: str, stdin: bytes | None, deadline_s: float, cap: int) -> Captured:
        try:
            return capture(
                self.ssh_argv(remote),
                stdin=stdin,
                deadline_s=max(deadline_s, 0.0),
                max_output_bytes=cap + _NOISE_SLACK,
            )
        except OSError as exc:
            raise CommandNotStarted(
                describe_os_error(self._ssh[0], exc), hint="install the OpenSSH client"
            ) from exc

    def kill_remote(self, pgid: int | None) -> None:
        """SIGKILL the remote process group ``pgid`` (best effort, bounded)."""
        self._kill_remote(pgid)

    def _kill_remote(self, pgid: int | None) -> None:
        if pgid is None or pgid <= 1:
            return
        with contextlib.suppress(OSError):
            capture(
                self.ssh_argv(f"kill -KILL -- -{pgid}"),
                stdin=None,
                deadline_s=_KILL_DEADLINE_S,
                max_output_bytes=DEFAULT_MAX_OUTPUT_BYTES,
            )

    def _drop_stale_master(self) -> None:
        """Remove this shape's master socket when ``-O check`` finds no live master on it."""
        check = capture(
            self.ssh_argv(None, "-O", "check"),
            stdin=None,
            deadline_s=_CHECK_DEADLINE_S,
            max_output_bytes=DEFAULT_MAX_OUTPUT_BYTES,
        )
        if check.rc == 0:
            return
        with contextlib.suppress(FileNotFoundError):
            info = os.lstat(self.control_path)
            if stat.S_ISSOCK(info.st_mode) and info.st_uid == os.geteuid():
                os.unlink(self.control_path)

    def _too_large(self, stream: str, cap: int) -> OutputTooLarge:
        return OutputTooLarge(
            f"on {self.destination}: {stream} exceeded {cap} bytes; the command was killed",
            hint="raise the output cap, or stream the output instead",
        )

    def _unreachable(self, why: str, stderr: bytes) -> SshUnreachable:
        return SshUnreachable(
            f"cannot reach {self.destination} over SSH: {why}",
            hint=f"check that the host is up and reachable (ssh {self.destination} true); "
            "this is transient and may be retried",
            detail=last_line(stderr),
        )

    def _failure(self, failure: Failure, got: Captured) -> TransportError:
        dest, said = self.destination, last_line(got.stderr)
        if failure is Failure.HOST_KEY_CHANGED:
            return HostKeyChanged(
                f"the SSH host key of {dest} has changed ({said})",
                hint="if the host was really reinstalled, remove the old key with "
                "`ssh-keygen -R <host>` and add the new one (`ssh-keyscan`); "
                "otherwise treat it as an attack",
                detail=said,
            )
        if failure is Failure.HOST_KEY_UNKNOWN:
            return HostKeyUnknown(
                f"the SSH host key of {dest} is not known ({said})",
                hint="verify the key out of band and add it to known_hosts "
                "(`ssh-keyscan -p PORT HOST >> ~/.ssh/known_hosts`), or opt in to "
                "host_key_policy='accept-new'",
                detail=said,
            )
        if failure is Failure.AUTH:
            return AuthFailed(
                f"{dest} refused the SSH credentials ({said})",
                hint=f"check the user, the IdentityFile and the remote authorized_keys "
                f"(`ssh -v {dest} true`)",
                detail=said,
            )
        if failure in (Failure.UNREACHABLE, Failure.MUX):
            return self._unreachable(said or "connection failed", got.stderr)
        return RemoteProtocolError(
            f"on {dest}: ssh exited with status {got.rc} before the command started"
            + (f" ({said})" if said else ""),
            hint=f"run `ssh {dest} true` to see what the host or its login shell says",
            transient=False,
            detail=said,
        )


class SshStream:
    """:class:`~vq.transport.runner.Stream` of a remote command (payload bytes only)."""

    def __init__(
        self,
        runner: SshRunner,
        proc: ProcessStream,
        nonce: str,
        deadline_s: float,
        cap: int,
        idle_s: float | None = None,
    ) -> None:
        self._runner, self._proc, self._nonce = runner, proc, nonce
        self._deadline_s, self._cap, self._idle_s = deadline_s, cap, idle_s
        self._out = MarkerStripper(nonce)
        self._raw_err = b""

    @property
    def ended(self) -> bool:
        """Whether the command's END trailer was read: its output is complete (a stream
        that stops without it was cut)."""
        return self._out.ended

    def read(self, size: int = 65536) -> bytes:
        while True:
            raw = self._proc.read_raw(size)
            if self._proc.timed_out:
                self._runner.kill_remote(self._out.remote_pgid)
                self._proc.close()
                raise self._timeout()
            if not raw:
                return b""
            payload = self._out.feed(raw)
            if payload:  # the inactivity deadline counts once the payload began
                self._proc.idle_s = self._idle_s
            if payload or self._out.ended:
                return payload

    def wait(self) -> RunResult:
        while self.read():
            pass  # drain what the caller did not read: the status is in the trailer
        end = self._proc.finish()
        dest = self._runner.destination
        if end.stderr_overflow:
            self._runner.kill_remote(self._out.remote_pgid)
            raise self._runner._too_large("stderr", self._cap)
        err = unframe(end.stderr, self._nonce)
        if self._out.rc is not None:
            return RunResult(self._out.rc, b"", err.payload, where=dest)
        if self._out.began:
            raise RemoteProtocolError(
                f"on {dest}: the command started but its end was not seen; outcome unknown",
                hint="the connection may have dropped; check the host before retrying",
                detail=last_line(end.stderr),
            )
        failure = classify(end.stderr) if end.rc == 255 else Failure.OTHER
        raise self._runner._failure(failure, Captured(end.rc, b"", end.stderr))

    def _timeout(self) -> TransportError:
        if self._proc.idle_out:  # a silent stream: the link (or a stuck master) is the suspect
            return self._runner._unreachable(
                f"no data for {self._proc.idle_s:g}s mid-stream; the connection is presumed "
                "lost and the command was killed",
                b"",
            )
        if self._out.began:
            return CommandTimeout(
                f"on {self._runner.destination}: the command timed out after "
                f"{self._deadline_s:g}s; its process group was killed",
                hint="raise the deadline, or find out why the command hangs",
            )
        return self._runner._unreachable(f"no answer within {self._deadline_s:g}s", b"")

    def close(self) -> None:
        if not self._out.ended and self._out.began:
            self._runner.kill_remote(self._out.remote_pgid)
        self._proc.close()

    def __enter__(self) -> SshStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
