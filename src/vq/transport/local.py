"""LocalRunner: run one external command on this machine under the Runner contract.

See :mod:`vq.transport.runner` for the contract (never a shell, the child in its own
process group, a deadline that kills the group, a per-stream output cap that is an error).

``run(argv, timeout=…)`` is the older text form, kept for existing callers: it returns a
:class:`Completed` with ``returncode`` None and an ``error`` text instead of raising, so
those callers decide what a failure means without catching a zoo of exceptions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import overload

from vq.errors import CommandNotStarted, CommandTimeout, OutputTooLarge, TransportError
from vq.transport.process import capture, describe_os_error
from vq.transport.runner import (
    DEFAULT_DEADLINE_S,
    DEFAULT_MAX_OUTPUT_BYTES,
    Argv,
    RunResult,
)
from vq.transport.stream import ProcessStream

__all__ = ["Completed", "LocalRunner", "LocalStream"]

#: The older text form's output cap per stream (it predates caps; keep it generous).
_LEGACY_CAP = 16 << 20


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def first_error_line(self) -> str:
        text = self.error or self.stderr.strip() or self.stdout.strip()
        return text.splitlines()[0] if text else f"exit code {self.returncode}"


def _name(argv: Argv) -> str:
    return str(argv[0]) if isinstance(argv[0], str) else argv[0].decode(errors="replace")


class LocalRunner:
    """Runs commands on this machine (see the module docstring)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = env

    @overload
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
    ) -> Completed: ...

    @overload
    def run(
        self,
        argv: Argv,
        *,
        stdin: bytes | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> RunResult: ...

    def run(
        self,
        argv: Argv,
        *,
        stdin: bytes | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
    ) -> RunResult | Completed:
        if timeout is not None:
            return self._run_text(argv, timeout, env, input_text)
        return self._run(argv, stdin, deadline_s, max_output_bytes, self._env)

    def _run(
        self,
        argv: Argv,
        stdin: bytes | None,
        deadline_s: float,
        max_output_bytes: int,
        env: Mapping[str, str] | None,
    ) -> RunResult:
        if not argv:
            raise CommandNotStarted("empty command", hint="give the program to run")
        name = _name(argv)
        try:
            got = capture(
                argv, stdin=stdin, deadline_s=deadline_s, max_output_bytes=max_output_bytes, env=env
            )
        except OSError as exc:
            raise CommandNotStarted(
                describe_os_error(name, exc), hint="check that the program is installed"
            ) from exc
        if got.timed_out:
            raise CommandTimeout(
                f"{name}: timed out after {deadline_s:g}s; its process group was killed",
                hint="raise the deadline, or find out why the command hangs",
            )
        if got.overflow:
            raise OutputTooLarge(
                f"{name}: {got.overflow} exceeded {max_output_bytes} bytes; the command was killed",
                hint="raise the output cap, or stream the output instead",
            )
        assert got.rc is not None
        # A child killed by a signal: report it as a shell would (128 + the signal).
        rc = got.rc if got.rc >= 0 else 128 - got.rc
        return RunResult(rc, got.stdout, got.stderr)

    def _run_text(
        self,
        argv: Argv,
        timeout: float,
        env: Mapping[str, str] | None,
        input_text: str | None,
    ) -> Completed:
        args = tuple(str(a) for a in argv)
        try:
            result = self._run(
                argv,
                None if input_text is None else input_text.encode(),
                timeout,
                _LEGACY_CAP,
                env if env is not None else self._env,
            )
        except CommandTimeout:
            return Completed(args, None, "", "", f"{args[0]}: timed out after {timeout:g}s")
        except TransportError as exc:
            return Completed(args, None, "", "", exc.message)
        return Completed(
            args,
            result.rc,
            result.stdout.decode(errors="replace"),
            result.stderr.decode(errors="replace"),
        )

    def open_stream(
        self,
        argv: Argv,
        *,
        stdin: bytes | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_stderr_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> LocalStream:
        if not argv:
            raise CommandNotStarted("empty command", hint="give the program to run")
        try:
            proc = ProcessStream(
                list(argv),
                stdin=stdin,
                deadline_s=deadline_s,
                max_stderr_bytes=max_stderr_bytes,
                env=self._env,
            )
        except OSError as exc:
            raise CommandNotStarted(
                describe_os_error(_name(argv), exc), hint="check that the program is installed"
            ) from exc
        return LocalStream(proc, _name(argv), deadline_s, max_stderr_bytes)


class LocalStream:
    """:class:`~vq.transport.runner.Stream` of a local command."""

    def __init__(self, proc: ProcessStream, name: str, deadline_s: float, cap: int) -> None:
        self._proc, self._name, self._deadline_s, self._cap = proc, name, deadline_s, cap

    def read(self, size: int = 65536) -> bytes:
        data = self._proc.read_raw(size)
        if self._proc.timed_out:
            self._proc.close()
            raise self._timeout()
        return data

    def wait(self) -> RunResult:
        end = self._proc.finish()
        if end.timed_out:
            raise self._timeout()
        if end.stderr_overflow:
            raise OutputTooLarge(
                f"{self._name}: stderr exceeded {self._cap} bytes; the command was killed",
                hint="raise the output cap",
            )
        assert end.rc is not None
        return RunResult(end.rc if end.rc >= 0 else 128 - end.rc, b"", end.stderr)

    def _timeout(self) -> CommandTimeout:
        return CommandTimeout(
            f"{self._name}: timed out after {self._deadline_s:g}s; its process group was killed",
            hint="raise the deadline, or find out why the command hangs",
        )

    def close(self) -> None:
        self._proc.close()

    def __enter__(self) -> LocalStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
