"""The daemon's in-memory index of specs: a cache of the disk, never a second truth.

Invariants:

* Every entry was read from, or just written to, the spec file; its file signature
  ``(inode, size, mtime_ns)`` is kept so :meth:`JobIndex.revalidate` can re-read exactly
  the files another writer replaced.
* Decisions that change state (claiming a job, recording an outcome) always re-read the
  spec under its lock; the index only picks candidates and serves fast listings.
* A terminal job is held as its :class:`~vq.domain.summary.JobSummary` (what listings
  read), not its whole spec: :meth:`JobIndex.get` parses the spec file on demand. Those
  summaries, with their file signatures, are what :meth:`JobIndex.save_summaries` writes
  for the next start (:mod:`vq.store.summaries`), which then takes every one whose file
  is unchanged instead of parsing it.
* Unreadable files are held in ``quarantined`` (reported, skipped by dispatch).
* Thread-safe: the RPC threads and the main loop share one index under one lock.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.domain.summary import JobSummary, Listed
from vq.errors import VqError
from vq.store.specs import Quarantined, Signature, SpecStore
from vq.store.summaries import save_summaries

__all__ = ["Entry", "JobIndex", "QueueListing"]

#: What the index holds of a job: the whole spec until it ends, its summary after.
Entry = JobSpec | JobSummary

#: How long after a directory change a listing of it is trusted while its mtime stays
#: the same (well above any file system's timestamp granularity).
SETTLE_NS = 1_000_000_000

#: How many pending-set entries :meth:`JobIndex.pending_since` can replay; a reader that
#: fell further behind (an array submit of more, a load) rebuilds from the pending set.
PENDING_LOG_LIMIT = 4096


@dataclass(frozen=True)
class QueueListing:
    """One listing of the queue: ``ids``, with ``stamp`` (:meth:`SpecStore.queue_stamp`)
    read at ``checked_at_ns`` (``time.time_ns()``), both taken before the listing."""

    ids: list[str]
    stamp: int | None
    checked_at_ns: int

    def still_exact(self, stamp: int | None) -> bool:
        """Whether the listing, and every signature taken after it, still holds when
        the queue's stamp is now ``stamp``: unchanged, and taken well after the last
        change (:data:`SETTLE_NS`), so no spec was created, replaced or removed since
        (every spec write is a rename into the queue directory, which stamps it)."""
        return stamp is not None and stamp == self.stamp and stamp < self.checked_at_ns - SETTLE_NS


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
        #: Jobs that have not ended, whole; ended ones as summaries (``_finished``).
        self._specs: dict[str, JobSpec] = {}
        self._finished: dict[str, JobSummary] = {}
        self._signatures: dict[str, Signature | None] = {}
        self._pending: set[str] = set()
        #: Ids by state (a state-filtered listing and the counts never walk every spec).
        self._by_state: dict[JobState, set[str]] = {}
        #: Bumped whenever a job *enters* the pending set, or a pending job's entry is
        #: replaced (so cached orderings go stale); each such bump but a load's logs the id
        #: (:meth:`pending_since`).
        self.pending_generation = 0
        #: The ids behind the bumps since ``_pending_log_base`` (bounded, oldest dropped).
        self._pending_log: list[str] = []
        self._pending_log_base = 0
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
    def load(
        self,
        known: Mapping[str, tuple[Signature, Entry]] | None = None,
        listing: QueueListing | None = None,
    ) -> None:
        """Index every spec in the queue, replacing what was held.

        ``known``: entries read moments ago (the recovery pass) or kept from the last run
        (the terminal index), each with the file signature it was taken from; one whose
        file still has that signature is taken as it is, every other spec is parsed.

        ``listing``: the queue as the recovery pass listed it (its signatures are those
        of ``known``). While :meth:`QueueListing.still_exact` holds, nothing in the queue
        was renamed since, so neither the listing nor those signatures are taken again
        (a restart then stats each spec once, not twice); otherwise the queue is listed
        and every spec stat'ed here.
        """
        stamp = self._store.queue_stamp()
        exact = listing is not None and listing.still_exact(stamp)
        if listing is not None and exact:
            ids = listing.ids
            now: dict[str, Signature | None] = {
                job_id: held[0] if (held := (known or {}).get(job_id)) is not None else None
                for job_id in ids
            }
        else:
            ids = self._store.list_ids()
            now = _signatures(self._store, ids)
        taken: dict[str, Entry] = {}
        stale: list[str] = []
        for job_id in ids:
            held = known.get(job_id) if known is not None else None
            if held is not None and now[job_id] is not None and held[0] == now[job_id]:
                taken[job_id] = held[1]
            else:
                stale.append(job_id)
        scan = self._store.scan(stale)
        with self._lock:
            self.generation += 1
            self._specs.clear()
            self._finished.clear()
            self._signatures.clear()
            self._pending.clear()
            self._by_state.clear()
            taken.update(scan.specs)
            self._fill(taken)
            self._signatures.update((job_id, now[job_id]) for job_id in taken)
            # One directory fd for all the signatures, no path objects.
            self._signatures.update(_signatures(self._store, list(scan.specs)))
            self.quarantined = dict(scan.quarantined)
            if listing is not None and exact:
                # Every held signature is the file's now: the first listing and the
                # first revalidation may rely on the stamp instead of the files.
                self._listed_mtime = self._validated_mtime = stamp
                self._listed_settled = self._validated_settled = True
            self.changed.notify_all()

    def _fill(self, entries: Mapping[str, Entry]) -> None:
        """:meth:`_put` of every entry into an empty index, in bulk (a start's load)."""
        for job_id, entry in entries.items():
            if isinstance(entry, JobSummary):
                self._finished[job_id] = entry
            elif entry.is_terminal:
                self._finished[job_id] = JobSummary.of(entry)
            else:
                self._specs[job_id] = entry
                if entry.state is JobState.PENDING:
                    self._pending.add(job_id)
            self._by_state.setdefault(entry.state, set()).add(job_id)
        self._state_changes.update(entries)
        self.state_generation += 1
        self.pending_generation += 1
        self._pending_log.clear()  # everything changed: a reader rebuilds
        self._pending_log_base = self.pending_generation

    def save_summaries(self) -> int:
        """Write the terminal index for the next start (atomic, not durable); how many
        summaries it holds. OSError (a full disk): nothing depends on the file."""
        with self._lock:
            entries = [
                (signature, summary)
                for job_id, summary in self._finished.items()
                if (signature := self._signatures.get(job_id)) is not None
            ]
        return save_summaries(self._store.paths.terminal_index, entries)

    def _entry(self, job_id: str) -> Entry | None:
        spec = self._specs.get(job_id)
        return spec if spec is not None else self._finished.get(job_id)

    def _put(self, entry: Entry, *, stat: bool = True) -> None:
        """Index ``entry``; ``stat=False``: the caller records its file signature."""
        job_id = entry.id
        previous = self._entry(job_id)
        if previous is None or previous.state is not entry.state:
            self.state_generation += 1
            self._state_changes.add(job_id)
        held: Entry = entry
        if entry.is_terminal and isinstance(entry, JobSpec):
            held = JobSummary.of(entry)
        replaced = previous is None or previous is entry or previous != held
        if replaced:
            self.generation += 1
        if previous is not None:
            self._by_state.get(previous.state, set()).discard(job_id)
        self._by_state.setdefault(entry.state, set()).add(job_id)
        if isinstance(held, JobSummary):
            self._specs.pop(job_id, None)
            self._finished[job_id] = held
        else:
            self._finished.pop(job_id, None)
            self._specs[job_id] = held
        if stat:
            self._signatures[job_id] = _signature(self._store, job_id)
        if entry.state is JobState.PENDING:
            if replaced or job_id not in self._pending:
                self._log_pending(job_id)
            self._pending.add(job_id)
        else:
            self._pending.discard(job_id)
        self.quarantined.pop(job_id, None)

    def _log_pending(self, job_id: str) -> None:
        """Bump :attr:`pending_generation` for ``job_id`` (entered the pending set, or its
        pending entry was replaced) and log it for :meth:`pending_since`."""
        self.pending_generation += 1
        log = self._pending_log
        log.append(job_id)
        if len(log) > PENDING_LOG_LIMIT:
            dropped = len(log) - PENDING_LOG_LIMIT // 2
            del log[:dropped]
            self._pending_log_base += dropped

    def pending_since(self, generation: int) -> list[str] | None:
        """The ids that entered the pending set, or whose pending entry was replaced, since
        :attr:`pending_generation` was ``generation``, oldest first (an id may repeat, and
        may have left the set again since); so the generation is now ``generation`` plus
        their count. None when the log no longer reaches back that far (a load, or more
        than :data:`PENDING_LOG_LIMIT` since): the reader rebuilds from :meth:`pending`."""
        with self._lock:
            start = generation - self._pending_log_base
            if start < 0 or generation > self.pending_generation:
                return None
            return self._pending_log[start:]

    def _forget(self, job_id: str) -> None:
        """Drop ``job_id`` from the entries, the pending set and the by-state sets."""
        previous = self._specs.pop(job_id, None) or self._finished.pop(job_id, None)
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
        """The whole spec of an indexed job: held for a job that has not ended, read from
        its file for one that has (None if that file is gone or unreadable now)."""
        with self._lock:
            spec = self._specs.get(job_id)
            if spec is not None or job_id not in self._finished:
                return spec
        try:
            return self._store.read(job_id)
        except VqError:
            return None

    def entry(self, job_id: str) -> Listed | None:
        """What the index holds of ``job_id`` (a summary for a job that has ended)."""
        with self._lock:
            return self._entry(job_id)

    def wait_for_change(self, job_id: str, state: JobState, timeout: float) -> JobSpec | None:
        """Block until ``job_id``'s indexed state is not ``state`` (or it left the index),
        at most ``timeout`` seconds; the indexed spec then. Waiting releases the lock."""
        with self.changed:
            self.changed.wait_for(
                lambda: (held := self._entry(job_id)) is None or held.state is not state,
                max(timeout, 0.0),
            )
            held = self._entry(job_id)
        if isinstance(held, JobSummary):
            return self.get(job_id)
        return held

    def all(self) -> list[Listed]:
        """Every indexed job (summaries for those that have ended)."""
        with self._lock:
            return [*self._specs.values(), *self._finished.values()]

    def take_state_changes(self) -> set[str]:
        """Ids whose state changed (or that appeared) since the last call (one consumer)."""
        with self._lock:
            changes, self._state_changes = self._state_changes, set()
        return changes

    def dependency_state(self, job_id: str) -> JobState | str | None:
        """A predecessor's state for the dependency gate (see vq.domain.dependencies)."""
        held = self._entry(job_id)
        if held is not None:
            return held.state
        return "unreadable" if job_id in self.quarantined else None

    def is_pending(self, job_id: str) -> bool:
        return job_id in self._pending

    def finished_count(self) -> int:
        """How many indexed jobs have ended (held as summaries)."""
        return len(self._finished)

    def pending_count(self) -> int:
        return len(self._pending)

    def pending(self) -> list[JobSpec]:
        with self._lock:
            return [self._specs[job_id] for job_id in self._pending]

    def in_states(self, states: Iterable[JobState]) -> list[Listed]:
        """The indexed jobs in any of ``states`` (cost: those jobs, not the index)."""
        with self._lock:
            entries = (self._entry(i) for state in states for i in self._by_state.get(state, ()))
            return [entry for entry in entries if entry is not None]

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
            known = set(self._specs) | set(self._finished) | set(self.quarantined)
            gone = known - on_disk
            new = on_disk - known
            # A collision found (quarantined now) or resolved (released now): read again.
            new |= self._store.suspect_ids() & known
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
