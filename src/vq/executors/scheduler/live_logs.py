"""Live output of running lane jobs: the cluster-side ``stdout.log``/``stderr.log``
mirrored into the local workspace while the scheduler reports the job running.

A lane job's output is written on the cluster (the batch script's ``exec >>`` into the
shared workspace, also where ``node_scratch_dir`` is set); until copy-back the local
workspace holds none of it. Each status round (:class:`~.observe.Observation`) that finds
jobs running, and has a token of the host's bucket left, asks for the new bytes of their
logs in **one** extra SSH call inside the same worker step (so the lane still has at most
one read-only observation in flight per login host) and appends them to the local files,
where every reader (``vq logs [-f]``, the console) already looks.

Contracts:

* **Bounded.** Each file is read from the byte offset the local copy has reached, at most
  :func:`per_file_cap` bytes a round (the whole call at most :data:`ROUND_BYTES`); the
  remote side seeks (``tail -c +N``), it never ``cat``\\ s a whole log. A log that grows
  faster than that catches up over later rounds, and copy-back brings all of it anyway.
* **Prefix only.** The local file must stay a byte prefix of the remote one, so that a
  follower's offset stays valid when copy-back replaces the file with the remote original
  (nothing is printed twice, nothing skipped). Each read starts :data:`OVERLAP` bytes
  before the local end and the overlap must match the local bytes; a remote file shorter
  than the local one, or a mismatch (a retry whose cluster log started afresh, a job that
  rewrote its log), stops the mirror of that file (:func:`new_bytes` answers None) and
  leaves the local file as it is until copy-back.
* **Never evidence.** A failed or unreadable read changes no job: a transport failure is
  raised to the round (which marks the host, as for any SSH failure), anything else is
  logged and skipped.
* **Serialised with copy-back.** The local append runs on the lane's worker, the same
  thread (FIFO) that later extracts the copy-back, so the two never interleave; a job is
  only mirrored in a round whose status query saw it running, which precedes its
  copy-back on that queue.
* The local files are opened below the job's trusted tree without following a symlink
  (:mod:`vq._safe_open`); a job's log that is not a regular file is not mirrored.
* **Capped where copy-back is.** A :class:`LiveLog` with a ``limit`` (a packed element's
  slot log, of which copy-back keeps only a tail) is mirrored up to that many bytes and
  no further (:func:`within_limit`); its copy-back then continues this prefix
  (:func:`~.packed_copy.settled_log`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from vq._safe_open import open_beneath
from vq.errors import VqError
from vq.transport.runner import Runner

__all__ = [
    "OVERLAP",
    "ROUND_BYTES",
    "LiveLog",
    "LiveLogs",
    "TailChunk",
    "TailRead",
    "new_bytes",
    "parse_tail",
    "per_file_cap",
    "read_start",
    "tail_argv",
    "within_limit",
]

log = logging.getLogger(__name__)

#: Bytes re-read before the local end to check that the local copy is still a prefix.
OVERLAP = 64
#: The most one round reads over all files (the per-file cap divides it).
ROUND_BYTES = 4 << 20
#: The most one file gets in a round, and the least it gets however many files there are.
_FILE_MAX, _FILE_MIN = 1 << 20, 16 << 10

#: For each ``PATH START`` pair: a header ``SIZE COUNT`` (SIZE -1: no regular file), then
#: COUNT bytes of PATH from byte START (at most CAP; ``tail -c +N`` seeks, ``head -c``
#: stops). ``$1`` is CAP.
_TAIL = (
    'cap=$1; shift; while [ "$#" -ge 2 ]; do f=$1; o=$2; shift 2; s=-1; n=0; '
    'if [ -f "$f" ]; then s=$(wc -c <"$f") || s=-1; s=$((s + 0)); fi; '
    'if [ "$s" -gt "$o" ]; then n=$((s - o)); if [ "$n" -gt "$cap" ]; then n=$cap; fi; fi; '
    'printf \'%s %s\\n\' "$s" "$n"; '
    'if [ "$n" -gt 0 ]; then tail -c "+$((o + 1))" -- "$f" | head -c "$n"; fi; done'
)


@dataclass(frozen=True)
class TailRead:
    """One remote file to read from byte ``start``."""

    path: str
    start: int


@dataclass(frozen=True)
class TailChunk:
    """A remote file's answer: its size then (-1: no regular file there) and the bytes
    read from the request's ``start``."""

    size: int
    data: bytes


def per_file_cap(files: int) -> int:
    """How many bytes each of ``files`` logs may bring in one round."""
    return max(_FILE_MIN, min(_FILE_MAX, ROUND_BYTES // max(1, files)))


def tail_argv(reads: Sequence[TailRead], cap: int) -> list[str]:
    """The login-host command reading every one of ``reads`` (at most ``cap`` bytes each)."""
    argv = ["sh", "-c", _TAIL, "sh", str(cap)]
    for read in reads:
        argv += [read.path, str(read.start)]
    return argv


def parse_tail(stdout: bytes, count: int, cap: int) -> list[TailChunk] | None:
    """The ``count`` answers of :func:`tail_argv`'s command, or None when the output is
    not exactly that (a file that shrank between its size and its read, a cut stream)."""
    chunks: list[TailChunk] = []
    at = 0
    for _ in range(count):
        end = stdout.find(b"\n", at)
        if end < 0 or end - at > 48:
            return None
        words = stdout[at:end].split()
        if len(words) != 2 or not all(w.lstrip(b"-").isdigit() for w in words):
            return None
        size, length = int(words[0]), int(words[1])
        if size < -1 or not 0 <= length <= cap or end + 1 + length > len(stdout):
            return None
        chunks.append(TailChunk(size, stdout[end + 1 : end + 1 + length]))
        at = end + 1 + length
    return chunks if at == len(stdout) else None


def read_start(local_size: int) -> int:
    """Where the remote read of a file whose local copy has ``local_size`` bytes starts."""
    return max(0, local_size - OVERLAP)


def new_bytes(local_size: int, local_end: bytes, chunk: TailChunk) -> bytes | None:
    """What to append to a local copy of ``local_size`` bytes ending in ``local_end`` (its
    last ``local_size - read_start(local_size)`` bytes), given the remote ``chunk`` read
    from :func:`read_start`; None when the local copy is not a prefix of the remote file
    (shorter remote, different overlap, no remote file while the local one has bytes)."""
    start = read_start(local_size)
    overlap = local_size - start
    if chunk.size < 0:
        return b"" if local_size == 0 else None
    if chunk.size < local_size or len(local_end) != overlap:
        return None
    if len(chunk.data) < overlap or chunk.data[:overlap] != local_end:
        return None
    return chunk.data[overlap:]


def within_limit(local_size: int, data: bytes, limit: int | None) -> bytes:
    """The part of ``data`` (new bytes for a local copy of ``local_size`` bytes) that keeps
    the copy within ``limit`` bytes (None: no limit)."""
    if limit is None:
        return data
    return data[: max(0, limit - local_size)]


@dataclass(frozen=True)
class LiveLog:
    """One log of one job: where it is on the cluster and in the local workspace; a
    ``limit`` caps how much of it is mirrored (None: all of it)."""

    job_id: str
    remote: str
    local: Path
    limit: int | None = None


class LiveLogs:
    """The worker-side mirror of one lane's running jobs' logs (module docstring)."""

    def __init__(self, runner: Runner, deadline: float, tree_of: Callable[[str], Path]) -> None:
        self._runner = runner
        self._deadline = deadline
        self._tree_of = tree_of

    def mirror(self, logs: Sequence[LiveLog]) -> int:
        """Append what the cluster has written beyond each local copy (one SSH call for
        all of ``logs``; ``tree_of`` gives a job's trusted root); the bytes appended.
        Raises :class:`~vq.errors.TransportError` when the login host
        could not be reached; any other failure is logged and mirrors nothing."""
        if not logs:
            return 0
        locals_: list[tuple[int, bytes] | None] = [self._local_end(one) for one in logs]
        wanted = [
            (one, end)
            for one, end in zip(logs, locals_, strict=True)
            if end is not None and (one.limit is None or end[0] < one.limit)
        ]
        if not wanted:
            return 0
        cap = per_file_cap(len(wanted))
        reads = [TailRead(one.remote, read_start(end[0])) for one, end in wanted]
        limit = len(wanted) * (cap + 64) + 4096
        limit_s = f"{max(1.0, self._deadline - 3.0):g}"
        result = self._runner.run(
            ["timeout", "-k", "1", limit_s, *tail_argv(reads, cap)],
            deadline_s=self._deadline,
            max_output_bytes=limit,
        )
        if result.rc != 0:
            log.info("live logs: the read failed (%s)", result.first_line())
            return 0
        chunks = parse_tail(result.stdout, len(reads), cap)
        if chunks is None:
            log.info("live logs: the answer was not readable; trying again next round")
            return 0
        appended = 0
        for (one, (size, end)), chunk in zip(wanted, chunks, strict=True):
            data = new_bytes(size, end, chunk)
            if data is None:
                log.debug("live logs: %s is not a prefix of %s", one.local, one.remote)
                continue
            data = within_limit(size, data, one.limit)
            if data:
                appended += self._append(one, size, data)
        return appended

    def _local_end(self, one: LiveLog) -> tuple[int, bytes] | None:
        """The local copy's size and its last overlap bytes (0 and b"" when missing);
        None when it cannot be mirrored (not a regular file, unreadable)."""
        try:
            fd = open_beneath(self._tree_of(one.job_id), one.local, os.O_RDONLY)
        except FileNotFoundError:
            return 0, b""
        except OSError as exc:
            log.debug("live logs: %s cannot be mirrored: %s", one.local, exc)
            return None
        try:
            size = os.fstat(fd).st_size
            start = read_start(size)
            return size, os.pread(fd, size - start, start)
        except OSError:
            return None
        finally:
            os.close(fd)

    def _append(self, one: LiveLog, size: int, data: bytes) -> int:
        """Append ``data`` when the local copy still has ``size`` bytes (nothing else
        wrote meanwhile); the bytes written."""
        try:
            fd = open_beneath(
                self._tree_of(one.job_id), one.local, os.O_WRONLY | os.O_APPEND | os.O_CREAT
            )
        except (OSError, VqError) as exc:
            log.debug("live logs: cannot append to %s: %s", one.local, exc)
            return 0
        try:
            if os.fstat(fd).st_size != size:
                return 0
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            return len(data)
        except OSError as exc:
            log.warning("live logs: appending to %s failed: %s", one.local, exc)
            return 0
        finally:
            os.close(fd)
