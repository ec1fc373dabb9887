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
- Every call sets the answer mark (:mod:`vq.protocol.answer_mark`): what the
  ``vq_command`` printed before vq started (a module or conda banner) is dropped from
  both streams, of a captured call and of a stream alike.
- :meth:`run_json` turns a remote vq error (``vq: error:`` / ``hint:`` on stderr, its exit
  code) back into the same typed error (:class:`~vq.errors.RemoteCommandFailed` when it
  carries none), validates the answer against the verb's model
  (:mod:`vq.protocol.remote_answers`; anything else is a
  :class:`~vq.errors.RemoteProtocolError` naming the host, which is marked ``invalid``),
  and refuses a payload carrying a ``spec_version`` newer than this build reads.
- Words vq puts on a remote command line after a verb's options are job ids, each
  checked first and always after ``--`` (:func:`job_words`), so a remote never reads one
  as an option.
- Text a remote wrote that ends up in a message or in the host's health is shown with
  its control characters escaped (:func:`vq.hosts.health.remote_text`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import replace
from itertools import takewhile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from vq.config.hosts import HostSettings
from vq.domain.ids import is_id_or_prefix
from vq.domain.spec import SPEC_VERSION
from vq.errors import (
    HostDown,
    InvalidInput,
    OutputTooLarge,
    RemoteCommandFailed,
    RemoteProtocolError,
    TransportError,
    UnsupportedSpecVersion,
    VqError,
    error_from_payload,
)
from vq.hosts.health import mark_down, record_failure, record_ok, remote_text
from vq.protocol.answer_mark import MARK_ENV, MarkSkipper, after_mark
from vq.protocol.remote_answers import BadAnswer, read_answer
from vq.transport.framing import new_nonce
from vq.transport.runner import RunResult
from vq.transport.ssh import SshRunner, SshStream

__all__ = [
    "MarkedStream",
    "RemoteHost",
    "check_spec_versions",
    "job_words",
    "may_have_run",
    "remote_error",
    "said_vq_error",
]

_MAX_OUTPUT = 64 << 20
#: ssh's own words when the connection was never made: the command cannot have run.
_NEVER_CONNECTED = re.compile(
    r"connect to host .*:|Could not resolve hostname|Name or service not known"
    r"|Temporary failure in name resolution"
)


def may_have_run(exc: TransportError) -> bool:
    """Whether the remote command may have run despite ``exc``: a transient failure
    (a timeout, a dropped connection, no answer) unless ssh said it never connected, or
    output past the cap (something ran and printed it). A permanent one (host key,
    credentials, no vq, marked down) stopped it before."""
    if isinstance(exc, OutputTooLarge):
        return True
    return exc.transient and not _NEVER_CONNECTED.search(exc.detail or "")


def job_words(words: Sequence[str], ids: Sequence[str]) -> list[str]:
    """``words`` (a verb and its options), ``--``, then ``ids`` (just ``words`` when there
    are none): each a job id or a prefix of one (InvalidInput otherwise), so none can
    reach the remote as an option."""
    for job_id in ids:
        if not is_id_or_prefix(job_id):
            raise InvalidInput(
                f"{remote_text(job_id)!r} is not a job id",
                hint="job ids are 12 lowercase hex characters (any unique prefix of at "
                "least 4 will do), as `vq queue HOST` shows them",
            )
    if not ids:
        return list(words)
    return [*words, "--", *(job_id.strip().lower() for job_id in ids)]


def remote_error(name: str, result: RunResult) -> VqError:
    """The typed error a remote ``vq`` reported (its exit code and ``vq: error:`` line)."""
    lines = result.stderr.decode(errors="replace").strip().splitlines()
    message = next((ln[len("vq: error: ") :] for ln in lines if ln.startswith("vq: error: ")), "")
    hint = next((ln[len("hint: ") :] for ln in lines if ln.startswith("hint: ")), None)
    if not message:
        detail = remote_text(lines[-1]) if lines else ""
        said = f": {detail}" if detail else ""
        return RemoteCommandFailed(
            f"on host {name}: vq exited with status {result.rc}{said}",
            hint="see the remote error output",
            detail=detail,
        )
    return error_from_payload(
        {
            "code": result.rc,
            "message": f"on {name}: {remote_text(message)}",
            "hint": remote_text(hint) if hint is not None else None,
        }
    )


def said_vq_error(result: RunResult) -> bool:
    """Whether the remote vq reported an error of its own (a ``vq: error:`` line)."""
    return any(line.startswith(b"vq: error: ") for line in result.stderr.strip().splitlines())


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


class MarkedStream:
    """A remote vq's stream with what preceded its answer mark dropped (stdout as it is
    read, stderr in :meth:`wait`'s result); otherwise the :class:`SshStream` it wraps. A
    stream cut before its mark was read yields no byte: what it held may be a banner or a
    piece of the mark."""

    def __init__(self, stream: SshStream, nonce: str) -> None:
        self._stream, self._nonce = stream, nonce
        self._skipper = MarkSkipper(nonce)
        self._ended = False

    def read(self, size: int = 65536) -> bytes:
        while not self._ended:
            chunk = self._stream.read(size)
            if not chunk:
                self._ended = True
                return self._skipper.finish(complete=self._stream.ended)
            out = self._skipper.feed(chunk)
            if out:
                return out
        return b""

    def wait(self) -> RunResult:
        result = self._stream.wait()
        return replace(result, stderr=after_mark(result.stderr, self._nonce))

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> MarkedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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

    def argv(self, words: Sequence[str], nonce: str) -> list[str]:
        """The remote command line: the answer mark's variable, ``vq_command``, ``words``."""
        return ["env", f"{MARK_ENV}={nonce}", *self.settings.vq_command, *words]

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
        return type(exc)(
            f"host {self.name}: {remote_text(exc.message)}",
            hint=exc.hint,
            reference=exc.reference,
            transient=exc.transient,
            detail=remote_text(exc.detail),
        )

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
        nonce = new_nonce()
        try:
            result = self.runner.run(
                self.argv(words, nonce),
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
        stdout, stderr = after_mark(result.stdout, nonce), after_mark(result.stderr, nonce)
        return replace(result, stdout=stdout, stderr=stderr)

    def bad_answer(self, words: Sequence[str], why: str) -> RemoteProtocolError:
        """The host answered ``vq WORDS…`` with something that is not a vq answer: the
        error naming it (not transient), recorded as the host's ``invalid`` health."""
        verb = " ".join(takewhile(lambda word: not word.startswith("-"), words)) or words[0]
        error = RemoteProtocolError(
            f"host {self.name} answered `vq {verb}` with something that is not a valid vq "
            f"answer ({remote_text(why)})",
            hint=f"check the vq installed on {self.name} and its vq_command "
            "(`vq hosts --probe`); nothing it sent was used",
            transient=False,
            reference="remote-bad-answer",
        )
        record_failure(self.state_root, self.name, error, invalid=True)
        return error

    def read(self, words: Sequence[str], stdout: bytes, answer: type[BaseModel]) -> Any:
        """``stdout`` of ``vq WORDS…`` read as ``answer`` (:func:`read_answer`); a bad
        one is :meth:`bad_answer`, a newer ``spec_version`` is refused."""
        try:
            payload = read_answer(stdout, answer)
        except BadAnswer as exc:
            raise self.bad_answer(words, str(exc)) from None
        check_spec_versions(self.name, payload)
        return payload

    def run_json(
        self,
        words: Sequence[str],
        answer: type[BaseModel],
        *,
        stdin: bytes | None = None,
        deadline_s: float | None = None,
    ) -> Any:
        """Run a ``--json`` verb and return its answer once ``answer`` accepts it
        (errors re-typed; see the module docstring)."""
        result = self.run(words, stdin=stdin, deadline_s=deadline_s)
        if result.rc != 0:
            raise remote_error(self.name, result)
        return self.read(words, result.stdout, answer)

    def stream(
        self,
        words: Sequence[str],
        *,
        stdin: bytes | None = None,
        deadline_s: float,
        idle_s: float | None = None,
    ) -> MarkedStream:
        """Start ``vq WORDS…`` with its stdout read incrementally (logs, tar streams);
        ``idle_s``: how long a read may see no byte before the stream counts as lost.
        A failure to start is recorded here; the caller records one while reading
        (:meth:`failed`) and a first answer (:meth:`answered`)."""
        self._refuse_if_down()
        nonce = new_nonce()
        try:
            stream = self.runner.open_stream(
                self.argv(words, nonce), stdin=stdin, deadline_s=deadline_s, idle_s=idle_s
            )
        except TransportError as exc:
            raise self.failed(exc) from exc
        return MarkedStream(stream, nonce)

    def answered(self, rtt_ms: float) -> None:
        """A stream (:meth:`stream`) got its first answer: the host is ``ok`` again."""
        record_ok(self.state_root, self.name, rtt_ms)

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
