"""Console-script entry point of ``vq``.

A well-formed ``vq submit`` is handled by :mod:`vq.cli.submit_fast` without importing
Click (the hot path of scripted submission), and a plain ``vq status ID`` that the local
daemon answers by :mod:`vq.cli.status_fast`, and ``vq list --json`` (with ``--state``
filters at most) by :mod:`vq.cli.list_fast`; everything else — and any submit the fast
parser is unsure about — goes to the Click application in :mod:`vq.cli.app`. Every
call that ends (they all end in ``SystemExit``) is offered to :mod:`vq.cli.client_log`,
which records the mutating ones.

A vq run by another vq over SSH finds ``VQ_ANSWER_MARK`` in its environment and first
writes the answer mark (:mod:`vq.protocol.answer_mark`), so the caller can drop what a
``vq_command`` wrapper printed before.

No command line a program can be started with carries a NUL byte (``execve`` ends each
argument at the first one), so an argument holding one (an in-process caller's) is refused
here, before any verb reads it: exit 2, nothing done, nothing recorded.
"""

from __future__ import annotations

import os
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if "VQ_ANSWER_MARK" in os.environ:
        from vq.protocol.answer_mark import announce

        announce(os.environ, sys.stdout.buffer, sys.stderr.buffer)
    refused = _nul_argument(args)
    if refused is not None:
        from vq.cli.output import print_error

        print_error(
            f"argument {refused + 1} ({args[refused]!r}) contains a NUL byte",
            "no file name, value or command word may contain a NUL byte (\\0); remove it",
        )
        sys.exit(2)
    try:
        if args[:1] == ["submit"] and not _may_name_host(args[1:]):
            from vq.cli.submit_fast import run_fast

            code = run_fast(args[1:])
            if code is not None:
                sys.exit(code)
        elif args[:1] == ["status"]:
            from vq.cli.status_fast import run_status_fast

            code = run_status_fast(args[1:])
            if code is not None:
                sys.exit(code)
        elif args[:1] in (["list"], ["queue"]) and "--json" in args:
            from vq.cli.list_fast import run_list_fast

            code = run_list_fast(args[1:])
            if code is not None:
                sys.exit(code)
        from vq.cli.app import run

        run(args)
    except SystemExit as exc:
        from vq.cli.client_log import record

        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        record(args, code)
        raise


def _nul_argument(args: list[str]) -> int | None:
    """The index of the first argument that holds a NUL byte, or None."""
    for index, arg in enumerate(args):
        if "\x00" in arg:
            return index
    return None


def _may_name_host(rest: list[str]) -> bool:
    """Whether ``vq submit``'s first positional word may be a HOST (then Click decides)."""
    from vq.cli.host_words import first_positional

    index = first_positional("submit", rest)
    if index is None:
        return False
    from vq.config.host_names import LOCAL_NAMES, configured_names

    return rest[index] in LOCAL_NAMES or rest[index] in configured_names()
