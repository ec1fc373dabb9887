"""Which per-user specs a root daemon may trust (§2.4, §7.1). Pure.

In multi-user mode every spec is user-editable, so none of its fields steers root. The
numeric ``users/<uid>`` directory a spec was found in is its owner; the spec is admitted
only when its id is a safe job id equal to its file name, its owner is neither 0 nor
below ``min_uid``, its ``submitter`` (the numeric euid stamped at submit) names that same
owner, and none of its dependencies belongs to another owner. An id found in more than
one owner tree at once, with no owner recorded before (:func:`classify`: a first
discovery), quarantines every copy (none is dispatched, none is changed) while unrelated
jobs go on; a bare lookup of such an id is ambiguous and ``uid=`` selects one. (A
running store keeps the owner it recorded first and quarantines only a later copy in
another tree: :mod:`vq.store.owned`.)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from vq.domain.ids import is_job_id

__all__ = ["Discovery", "OwnedSpec", "classify", "problem_of"]

SPEC_SUFFIX = ".json"


@dataclass(frozen=True)
class OwnedSpec:
    """One spec as discovery found it: the trusted owner and file, the untrusted fields."""

    owner: int
    filename: str
    job_id: str
    submitter: str | None
    depends_on: tuple[str, ...] = ()


@dataclass(frozen=True)
class Discovery:
    """Admitted specs by id, quarantined ids with every copy, and rejections with why."""

    admitted: dict[str, OwnedSpec] = field(default_factory=dict)
    quarantined: dict[str, list[OwnedSpec]] = field(default_factory=dict)
    rejected: list[tuple[OwnedSpec, str]] = field(default_factory=list)

    def lookup(self, job_id: str, uid: int | None = None) -> OwnedSpec | None:
        """The spec of ``job_id`` (of owner ``uid`` when given).

        Raises :class:`LookupError` for a bare lookup of a quarantined id: it is
        ambiguous, and only ``uid`` says which copy is meant.
        """
        if job_id in self.quarantined:
            if uid is None:
                owners = sorted(spec.owner for spec in self.quarantined[job_id])
                raise LookupError(f"job {job_id} exists for several owners (uids {owners})")
            return next((s for s in self.quarantined[job_id] if s.owner == uid), None)
        found = self.admitted.get(job_id)
        if found is None or (uid is not None and found.owner != uid):
            return None
        return found


def problem_of(spec: OwnedSpec, min_uid: int) -> str | None:
    """Why one spec may not be admitted on its own (id, owner uid, submitter), or None."""
    if not is_job_id(spec.job_id) or spec.filename != spec.job_id + SPEC_SUFFIX:
        return "its id is not a job id equal to its file name"
    if spec.owner == 0 or spec.owner < min_uid:
        return f"owner uid {spec.owner} is 0 or below multi_user.min_uid = {min_uid}"
    if spec.submitter != str(spec.owner):
        return f"submitter {spec.submitter!r} is not its owner directory's uid {spec.owner}"
    return None


def classify(specs: Iterable[OwnedSpec], min_uid: int) -> Discovery:
    """Group all owners' specs by id: admit, quarantine (an id in several trees) or reject."""
    discovery = Discovery()
    by_id: dict[str, list[OwnedSpec]] = {}
    for spec in specs:
        problem = problem_of(spec, min_uid)
        if problem is not None:
            discovery.rejected.append((spec, problem))
        else:
            by_id.setdefault(spec.job_id, []).append(spec)
    for job_id, copies in by_id.items():
        if len({copy.owner for copy in copies}) > 1:
            discovery.quarantined[job_id] = copies
        else:
            discovery.admitted[job_id] = copies[0]
    owner_of = {job_id: spec.owner for job_id, spec in discovery.admitted.items()}
    for job_id, spec in list(discovery.admitted.items()):
        foreign = [dep for dep in spec.depends_on if owner_of.get(dep, spec.owner) != spec.owner]
        if foreign or any(dep in discovery.quarantined for dep in spec.depends_on):
            del discovery.admitted[job_id]
            discovery.rejected.append(
                (spec, f"depends on another owner's job ({(foreign or spec.depends_on)[0]})")
            )
    return discovery
