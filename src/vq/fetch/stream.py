"""The owning side of ``vq fetch HOST ID`` (§4.6, §6.1): a snapshot as a tar stream, and
the acknowledgement that stamps ``last_fetched_at`` once the client has published it.

- :func:`stream_snapshot` builds the same snapshot as a local fetch (sidecars included,
  ``last_fetched_at`` not stamped) in a private directory of the state root, writes it
  to ``out`` as one uncompressed tar, and removes it.
- :func:`acknowledge_fetch` re-reads the spec under its lock and stamps
  ``last_fetched_at`` only when its ``submitted_at`` and terminal state are still those
  the client received (from the streamed ``terminal-diagnosis.json``); anything else is
  a :class:`~vq.errors.Conflict` and writes nothing.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from datetime import datetime
from pathlib import Path
from typing import IO, TypedDict

from vq.domain.spec import JobSpec
from vq.errors import Conflict, InvalidInput
from vq.fetch.local import fetch_tree
from vq.fetch.snapshot import SourceKind
from vq.services.context import ServiceContext

__all__ = ["acknowledge_fetch", "stream_snapshot"]


def stream_snapshot(ctx: ServiceContext, job_id: str, kind: SourceKind, out: IO[bytes]) -> None:
    """Write the job's snapshot to ``out`` as a tar (see the module docstring)."""
    scratch_root = ctx.paths.fetch_scratch_dir
    scratch_root.mkdir(mode=0o700, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=f"{job_id}-", dir=scratch_root)
    try:
        result = fetch_tree(ctx, job_id, Path(scratch) / "snap", kind=kind, stamp=False)
        with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            tar.add(result.dest, arcname=".", recursive=True)
        out.flush()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class FetchAck(TypedDict):
    """``vq fetch ID --ack-fetched RECEIPT --json``."""

    id: str
    last_fetched_at: str


def acknowledge_fetch(ctx: ServiceContext, job_id: str, receipt: str) -> FetchAck:
    """Stamp ``last_fetched_at`` for the identity ``receipt`` = ``SUBMITTED_AT|STATE``."""
    submitted_text, _, state = receipt.partition("|")
    try:
        submitted = datetime.fromisoformat(submitted_text)
    except ValueError:
        raise InvalidInput(
            f"bad fetch receipt {receipt!r}", hint="expected SUBMITTED_AT|STATE"
        ) from None
    when = ctx.now()
    check = ctx.owner_check

    def mutate(spec: JobSpec) -> JobSpec | None:
        if check is not None:
            check(spec)
        if spec.submitted_at != submitted or spec.state.value != state or not spec.is_terminal:
            return None
        spec.last_fetched_at = when
        return spec

    if not ctx.store.update(job_id, mutate).changed:
        raise Conflict(
            f"job {job_id} is no longer the one that was fetched ({state} submitted "
            f"{submitted_text}); last_fetched_at was not recorded",
            hint="fetch it again",
        )
    return {"id": job_id, "last_fetched_at": when.isoformat()}
