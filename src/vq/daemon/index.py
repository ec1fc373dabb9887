"""The daemon's in-memory index of specs: a cache of the disk, never a second truth.

Invariants:

* Every entry was read from, or just written to, the spec file; its file signature
  ``(inode, size, mtime_ns)`` is kept so :meth:`JobIndex.revalidate` can re-read exactly
  the files another writer replaced.
* Decisions that change state (claiming a job, recording an outcome) always re-read the
  spec under its lock; the index only picks candidates and serves fast listings.
* Unreadable files are held in ``quarantined`` (reported, skipped by dispatch).
* Thread-safe: the RPC threads and the main loop share one index under one lock.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterable

from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.store.specs import Quarantined, ScanResult, SpecStore

__all__ = ["JobIndex"]

Signature = tuple[int, int, int]

#: How long after a directory change a listing of it is trusted while its mtime stays
#: the same (well above any file system's timestamp granularity).
SETTLE_NS = 1_000_000_000


def _signature(store: SpecStore, job_id: str) -> Signature | None:
    try:
        st = os.stat(store.paths.spec(job_id))
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _signatures(store: SpecStore, ids: list[str]) -> dict[str, Signature | None]:
    return store.signatures(ids)


class JobIndex:
    """Specs by id, the pending subset, and the quarantine."""

    def __init__(self, store: SpecStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._specs: dict[str, JobSpec] = {}
        self._signatures: dict[str, Signature | None] = {}
        self._pending: set[str] = set()
        #: Ids by state (a state-filtered listing and the counts never walk every spec).
        self._by_state: dict[JobState, set[str]] = {}
        #: Bumped whenever a job *enters* the pending set (so cached orderings go stale).
        self.pending_generation = 0
        #: Bumped whenever any job's state changes (dependency gates re-evaluate then).
        self.state_generation = 0
        #: Bumped whenever any indexed spec changes at all, or one leaves the index (so
        #: values derived from every spec, such as the queue ETA's basis, go stale; an
        #: upsert of the very object already held counts as a change: it may be mutated).
        self.generation = 0
        self._state_changes: set[str] = set()
        self.quarantined: dict[str, Quarantined] = {}
        self._listed_mtime: int | None = None
        self._listed_settled = False
        self._revalidated_at = -math.inf
        self._validated_mtime: int | None = None  # queue dir mtime at the last full check
        self._validated_settled = False
        #: Notified on every change; long-polls wait on it.
        self.changed = threading.Condition(self._lock)

    # --- loading -----------------------------------------------------------------------
    def load(self, scan: ScanResult) -> None:
        with self._lock:
            self.generation += 1
            self._specs.clear()
            self._signatures.clear()
            self._pending.clear()
            self._by_state.clear()
            for spec in scan.specs.values():
                self._put(spec, stat=False)
            # One directory fd for all the signatures, no path objects.
            self._signatures.update(_signatures(self._store, list(scan.specs)))
            self.quarantined = dict(scan.quarantined)
            self.changed.notify_all()

    def _put(self, spec: JobSpec, *, stat: bool = True) -> None:
        """Index ``spec``; ``stat=False``: the caller records its file signature."""
        previous = self._specs.get(spec.id)
        if previous is None or previous.state is not spec.state:
            self.state_generation += 1
            self._state_changes.add(spec.id)
        if previous is None or previous is spec or previous != spec:
            self.generation += 1
        if previous is not None:
            self._by_state.get(previous.state, set()).discard(spec.id)
        self._by_state.setdefault(spec.state, set()).add(spec.id)
        self._specs[spec.id] = spec
        if stat:
            self._signatures[spec.id] = _signature(self._store, spec.id)
        if spec.state is JobState.PENDING:
            if spec.id not in self._pending:
                self.pending_generation += 1
            self._pending.add(spec.id)
        else:
            self._pending.discard(spec.id)
        self.quarantined.pop(spec.id, None)

    def _forget(self, job_id: str) -> None:
        """Drop ``job_id`` from the specs, the pending set and the by-state sets."""
        previous = self._specs.pop(job_id, None)
        self._pending.discard(job_id)
        if previous is not None:
            self._by_state.get(previous.state, set()).discard(job_id)

    def upsert(self, spec: JobSpec) -> None:
        """Record a spec this process just read or wrote."""
        with self._lock:
            self._put(spec)
            self.changed.notify_all()

    def quarantine(self, item: Quarantined) -> None:
        with self._lock:
            self.generation += 1
            self._forget(item.name)
            self.quarantined[item.name] = item
            self.changed.notify_all()

    # --- reads -------------------------------------------------------------------------
    def get(self, job_id: str) -> JobSpec | None:
        with self._lock:
            return self._specs.get(job_id)

    def wait_for_change(self, job_id: str, state: JobState, timeout: float) -> JobSpec | None:
        """Block until ``job_id``'s indexed state is not ``state`` (or it left the index),
        at most ``timeout`` seconds; the indexed spec then. Waiting releases the lock."""
        with self.changed:
            self.changed.wait_for(
                lambda: (spec := self._specs.get(job_id)) is None or spec.state is not state,
                max(timeout, 0.0),
            )
            return self._specs.get(job_id)

    def all(self) -> list[JobSpec]:
        with self._lock:
            return list(self._specs.values())

    def take_state_changes(self) -> set[str]:
        """Ids whose state changed (or that appeared) since the last call (one consumer)."""
        with self._lock:
            changes, self._state_changes = self._state_changes, set()
        return changes

    def dependency_state(self, job_id: str) -> JobState | str | None:
        """A predecessor's state for the dependency gate (see vq.domain.dependencies)."""
        spec = self._specs.get(job_id)
        if spec is not None:
            return spec.state
        return "unreadable" if job_id in self.quarantined else None

    def is_pending(self, job_id: str) -> bool:
        return job_id in self._pending

    def pending_count(self) -> int:
        return len(self._pending)

    def pending(self) -> list[JobSpec]:
        with self._lock:
            return [self._specs[job_id] for job_id in self._pending]

    def in_states(self, states: Iterable[JobState]) -> list[JobSpec]:
        """The indexed specs in any of ``states`` (cost: those specs, not the index)."""
        with self._lock:
            return [self._specs[i] for state in states for i in self._by_state.get(state, ())]

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {state.value: len(ids) for state, ids in self._by_state.items() if ids}

    # --- keeping up with other writers ---------------------------------------------------
    def refresh_names(self, *, if_changed: bool = False) -> int:
        """Load specs that appeared on disk and drop deleted ones (names only: cheap).

        Skips the listing when the queue directory's mtime is unchanged since a listing
        taken more than :data:`SETTLE_NS` after that mtime (exact). ``if_changed``: skip
        whenever the mtime is unchanged (an idle daemon then costs nothing per rescan).
        """
        checked_at = time.time_ns()
        mtime = self._store.queue_stamp()
        unchanged = mtime is not None and mtime == self._listed_mtime
        if unchanged and (if_changed or self._listed_settled):
            return 0
        self._listed_mtime = mtime
        # A listing taken well after the directory last changed stays exact while the
        # mtime stays the same: any later entry change stamps a later mtime. (One taken
        # within the timestamp granularity of a change may not: that one lists again.)
        self._listed_settled = mtime is not None and mtime < checked_at - SETTLE_NS
        on_disk = set(self._store.list_ids())
        with self._lock:
            known = set(self._specs) | set(self.quarantined)
            gone = known - on_disk
            new = on_disk - known
            new |= self._store.suspect_ids() & set(self._specs)  # to be quarantined now
        for job_id in gone:
            with self._lock:
                self.generation += 1
                self._forget(job_id)
                self.quarantined.pop(job_id, None)
        self._reload(sorted(new))
        return len(new) + len(gone)

    def revalidate(self, max_age: float | None = None) -> int:
        """Re-read every spec whose file signature changed; returns how many.

        Costs one directory stat when the queue directory's mtime is unchanged since a
        full check taken well after it (:data:`SETTLE_NS`), since every spec write is a
        rename into that directory; otherwise one stat per spec.

        ``max_age``: skip it when one started at most that many seconds ago (a caller
        that accepts other writers' changes that late; the daemon's own are never late).
        """
        started = time.monotonic()
        if max_age is not None and started - self._revalidated_at <= max_age:
            return 0
        checked_at = time.time_ns()
        mtime = self._queue_mtime()
        if mtime is not None and mtime == self._validated_mtime and self._validated_settled:
            # Every spec write renames into the queue directory, which stamps its mtime:
            # unchanged since a settled full check means no spec was replaced since.
            self._revalidated_at = max(self._revalidated_at, started)
            return 0
        self.refresh_names()
        with self._lock:
            candidates = list(self._signatures.items())
        now = _signatures(self._store, [job_id for job_id, _ in candidates])
        stale = [job_id for job_id, sig in candidates if now[job_id] != sig]
        self._reload(stale)
        self._revalidated_at = max(self._revalidated_at, started)
        self._validated_mtime = mtime
        self._validated_settled = mtime is not None and mtime < checked_at - SETTLE_NS
        return len(stale)

    def _queue_mtime(self) -> int | None:
        return self._store.queue_stamp()

    def _reload(self, ids: list[str]) -> None:
        if not ids:
            return
        scan = self._store.scan(ids)
        with self._lock:
            for spec in scan.specs.values():
                self._put(spec, stat=False)
            # One directory fd for all the signatures, no path objects.
            self._signatures.update(_signatures(self._store, list(scan.specs)))
            for item in scan.quarantined.values():
                self.generation += 1
                self._forget(item.name)
                self.quarantined[item.name] = item
            self.changed.notify_all()
