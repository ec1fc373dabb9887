"""The JobSpec store: one JSON file per job under ``<state-root>/queue/``.

Contracts:

* Disk is the authority. Every write is :func:`vq._fs.atomic_write_bytes` (durable).
* :meth:`SpecStore.update` is the only read → mutate → write path and holds the spec's
  flock across it. The lock never nests and the mutate callback must do no slow I/O.
* A file that cannot be parsed is reported (``CorruptSpec`` / ``UnsupportedSpecVersion``),
  never rewritten and never deleted. :meth:`SpecStore.scan` returns such files separately
  as *quarantined* so dispatch skips them while everything else goes on.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from vq._fs import atomic_write_bytes, fsync_dir, read_regular, spec_lock
from vq.domain.ids import is_job_id
from vq.domain.spec import JobSpec, load_spec
from vq.domain.states import JobState
from vq.errors import Conflict, CorruptSpec, InvalidInput, NotFound, storage_error
from vq.paths import SPEC_SUFFIX, StatePaths
from vq.protocol.answers import QuarantinedItem

__all__ = ["Quarantined", "ScanResult", "Signature", "SpecStore", "Updated", "encode_spec"]

#: A spec file's (inode, size, mtime in ns).
Signature = tuple[int, int, int]

#: Spec files larger than this are refused as corrupt rather than read into memory.
MAX_SPEC_BYTES = 4 * 1024 * 1024


def encode_spec(spec: JobSpec) -> bytes:
    """The exact bytes written for ``spec`` (indented JSON, trailing newline)."""
    return spec.model_dump_json(indent=1).encode() + b"\n"


@dataclass(frozen=True)
class Quarantined:
    """A spec file that could not be read, and why. Reported, never touched."""

    name: str
    path: str
    reason: str
    reference: str

    def as_dict(self) -> QuarantinedItem:
        return {
            "name": self.name,
            "path": self.path,
            "reason": self.reason,
            "reference": self.reference,
        }


@dataclass(frozen=True)
class Updated:
    """What :meth:`SpecStore.update` did: the spec now on disk, whether it was written,
    and the state the spec was in when it was read under the lock."""

    spec: JobSpec
    changed: bool
    before: JobState


@dataclass
class ScanResult:
    specs: dict[str, JobSpec] = field(default_factory=dict)
    quarantined: dict[str, Quarantined] = field(default_factory=dict)


class SpecStore:
    """Read, create and update JobSpecs of one state root."""

    def __init__(self, paths: StatePaths) -> None:
        self.paths = paths
        self._queue = str(paths.queue_dir)

    # --- naming ------------------------------------------------------------------------
    def path(self, job_id: str) -> Path:
        if not is_job_id(job_id):
            raise InvalidInput(
                f"{job_id!r} is not a job id",
                hint="job ids are 12 lowercase hex characters, as `vq list` shows them",
            )
        return self.paths.spec(job_id)

    def exists(self, job_id: str) -> bool:
        return self.path(job_id).exists()

    def list_ids(self) -> list[str]:
        """Ids of every ``<id>.json`` in the queue (names only: cheap)."""
        try:
            entries = os.listdir(self.paths.queue_dir)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [
            name[: -len(SPEC_SUFFIX)]
            for name in entries
            if name.endswith(SPEC_SUFFIX) and is_job_id(name[: -len(SPEC_SUFFIX)])
        ]

    def _read_for_update(self, job_id: str) -> JobSpec:
        """The read inside :meth:`update` (a store with stricter discovery may relax it
        for jobs it has already admitted)."""
        return self.read(job_id)

    def admits_summary(self, job_id: str, submitter: str | None, depends_on: list[str]) -> bool:
        """Whether a cached summary of ``job_id`` (its recorded ``submitter`` and
        ``depends_on``) may stand for its spec file without reading it: always in a single
        queue; a multi-user store checks them against the tree the file was found in."""
        return True

    def suspect_ids(self) -> set[str]:
        """Ids whose specs must be read again even though their files did not change
        (a multi-user collision found or resolved since); none in a single queue."""
        return set()

    def impostor_copies(self) -> list[Quarantined]:
        """Spec files quarantined beside a job of the same id that goes on (multi-user:
        another owner's copy of a recorded job); none in a single queue."""
        return []

    def queue_stamp(self) -> int | None:
        """The queue directory's mtime (every spec write renames into it), None if absent."""
        try:
            return os.stat(self.paths.queue_dir).st_mtime_ns
        except OSError:
            return None

    def signatures(self, ids: list[str]) -> dict[str, Signature | None]:
        """:meth:`signature` of many specs at once: one directory fd, no path objects."""
        try:
            fd = os.open(self.paths.queue_dir, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return dict.fromkeys(ids)
        out: dict[str, Signature | None] = {}
        try:
            for job_id in ids:
                try:
                    st = os.stat(job_id + SPEC_SUFFIX, dir_fd=fd)
                except OSError:
                    out[job_id] = None
                    continue
                out[job_id] = (st.st_ino, st.st_size, st.st_mtime_ns)
        finally:
            os.close(fd)
        return out

    # --- reads -------------------------------------------------------------------------
    def read(self, job_id: str) -> JobSpec:
        """The current spec, or NotFound / CorruptSpec / UnsupportedSpecVersion."""
        return self._read_at(self.path(job_id), job_id)

    def read_copy(self, job_id: str, uid: int) -> JobSpec:
        """Multi-user mode: the copy of ``job_id`` in owner ``uid``'s tree (``--uid``)."""
        raise InvalidInput(
            "--uid selects an owner's tree, which only multi-user mode has",
            hint="leave out --uid",
        )

    @contextlib.contextmanager
    def reader(self) -> Iterator[Callable[[str], JobSpec]]:
        """:meth:`read` for a run of many specs (a start's pass over the queue): the queue
        directory is opened once and each spec relative to it, without a path object per
        spec; the same checks, the same refusals. A store that places or checks its specs
        otherwise (multi-user mode) overrides this to read each one through its own
        :meth:`read`."""
        fd = None
        with contextlib.suppress(OSError):
            fd = os.open(self._queue, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        if fd is None:
            yield self.read
            return

        def read(job_id: str) -> JobSpec:
            if not is_job_id(job_id):
                return self.read(job_id)  # refused as read refuses it
            return self._read_at(job_id + SPEC_SUFFIX, job_id, dir_fd=fd)

        try:
            yield read
        finally:
            os.close(fd)

    def _read_at(self, path: str | Path, job_id: str, *, dir_fd: int | None = None) -> JobSpec:
        """The spec in ``path`` (a name in the queue directory open as ``dir_fd``, when
        given)."""
        shown = path if dir_fd is None else f"{self._queue}/{path}"
        try:
            # Non-blocking, no symlink, regular files only: a FIFO or a link planted in the
            # queue is quarantined, never waited on or followed.
            data = read_regular(path, MAX_SPEC_BYTES, dir_fd=dir_fd)
        except FileNotFoundError:
            raise NotFound(
                f"no job {job_id} in {self.paths.root}",
                hint="`vq list` shows the jobs of this queue (VQ_STATE_DIR selects the queue)",
            ) from None
        except OSError as exc:
            raise CorruptSpec(
                f"spec {shown} cannot be read: {exc.strerror}",
                hint="the entry is kept as it is; inspect it",
            ) from exc
        spec = load_spec(data, source=f"spec {shown}")
        if spec.id != job_id:
            raise CorruptSpec(
                f"spec {shown} holds job id {spec.id!r}, not {job_id!r}",
                hint="the file is kept as it is; inspect it",
            )
        return spec

    def signature(self, job_id: str) -> Signature | None:
        """(inode, size, mtime) of the spec file, None if it cannot be stat'ed. Every write
        is a rename of a fresh file, so an equal signature means the same bytes."""
        if not is_job_id(job_id):
            return None
        try:
            st = os.stat(f"{self._queue}/{job_id}{SPEC_SUFFIX}")  # a hot path: no Path
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def scan(
        self,
        ids: list[str] | None = None,
        *,
        known: Mapping[str, tuple[Signature, JobSpec]] | None = None,
    ) -> ScanResult:
        """Read every spec (or just ``ids``); unreadable ones land in ``quarantined``.

        ``known``: specs this process read moments ago, with the file signature taken
        before that read; one whose file still has that signature is taken as it is
        instead of being parsed again (a stat instead of a read and a validation).
        """
        result = ScanResult()
        with self.reader() as read:
            for job_id in self.list_ids() if ids is None else ids:
                self._scan_one(job_id, read, known, result)
        return result

    def _scan_one(
        self,
        job_id: str,
        read: Callable[[str], JobSpec],
        known: Mapping[str, tuple[Signature, JobSpec]] | None,
        result: ScanResult,
    ) -> None:
        if known is not None and job_id in known:
            signature, spec = known[job_id]
            if self.signature(job_id) == signature:
                result.specs[job_id] = spec
                return
        try:
            result.specs[job_id] = read(job_id)
        except NotFound:
            return  # deleted between listing and reading
        except CorruptSpec as exc:
            result.quarantined[job_id] = Quarantined(
                job_id, str(self.paths.spec(job_id)), exc.message, exc.reference
            )

    # --- writes ------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, job_id: str) -> Iterator[None]:
        """Hold the job's spec lock (see :func:`vq._fs.spec_lock`)."""
        with spec_lock(self.path(job_id)):
            yield

    def create(self, spec: JobSpec, *, sync_dir: bool = True) -> None:
        """Write a brand-new spec; refuses to replace an existing one.

        ``sync_dir=False`` is for batches: the caller calls :meth:`sync` once afterwards.
        """
        try:
            with self.locked(spec.id):
                if self.path(spec.id).exists():
                    raise Conflict(f"job {spec.id} already exists")
                self._write(spec, durable=True, sync_dir=sync_dir)
        except OSError as exc:  # the lock file itself could not be created
            error = storage_error(exc, self.paths.root)
            if error is None:
                raise
            raise error from exc

    def _write(self, spec: JobSpec, *, durable: bool, sync_dir: bool = True) -> None:
        """The one spec write: a full disk, a quota or EIO is a StorageError naming the
        state root (the old file is untouched), never a bare OSError."""
        owner, group = self._file_owner(spec.id) or (None, None)
        try:
            atomic_write_bytes(
                self.path(spec.id),
                encode_spec(spec),
                durable=durable,
                sync_dir=sync_dir,
                owner=owner,
                group=group,
            )
        except OSError as exc:
            error = storage_error(exc, self.paths.root)
            if error is None:
                raise
            raise error from exc

    def _file_owner(self, job_id: str) -> tuple[int, int | None] | None:
        """The uid and gid a spec file is written as (None: this process's own)."""
        return None

    def sync(self) -> None:
        """Make every rename in the queue directory durable (after a batch of creates)."""
        fsync_dir(self.paths.queue_dir)

    def write_locked(self, spec: JobSpec, *, durable: bool = True, sync_dir: bool = True) -> None:
        """Replace a spec. The caller must hold :meth:`locked` for ``spec.id``.

        ``durable=False`` keeps the write atomic but skips the fsyncs; only for facts that
        recovery can re-derive after a power loss (see :meth:`update`). ``sync_dir=False``
        (a group commit) fsyncs the file but leaves the directory fsync to the caller,
        which must call :meth:`sync` before it treats the write as durable.
        """
        self._write(spec, durable=durable, sync_dir=sync_dir)

    def update(
        self,
        job_id: str,
        mutate: Callable[[JobSpec], JobSpec | None],
        *,
        durable: bool = True,
        sync_dir: bool = True,
    ) -> Updated:
        """Read → ``mutate`` → write under the spec lock; reports what happened.

        ``mutate`` gets a freshly read spec (its own object) and returns the new spec, or
        None for "no change" (nothing is written; ``changed`` is False and ``spec`` is the
        one on disk). Exceptions from ``mutate`` abort without writing. ``durable=False``
        is for facts recovery can re-derive (a launched job's pid, found again through
        its ``VQ_JOB_ID`` environment). ``sync_dir=False``: see :meth:`write_locked`.

        An unknown id raises NotFound before any lock file is created (a probe for a
        made-up id leaves nothing behind, even in a queue directory not made yet).
        """
        if not self.path(job_id).exists():
            self.read(job_id)  # raises the one NotFound message (or reports a dangling link)
        with self.locked(job_id):
            current = self._read_for_update(job_id)
            before = current.state
            updated = mutate(current)
            if updated is None:
                # mutate may have touched its object before refusing: re-read
                return Updated(self.read(job_id), changed=False, before=before)
            if updated.id != job_id:
                raise ValueError(f"an update of {job_id} tried to write job {updated.id}")
            self.write_locked(updated, durable=durable, sync_dir=sync_dir)
            return Updated(updated, changed=True, before=before)
