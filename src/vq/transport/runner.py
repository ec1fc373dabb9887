"""The Runner contract: how vq runs an external command, here or on another host.

Every implementation (:class:`~vq.transport.local.LocalRunner`,
:class:`~vq.transport.ssh.SshRunner`) honours the same contract, checked by one test suite
(``tests/contract/test_runner_contract.py``):

- ``argv`` is a list of words, never a shell string; each element arrives at the program
  byte for byte (spaces, quotes, newlines, ``$(…)``, ``;``, globs, non-UTF-8 bytes given as
  ``bytes``).
- ``stdin`` bytes are the program's whole standard input; None means /dev/null.
- ``deadline_s`` bounds the whole call. On expiry the command's process group is killed
  and :class:`~vq.errors.CommandTimeout` is raised (SSH: also when the host stops
  answering, as :class:`~vq.errors.SshUnreachable`).
- ``max_output_bytes`` caps each stream. Exceeding it kills the command and raises
  :class:`~vq.errors.OutputTooLarge`; output is never cut silently.
- A command that runs and exits with any status 0–255 is a :class:`RunResult`, not an
  error; :meth:`RunResult.check` turns a non-zero status into
  :class:`~vq.errors.CommandFailed` where the caller wants that.
- Failing to run the command at all raises a :class:`~vq.errors.TransportError`
  subclass whose ``transient`` flag says whether retrying may help. One difference is
  inherent: a missing program is :class:`~vq.errors.CommandNotStarted` locally, while
  over SSH the remote shell reports it as status 127 ("command not found" on stderr).

``open_stream`` is the streaming form for large or endless output (tar streams,
``logs -f``): the caller reads stdout incrementally from a :class:`Stream`, then calls
``wait``. stderr is captured (capped) in the background.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from vq.errors import CommandFailed, RemoteCommandFailed

__all__ = [
    "DEFAULT_DEADLINE_S",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "Argv",
    "RunResult",
    "Runner",
    "Stream",
]

DEFAULT_DEADLINE_S = 30.0
DEFAULT_MAX_OUTPUT_BYTES = 1 << 20

#: A command as words; ``bytes`` elements pass non-UTF-8 arguments through unchanged.
Argv = Sequence[str | bytes]


@dataclass(frozen=True)
class RunResult:
    """A command that ran to its end: its exit status and both streams, byte-exact."""

    rc: int
    stdout: bytes
    stderr: bytes
    where: str = "local"  # "local", or the SSH destination

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def first_line(self) -> str:
        """What went wrong in one line: stderr's first line, else stdout's, else the status."""
        for stream in (self.stderr, self.stdout):
            text = stream.decode(errors="replace").strip()
            if text:
                return text.splitlines()[0]
        return f"exit code {self.rc}"

    def check(self, what: str) -> RunResult:
        """Self when the status is 0, else CommandFailed naming ``what`` and stderr's last line."""
        if self.rc == 0:
            return self
        last = self.stderr.decode(errors="replace").strip().splitlines()
        detail = last[-1] if last else ""
        message = f"{what} exited with status {self.rc}" + (f": {detail}" if detail else "")
        if self.where == "local":
            raise CommandFailed(message, hint="see the command's error output", detail=detail)
        raise RemoteCommandFailed(
            f"on {self.where}: {message}", hint="see the command's error output", detail=detail
        )


class Stream(Protocol):
    """A running command whose stdout is read incrementally (payload bytes only)."""

    def read(self, size: int = 65536) -> bytes:
        """Up to ``size`` bytes of stdout; b"" at its end. Raises on the deadline."""
        ...

    def wait(self) -> RunResult:
        """Wait for the end (within the deadline); stdout in the result is empty."""
        ...

    def close(self) -> None:
        """Kill the command if it still runs and release everything (idempotent)."""
        ...


class Runner(Protocol):
    """Runs external commands under the contract in the module docstring."""

    def run(
        self,
        argv: Argv,
        *,
        stdin: bytes | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> RunResult: ...

    def open_stream(
        self,
        argv: Argv,
        *,
        stdin: bytes | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_stderr_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        idle_s: float | None = None,
    ) -> Stream: ...
