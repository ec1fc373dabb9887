"""LocalRunner: run one external command on this machine under the Runner contract.

See :mod:`vq.transport.runner` for the contract (never a shell, the child in its own
process group, a deadline that kills the group, a per-stream output cap that is an error).
"""

from __future__ import annotations

from collections.abc import Mapping

from vq.errors import CommandNotStarted, CommandTimeout, OutputTooLarge
from vq.transport.process import capture, describe_os_error
from vq.transport.runner import (
    DEFAULT_DEADLINE_S,
    DEFAULT_MAX_OUTPUT_BYTES,
    Argv,
    RunResult,
)
from vq.transport.stream import ProcessStream

__all__ = ["LocalRunner", "LocalStream"]


def _name(argv: Argv) -> str:
    return str(argv[0]) if isinstance(argv[0], str) else argv[0].decode(errors="replace")


class LocalRunner:
    """Runs commands on this machine (see the module docstring)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = env

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
        name = _name(argv)
        try:
            got = capture(
                argv,
                stdin=stdin,
                deadline_s=deadline_s,
                max_output_bytes=max_output_bytes,
                env=self._env,
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

    def open_stream(
        self,
        argv: Argv,
        *,
        stdin: bytes | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_stderr_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        idle_s: float | None = None,
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
        return LocalStream(proc, _name(argv), deadline_s, max_stderr_bytes, idle_s)


class LocalStream:
    """:class:`~vq.transport.runner.Stream` of a local command."""

    def __init__(
        self,
        proc: ProcessStream,
        name: str,
        deadline_s: float,
        cap: int,
        idle_s: float | None = None,
    ) -> None:
        self._proc, self._name, self._deadline_s, self._cap = proc, name, deadline_s, cap
        self._idle_s = idle_s

    def read(self, size: int = 65536) -> bytes:
        data = self._proc.read_raw(size)
        if self._proc.timed_out:
            self._proc.close()
            raise self._timeout()
        if data:  # the inactivity deadline counts once the output began
            self._proc.idle_s = self._idle_s
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
        if self._proc.idle_out:
            return CommandTimeout(
                f"{self._name}: printed nothing for {self._proc.idle_s:g}s; "
                "its process group was killed",
                hint="raise the inactivity deadline, or find out why the command stalls",
            )
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
