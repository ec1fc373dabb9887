"""Receive a snapshot tar stream into a hidden staging directory as it arrives.

Contract of :func:`receive_snapshot` (used by ``vq fetch HOST ID`` and the campaign
controller's relay, :mod:`vq.fetch.remote`):

- The stream is read once and never spooled: each entry is checked before it is written
  (:func:`vq._tar.tar_member` and :class:`vq.domain.archive_rules.MemberLedger`: no
  absolute names, no ``..``, no links leaving the tree, no devices or FIFOs, nothing
  under a non-directory, hardlinks only to earlier files), with the top-level ``_vq`` of a
  snapshot (its sidecars) checked as an ordinary name. Writing goes through tarfile's
  ``data`` filter as a second guard, into ``into`` only, a hidden directory the caller
  created and publishes or removes.
- A hostile entry stops the transfer at once (the remote command is killed) and raises
  :class:`~vq.errors.UnsafeArchive` naming it.
- The stream counts only when the whole tar was read *and* the remote command reported
  its end with status 0: a stream cut mid-entry, cut between entries (the SSH framing
  then misses its trailer) or ended with a non-zero status raises, so the caller never
  publishes a partial tree. A cut transport is reported as the transport failure, an
  invalid tar from a command that ended cleanly as UnsafeArchive.
- A stream silent for :data:`STREAM_IDLE_S` once its tar began (no byte, e.g. a link
  cut mid-stream that the SSH keepalive has not noticed) is killed and raised as the
  transport failure (:class:`~vq.errors.SshUnreachable`), so the caller retries instead
  of hanging.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from vq import _fault_points
from vq._tar import extract_checked, tar_member
from vq.domain.archive_rules import META_DIR, Member, MemberLedger
from vq.errors import TransportError, UnsafeArchive
from vq.remote.host import RemoteHost, remote_error
from vq.transport.runner import RunResult, Stream

__all__ = ["extract_stream", "receive_snapshot"]

#: The whole transfer's deadline (a large workspace over a slow link).
STREAM_DEADLINE_S = 24 * 3600.0
#: No byte for this long once the tar began and the stream counts as lost (a transport
#: failure, retried by the caller): a link cut mid-stream must not leave a mux client
#: waiting on a stuck master for minutes. The host copies its snapshot before the first
#: byte (bounded by the whole deadline only) and then emits as it reads.
STREAM_IDLE_S = 45.0
_SNAPSHOT_META = "vq-meta"
#: Read and copy size, the transport's own: tarfile's stream default (10 KiB) makes about
#: three times as many passes through the transport; much larger makes tarfile's buffer
#: slicing the cost.
_CHUNK = 64 * 1024


class _Reader:
    """The minimal file object tarfile's stream mode reads from."""

    def __init__(self, stream: Stream) -> None:
        self._stream = stream

    def read(self, size: int = 65536) -> bytes:
        return self._stream.read(max(size, 1))


def _checked(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """Each entry of ``tar`` as it arrives, after the archive rules accepted it."""
    ledger, began = MemberLedger(), False
    for info in tar:
        if info.name in (".", "./"):
            continue
        info.name = info.name.removeprefix("./")
        member = tar_member(info)
        head, sep, tail = member.name.partition("/")
        if head == META_DIR:  # reserved in a source; in a snapshot it holds the sidecars
            member = Member(f"{_SNAPSHOT_META}{sep}{tail}", member.kind, member.link_target)
        ledger.add(member)
        if not began:  # bytes are flowing: a test may cut the link mid-stream here
            began = True
            _fault_points.hold_point("snapshot_stream_began")
        yield info


def extract_stream(stream: Stream, into: Path) -> None:
    """Extract the tar read from ``stream`` into ``into``, each entry checked first.

    Raises UnsafeArchive for a refused entry or a malformed tar; does not wait for the
    stream's end status (:func:`receive_snapshot` does)."""
    try:
        with tarfile.open(  # type: ignore[call-overload]
            fileobj=_Reader(stream), mode="r|", bufsize=_CHUNK, copybufsize=_CHUNK
        ) as tar:
            extract_checked(tar, into, _checked(tar))
    except (tarfile.TarError, EOFError) as exc:
        raise UnsafeArchive(f"the snapshot stream is not a valid tar: {exc}") from exc


def _ended(stream: Stream) -> bool:
    """Whether the command sent nothing more (reading one chunk to find out)."""
    return stream.read() == b""


def receive_snapshot(host: RemoteHost, words: Sequence[str], into: Path) -> None:
    """Run ``vq WORDS…`` on ``host`` and extract its tar stream into ``into`` (see the
    module docstring); returns only once the whole stream was read and verified."""
    stream = host.stream(list(words), deadline_s=STREAM_DEADLINE_S, idle_s=STREAM_IDLE_S)
    try:
        try:
            extract_stream(stream, into)
        except UnsafeArchive:
            # a tar that stops mid-entry is usually a cut transport: report that instead
            if _ended(stream):
                _check_end(host, stream.wait())
            raise
        _check_end(host, stream.wait())
    except TransportError as exc:
        raise host.failed(exc) from exc
    finally:
        stream.close()


def _check_end(host: RemoteHost, result: RunResult) -> None:
    if result.rc != 0:
        raise remote_error(host.name, result)
