"""``vq logs ID [-f] [--stderr] [--tail N]``: print or follow a job's output by byte offset."""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

import click

from vq._fs import NotRegularFile, open_regular_path
from vq.cli.common import daemon_answers, gateway, owner_option
from vq.cli.job_ids import JOB_ID
from vq.cli.output import NO_DAEMON, note
from vq.cli.types import AsciiIntRange
from vq.domain.text import escape_control_bytes
from vq.errors import InvalidInput

if TYPE_CHECKING:
    from vq.domain.spec import JobSpec
    from vq.gateway import Gateway

__all__ = ["logs"]

_CHUNK = 64 * 1024
#: How often ``-f`` on a PENDING job checks that a daemon is there to start it.
_DAEMON_CHECK_SECONDS = 5.0


def _tail_offset(path: str, lines: int) -> int:
    """Byte offset where the last ``lines`` lines of ``path`` start (reads backwards)."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return 0
    if lines == 0:
        return size
    position = size
    buffer = b""
    with os.fdopen(open_regular_path(path, follow=True), "rb") as handle:
        while position > 0 and buffer.count(b"\n") <= lines:
            step = min(_CHUNK, position)
            position -= step
            handle.seek(position)
            buffer = handle.read(step) + buffer
    body = buffer[:-1] if buffer.endswith(b"\n") else buffer
    cut = len(body)
    for _ in range(lines):
        cut = body.rfind(b"\n", 0, cut)
        if cut == -1:
            return position
    return position + cut + 1


def _copy_from(path: str, offset: int, escape: bool = False) -> int:
    try:
        with os.fdopen(open_regular_path(path, follow=True), "rb") as handle:
            handle.seek(offset)
            while block := handle.read(_CHUNK):
                sys.stdout.buffer.write(escape_control_bytes(block) if escape else block)
                offset += len(block)
    except FileNotFoundError:
        return offset
    sys.stdout.buffer.flush()
    return offset


@click.command()
@click.argument("job_id", type=JOB_ID)
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the job ends.")
@click.option("--stderr", "use_stderr", is_flag=True, help="Show stderr instead of stdout.")
@click.option("--tail", "tail", type=AsciiIntRange(0), help="Start with the last N lines.")
@click.option("--raw", is_flag=True, help="Do not escape control characters on a terminal.")
# Hidden: how `vq logs HOST ID -f` resumes after a dropped connection.
@click.option("--from-byte", "from_byte", type=AsciiIntRange(0), hidden=True)
@click.option("--tell", is_flag=True, hidden=True, help="Print the start offset only.")
@owner_option
def logs(
    job_id: str,
    follow: bool,
    use_stderr: bool,
    tail: int | None,
    raw: bool,
    from_byte: int | None = None,
    tell: bool = False,
    uid: int | None = None,
) -> None:
    """Print a job's stdout (or stderr); with -f follow it until the job ends.

    On a terminal, control characters (escape sequences) are shown escaped unless --raw;
    piped or redirected output is always the exact bytes.
    """
    escape = not raw and sys.stdout.isatty()
    access = gateway(uid)
    state = access.paths
    spec = access.spec(job_id)
    if spec.archive_path and not state.workspace(job_id).exists():
        from vq.errors import NotFound

        raise NotFound(
            f"job {job_id} was archived to {spec.archive_path}; its logs are in the archive",
            hint=f"tar -xjf {spec.archive_path} -C DIR",
        )
    path = str(state.workspace(job_id) / (spec.stderr_path if use_stderr else spec.stdout_path))
    try:
        _follow(access, job_id, spec, path, follow, tail, from_byte, tell, escape)
    except NotRegularFile as exc:  # the job put a FIFO, device or directory there
        raise InvalidInput(
            f"job {job_id}'s {os.path.basename(path)} {exc.strerror}: vq reads only regular files",
            hint="the job replaced its log file; look in its workspace (`vq status` names it)",
            reference="not-a-regular-file",
        ) from None


def _follow(
    access: Gateway,
    job_id: str,
    spec: JobSpec,
    path: str,
    follow: bool,
    tail: int | None,
    from_byte: int | None,
    tell: bool,
    escape: bool,
) -> None:
    """Print ``path`` from the chosen offset; with ``follow``, until the job ends."""
    offset = _tail_offset(path, tail) if tail is not None else 0
    if from_byte is not None:
        offset = from_byte
    if tell:
        click.echo(str(offset))
        return
    offset = _copy_from(path, offset, escape)
    if not follow:
        return
    delay = 0.05
    next_daemon_check = 0.0
    told = False
    while not spec.is_terminal:
        if spec.state.value == "PENDING" and time.monotonic() >= next_daemon_check:
            next_daemon_check = time.monotonic() + _DAEMON_CHECK_SECONDS
            if not told and not daemon_answers():
                note(f"job {job_id} is PENDING and {NO_DAEMON}; waiting for it (Ctrl-C stops)")
                told = True
        time.sleep(delay)
        delay = min(0.5, delay * 1.5)
        before = offset
        offset = _copy_from(path, offset, escape)
        if offset != before:
            delay = 0.05
        spec = access.spec(job_id)
    _copy_from(path, offset, escape)  # what was written between the last read and the end
