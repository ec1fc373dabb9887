"""LocalRunner: run one external command with a deadline and capture its output.

Never ``shell=True``. A missing program, a timeout or any OS error comes back as a
:class:`Completed` with ``returncode`` None and an ``error`` text, so callers decide what
a failure means instead of catching a zoo of exceptions.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Completed", "LocalRunner"]


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


class LocalRunner:
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
    ) -> Completed:
        args = tuple(argv)
        try:
            proc = subprocess.run(
                args,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=dict(env) if env is not None else None,
                input=input_text,
                stdin=None if input_text is not None else subprocess.DEVNULL,
                check=False,
            )
        except FileNotFoundError:
            return Completed(args, None, "", "", f"{args[0]}: command not found")
        except subprocess.TimeoutExpired:
            return Completed(args, None, "", "", f"{args[0]}: timed out after {timeout:g}s")
        except OSError as exc:
            return Completed(args, None, "", "", f"{args[0]}: {exc.strerror}")
        return Completed(args, proc.returncode, proc.stdout, proc.stderr)
