"""One configured remote vq host: run a remote ``vq`` verb over SSH and record its health.

Contract of :class:`RemoteHost`:

- Every call runs ``[*vq_command, *words]`` through an :class:`~vq.transport.ssh.SshRunner`
  with the host's ``ssh``, ``ssh_options`` and ``host_key_policy``, bounded by
  ``ssh_timeout`` unless the caller gives a longer deadline (uploads, waits, streams).
- A transport failure updates ``<state-root>/hosts/<name>.json`` and is re-raised with
  the host's configured name in its message; an answered call records ``ok`` and its
  round-trip time. Job state is never touched here.
- A host marked ``down = true`` is never contacted (:class:`~vq.errors.HostDown`).
- Status 127 (the remote shell found no ``vq``) is a
  :class:`~vq.errors.RemoteProtocolError` (not transient) and marks the host ``invalid``.
- :meth:`run_json` turns a remote vq error (``vq: error:`` / ``hint:`` on stderr, its exit
  code) back into the same typed error (:class:`~vq.errors.RemoteCommandFailed` when it
  carries none), treats output that is not JSON as a
  :class:`~vq.errors.RemoteProtocolError` (host ``invalid``), and refuses a payload
  carrying a ``spec_version`` newer than this build reads.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vq.domain.spec import SPEC_VERSION
from vq.errors import (
    HostDown,
    RemoteCommandFailed,
    RemoteProtocolError,
    TransportError,
    UnsupportedSpecVersion,
    VqError,
    error_from_payload,
)
from vq.hosts_config import HostSettings
from vq.remote.health import mark_down, record_failure, record_ok
from vq.transport.runner import RunResult
from vq.transport.ssh import SshRunner, SshStream

__all__ = ["RemoteHost", "check_spec_versions", "may_have_run", "remote_error"]

_MAX_OUTPUT = 64 << 20
#: ssh's own words when the connection was never made: the command cannot have run.
_NEVER_CONNECTED = re.compile(
    r"connect to host .*:|Could not resolve hostname|Name or service not known"
    r"|Temporary failure in name resolution"
)


def may_have_run(exc: TransportError) -> bool:
    """Whether the remote command may have run despite ``exc``: a transient failure
    (a timeout, a dropped connection, no answer) unless ssh said it never connected.
    A permanent one (host key, credentials, no vq, marked down) stopped it before."""
    return exc.transient and not _NEVER_CONNECTED.search(exc.detail or "")


def remote_error(name: str, result: RunResult) -> VqError:
    """The typed error a remote ``vq`` reported (its exit code and ``vq: error:`` line)."""
    lines = result.stderr.decode(errors="replace").strip().splitlines()
    message = next((ln[len("vq: error: ") :] for ln in lines if ln.startswith("vq: error: ")), "")
    hint = next((ln[len("hint: ") :] for ln in lines if ln.startswith("hint: ")), None)
    if not message:
        detail = lines[-1] if lines else ""
        said = f": {detail}" if detail else ""
        return RemoteCommandFailed(
            f"on host {name}: vq exited with status {result.rc}{said}",
            hint="see the remote error output",
            detail=detail,
        )
    return error_from_payload({"code": result.rc, "message": f"on {name}: {message}", "hint": hint})


def check_spec_versions(name: str, payload: Any) -> None:
    """Refuse a payload (or any row in it) whose ``spec_version`` is newer than ours."""
    rows: list[Any] = [payload]
    while rows:
        item = rows.pop()
        if isinstance(item, list):
            rows.extend(item)
        elif isinstance(item, dict):
            version = item.get("spec_version")
            if isinstance(version, int) and version > SPEC_VERSION:
                raise UnsupportedSpecVersion(
                    f"host {name} answered with spec_version {version}; "
                    f"this vq reads up to {SPEC_VERSION}",
                    hint="upgrade vq on this machine to read that host's jobs",
                )
            rows.extend(v for v in item.values() if isinstance(v, (dict, list)))


class RemoteHost:
    """A ``[hosts.NAME]`` entry with its SSH runner (see the module docstring)."""

    def __init__(
        self,
        name: str,
        settings: HostSettings,
        state_root: Path,
        *,
        control_dir: Path | None = None,
    ) -> None:
        self.name, self.settings, self.state_root = name, settings, state_root
        self._control_dir = control_dir
        self._runner: SshRunner | None = None

    @property
    def timeout(self) -> float:
        return self.settings.ssh_timeout

    @property
    def runner(self) -> SshRunner:
        if self._runner is None:
            self._runner = SshRunner(
                self.settings.ssh,
                ssh_options=tuple(self.settings.ssh_options),
                host_key_policy=self.settings.host_key_policy,
                control_dir=self._control_dir,
            )
        return self._runner

    def argv(self, words: Sequence[str]) -> list[str]:
        return [*self.settings.vq_command, *words]

    def _refuse_if_down(self) -> None:
        if self.settings.down:
            mark_down(self.state_root, self.name)
            raise HostDown(
                f"host {self.name} is marked down in the configuration",
                hint=f"remove `down = true` from [hosts.{self.name}] to use it again",
            )

    def failed(self, exc: TransportError) -> TransportError:
        """Record ``exc`` in the host's health and return it renamed after the host."""
        record_failure(self.state_root, self.name, exc)
        renamed = type(exc)(
            f"host {self.name}: {exc.message}",
            hint=exc.hint,
            reference=exc.reference,
            transient=exc.transient,
            detail=exc.detail,
        )
        return renamed

    def run(
        self,
        words: Sequence[str],
        *,
        stdin: bytes | None = None,
        deadline_s: float | None = None,
        max_output_bytes: int = _MAX_OUTPUT,
    ) -> RunResult:
        """Run ``vq WORDS…`` on the host; any exit status is a result (see the docstring)."""
        self._refuse_if_down()
        started = time.monotonic()
        try:
            result = self.runner.run(
                self.argv(words),
                stdin=stdin,
                deadline_s=deadline_s or self.timeout,
                max_output_bytes=max_output_bytes,
            )
        except TransportError as exc:
            raise self.failed(exc) from exc
        if result.rc == 127:
            error = RemoteProtocolError(
                f"host {self.name}: {' '.join(self.settings.vq_command)!r} was not found",
                hint=f"install vq there, or set vq_command in [hosts.{self.name}]",
                transient=False,
            )
            record_failure(self.state_root, self.name, error, invalid=True)
            raise error
        record_ok(self.state_root, self.name, (time.monotonic() - started) * 1000)
        return result

    def run_json(
        self, words: Sequence[str], *, stdin: bytes | None = None, deadline_s: float | None = None
    ) -> Any:
        """Run a ``--json`` verb and return its parsed output (errors re-typed)."""
        result = self.run(words, stdin=stdin, deadline_s=deadline_s)
        if result.rc != 0:
            raise remote_error(self.name, result)
        try:
            payload = json.loads(result.stdout)
        except ValueError as exc:
            error = RemoteProtocolError(
                f"host {self.name}: `vq {' '.join(words[:1])}` did not print JSON",
                hint="check that the remote vq is a compatible version (vq hosts --probe)",
                transient=False,
            )
            record_failure(self.state_root, self.name, error, invalid=True)
            raise error from exc
        check_spec_versions(self.name, payload)
        return payload

    def stream(
        self,
        words: Sequence[str],
        *,
        stdin: bytes | None = None,
        deadline_s: float,
        idle_s: float | None = None,
    ) -> SshStream:
        """Start ``vq WORDS…`` with its stdout read incrementally (logs, tar streams);
        ``idle_s``: how long a read may see no byte before the stream counts as lost.
        A failure to start is recorded here; the caller records one while reading
        (:meth:`failed`) and a first answer (:meth:`answered`)."""
        self._refuse_if_down()
        try:
            return self.runner.open_stream(
                self.argv(words), stdin=stdin, deadline_s=deadline_s, idle_s=idle_s
            )
        except TransportError as exc:
            raise self.failed(exc) from exc

    def answered(self, rtt_ms: float) -> None:
        """A stream (:meth:`stream`) got its first answer: the host is ``ok`` again."""
        record_ok(self.state_root, self.name, rtt_ms)

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
