"""The spec store of a multi-user root: every owner's ``users/<uid>/queue`` as one store.

The root daemon reads specs users can edit, so this store treats each one as untrusted
input (§2.4, §7.1; the rules are :mod:`vq.domain.owned_specs`):

* discovery lists every ``users/<uid>/queue`` (canonical numeric names only) and records
  each id's owner in the layout's :class:`~vq.paths.OwnerMap`. The recorded owner keeps
  the job while its own copy exists: a copy of the id in another tree is an impostor,
  quarantined alone (:meth:`MultiOwnerSpecStore.impostor_copies`). An id present in
  several trees with no recorded owner (a daemon start) is ambiguous and every copy is
  quarantined; once only one copy is left, it is read again at once and admitted;
* a read admits a spec only when its id equals its file name, its owner is neither 0 nor
  below ``min_uid``, its ``submitter`` is the owner's uid and no dependency belongs to
  another owner; anything else is quarantined (:class:`~vq.errors.CorruptSpec`), never
  followed, changed or dispatched;
* what root writes into a user's queue (a spec, its lock file) is owned by that user
  (a spec through its temp file's descriptor, before the rename), and a lock file that
  is a symlink is refused, never followed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
from collections.abc import Callable, Iterator
from pathlib import Path

from vq._safe_open import open_beneath
from vq.domain.ids import is_job_id
from vq.domain.owned_specs import OwnedSpec, problem_of
from vq.domain.spec import JobSpec
from vq.errors import CorruptSpec, InvalidInput, NotFound
from vq.paths import SPEC_SUFFIX, MultiUserLayout, StateLayout

from .specs import Quarantined, Signature, SpecStore

__all__ = ["MultiOwnerSpecStore", "store_for"]

_UID_NAME = "0123456789"


def _canonical_uid(name: str) -> int | None:
    if not name or name[0] == "0" or any(c not in _UID_NAME for c in name) or len(name) > 10:
        return None
    return int(name)


class MultiOwnerSpecStore(SpecStore):
    """Read, create and update the JobSpecs of every owner of a multi-user root."""

    def __init__(self, paths: MultiUserLayout, min_uid: int = 1000) -> None:
        super().__init__(paths)
        self.layout = paths
        self.min_uid = min_uid

    def suspect_ids(self) -> set[str]:
        """Ids whose standing changed since the last call (they became ambiguous, were
        released, or changed owner): their specs must be read again."""
        return self.layout.owners.take_changed()

    def impostor_copies(self) -> list[Quarantined]:
        """The copies of recorded jobs found in other owners' trees (each quarantined
        alone: never read, run or changed; the recorded owner's job goes on)."""
        owners = self.layout.owners
        copies = []
        for job_id, uids in list(owners.impostors.items()):
            owner = owners.get(job_id)
            for uid in uids:
                path = self.layout.queue_of(uid) / f"{job_id}{SPEC_SUFFIX}"
                refusal = CorruptSpec(
                    f"job {job_id} belongs to uid {owner}, whose copy the daemon recorded "
                    f"first; this copy in uid {uid}'s tree is quarantined",
                    hint="the file is kept as it is; its owner or an administrator removes it",
                )
                copies.append(Quarantined(job_id, str(path), refusal.message, refusal.reference))
        return copies

    # --- discovery ---------------------------------------------------------------------
    def owner_uids(self) -> list[int]:
        """The canonical numeric owner trees under ``users/`` (others are never read)."""
        try:
            names = os.listdir(self.layout.users_dir)
        except OSError:
            return []
        return sorted(uid for uid in map(_canonical_uid, names) if uid is not None)

    def list_ids(self) -> list[str]:
        """Every job id of every owner; records owners, impostor copies and ambiguous ids
        as it goes (:class:`~vq.paths.OwnerMap`)."""
        found: dict[str, list[int]] = {}
        unlisted: set[int] = set()  # a tree that could not be listed hides nothing
        for uid in self.owner_uids():
            try:
                entries = os.listdir(self.layout.queue_of(uid))
            except OSError:
                unlisted.add(uid)
                continue
            for name in entries:
                job_id = name[: -len(SPEC_SUFFIX)]
                if name.endswith(SPEC_SUFFIX) and is_job_id(job_id):
                    found.setdefault(job_id, []).append(uid)
        owners = self.layout.owners
        for job_id, uids in found.items():
            self._classify(job_id, uids, unlisted)
        for job_id, uid in owners.items():
            if job_id not in found and uid not in unlisted:
                owners.forget(job_id)
        for job_id in list(owners.ambiguous):
            if job_id not in found:
                owners.forget(job_id)
        return list(found)

    def _classify(self, job_id: str, uids: list[int], unlisted: set[int]) -> None:
        """Record what the trees holding ``job_id`` (``uids``) make of it."""
        owners = self.layout.owners
        recorded = owners.get(job_id)
        if recorded is not None and recorded not in uids and recorded not in unlisted:
            # The recorded owner's copy is gone (archived, deleted): the id is found anew.
            owners.forget(job_id)
            owners.mark_changed(job_id)
            recorded = None
        if recorded is not None:
            # The recorded owner keeps the job; any other copy is an impostor, alone.
            others = tuple(uid for uid in uids if uid != recorded)
            if others:
                owners.impostors[job_id] = others
            else:
                owners.impostors.pop(job_id, None)
            return
        if len(uids) > 1:
            if job_id not in owners.ambiguous:
                owners.mark_changed(job_id)  # quarantined now, every copy
            owners.ambiguous[job_id] = tuple(uids)
            return
        if owners.ambiguous.pop(job_id, None) is not None:
            owners.mark_changed(job_id)  # one copy left: released, read it again now
        owners.set(job_id, uids[0])

    def queue_stamp(self) -> int | None:
        """The latest mtime of ``users/`` and every owner's queue directory."""
        stamps = []
        for path in (self.layout.users_dir, *map(self.layout.queue_of, self.owner_uids())):
            with contextlib.suppress(OSError):
                stamps.append(os.stat(path).st_mtime_ns)
        return max(stamps) if stamps else None

    def signatures(self, ids: list[str]) -> dict[str, Signature | None]:
        return {job_id: self.signature(job_id) for job_id in ids}

    def signature(self, job_id: str) -> Signature | None:
        owners = self.layout.owners
        if not is_job_id(job_id) or owners.get(job_id) is None or job_id in owners.ambiguous:
            return None
        try:
            st = os.stat(self.layout.spec(job_id))
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def owner(self, job_id: str) -> int | None:
        """The trusted owner of ``job_id`` (its tree's uid), None when unknown."""
        return self.layout.owners.get(job_id)

    # --- reads -------------------------------------------------------------------------
    def path(self, job_id: str) -> Path:
        if not is_job_id(job_id):
            raise InvalidInput(
                f"{job_id!r} is not a job id",
                hint="job ids are 12 lowercase hex characters, as `vq list` shows them",
            )
        return self.layout.spec(job_id)

    @contextlib.contextmanager
    def reader(self) -> Iterator[Callable[[str], JobSpec]]:
        """Each spec through :meth:`read`: it lives in its owner's tree and is checked
        against that owner, so there is no one queue directory to read relative to."""
        yield self.read

    def read(self, job_id: str) -> JobSpec:
        """The spec, admitted by the untrusted-spec rules, else CorruptSpec (quarantined)."""
        owners = self.layout.owners
        if job_id in owners.ambiguous:
            raise CorruptSpec(
                f"job {job_id} exists for several owners "
                f"(uids {', '.join(map(str, owners.ambiguous[job_id]))}) and the daemon "
                "recorded neither first; every copy is quarantined until one is left",
                hint="`--uid UID` reads one owner's copy; an administrator removes the copies "
                "that are not genuine (the job is released at once)",
            )
        uid = owners.get(job_id)
        if uid is None:
            self.list_ids()  # a spec written since the last discovery
            uid = owners.get(job_id)
            if uid is None:
                if job_id in owners.ambiguous:
                    return self.read(job_id)
                raise NotFound(
                    f"no job {job_id} in {self.layout.users_dir}",
                    hint="`vq list` shows the jobs of this queue",
                )
        spec = super().read(job_id)
        candidate = OwnedSpec(
            uid,
            job_id + SPEC_SUFFIX,
            spec.id,
            spec.submitter,
            tuple(spec.depends_on or ()),
        )
        problem = problem_of(candidate, self.min_uid)
        foreign = [dep for dep in candidate.depends_on if owners.get(dep) not in (None, uid)]
        if problem is None and foreign:
            problem = f"depends on another owner's job ({foreign[0]})"
        if problem is None:
            problem = self._file_problem(job_id, uid)
        if problem is not None:
            raise CorruptSpec(
                f"spec {self.path(job_id)} is not trusted: {problem}",
                hint="the file is kept as it is; its owner or an administrator fixes it",
            )
        return spec

    def admits_summary(self, job_id: str, submitter: str | None, depends_on: list[str]) -> bool:
        """A cached summary stands for ``job_id`` only when the owner is the tree the file
        was found in (never the cache's word) and that tree's uid, the summary's
        ``submitter`` and its dependencies pass the rules :meth:`read` applies."""
        owners = self.layout.owners
        uid = owners.get(job_id)
        if uid is None or job_id in owners.ambiguous:
            return False
        candidate = OwnedSpec(uid, job_id + SPEC_SUFFIX, job_id, submitter, tuple(depends_on))
        if problem_of(candidate, self.min_uid) is not None:
            return False
        return all(owners.get(dep) in (None, uid) for dep in depends_on)

    def _file_problem(self, job_id: str, uid: int) -> str | None:
        """Why the spec file itself is not its owner's (planted while the daemon runs): it
        must be a single-link file owned by the tree's uid (or root, which writes specs as
        the owner's files). Read after the content was, so a file swapped in between is
        judged by the next read; the content rules above hold for whatever was read."""
        try:
            info = os.lstat(self.path(job_id))
        except OSError:
            return None  # gone since the read: the next discovery sees it
        if info.st_uid not in (uid, 0):
            return f"the file is owned by uid {info.st_uid}, not by its owner directory's uid"
        if info.st_nlink != 1:
            return f"the file has {info.st_nlink} links"
        return None

    def read_copy(self, job_id: str, uid: int) -> JobSpec:
        """The copy of ``job_id`` in ``users/<uid>`` (how a quarantined id is still read:
        a bare lookup of it is ambiguous). The copy must pass the per-spec rules."""
        if not is_job_id(job_id):
            self.path(job_id)  # the one InvalidInput message
        if uid not in self.owner_uids():
            raise NotFound(
                f"no owner tree for uid {uid} in {self.layout.users_dir}",
                hint="`vq admin user add USER` provisions one",
            )
        spec = self._read_at(self.layout.queue_of(uid) / f"{job_id}{SPEC_SUFFIX}", job_id)
        problem = problem_of(
            OwnedSpec(uid, job_id + SPEC_SUFFIX, spec.id, spec.submitter), self.min_uid
        )
        if problem is not None:
            raise CorruptSpec(
                f"the copy of {job_id} in uid {uid}'s tree is not trusted: {problem}",
                hint="the file is kept as it is; its owner or an administrator fixes it",
            )
        return spec

    # --- writes ------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, job_id: str) -> Iterator[None]:
        """The spec lock, its file created as the owner's and never through a symlink (the
        queue directory and the file are opened through :mod:`vq._safe_open`)."""
        path = self.path(job_id)
        uid = self.layout.owners.get(job_id)
        lock = path.with_name(path.name + ".lock")
        try:
            fd = open_beneath(self.layout.tree_of(job_id), lock, os.O_RDONLY | os.O_CREAT)
        except OSError as exc:
            raise CorruptSpec(
                f"the lock file {lock} cannot be used: {exc.strerror}",
                hint="a lock file must be a regular file; the entry is kept as it is",
            ) from exc
        try:
            if uid is not None and os.geteuid() == 0 and os.fstat(fd).st_uid != uid:
                gid = _primary_gid(uid)
                os.fchown(fd, uid, -1 if gid is None else gid)
        finally:
            os.close(fd)
        with super().locked(job_id):
            yield

    def create(self, spec: JobSpec, *, sync_dir: bool = True) -> None:
        """A new spec of the owner its ``submitter`` names (a sibling of an owned job)."""
        uid = _canonical_uid(spec.submitter or "")
        if uid is None or uid < self.min_uid or uid not in self.owner_uids():
            raise InvalidInput(
                f"job {spec.id} has no owner tree (submitter {spec.submitter!r})",
                hint="in multi-user mode every job belongs to a provisioned user",
            )
        self.layout.owners.claim(spec.id, uid)  # written by the daemon: its owner
        super().create(spec, sync_dir=sync_dir)

    def _file_owner(self, job_id: str) -> tuple[int, int | None] | None:
        """Root writes a spec as its owner's file, in the owner's primary group (as the
        owner's own writes are): chowned through the temp file's descriptor before the
        rename, so no name in the owner's queue is ever chowned."""
        if os.geteuid() != 0:
            return None
        uid = self.layout.owners.get(job_id)
        return None if uid is None else (uid, _primary_gid(uid))

    def sync(self) -> None:
        for uid in self.owner_uids():
            with contextlib.suppress(OSError):
                fd = os.open(self.layout.queue_of(uid), os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)


@functools.lru_cache(maxsize=256)
def _primary_gid(uid: int) -> int | None:
    """The primary group of ``uid`` (None: no passwd entry; the group is left as is)."""
    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        return None


def store_for(paths: StateLayout, min_uid: int = 1000) -> SpecStore:
    """The store of a layout: every owner's trees for a multi-user root, else one queue."""
    if isinstance(paths, MultiUserLayout):
        return MultiOwnerSpecStore(paths, min_uid)
    return SpecStore(paths)
