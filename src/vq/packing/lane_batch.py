"""Packed array elements on a scheduler lane (pure): which PENDING elements of one array
share the next allocation, that allocation's identity and script, and what each slot's
evidence means for its element.

Contracts:

* **Selection** (:func:`next_batch`): elements in array order (index, then job id); the
  first of the fewest balanced groups under every ceiling of the profile
  (:func:`~vq.packing.planner.capacity`, lowered by ``tasks_per_allocation``), cut to the
  lane's free capacity. The same pending set always gives the same batch.
* **Identity** (:func:`batch_allocation_id`): 16 hex digits derived from the lane, the
  array group and each element's (job id, retry count), in slot order. Rederiving it after
  a restart names the same ``vqp-<alloc>`` job that accounting may already hold, so a
  look-up by name is exact; a retried element is a new attempt and so joins an allocation
  with a new identity, whose evidence never mixes with the old one's.
* **Script**: :func:`~vq.packing.script.render_script` of the batch, one slot per element,
  the element's command as the slot's argument vector (no stdin), run through
  ``env NAME=VALUE…`` with the variables a lane job gets (``VQ_JOB_ID``, ``VQ_CPUS``,
  ``VQ_MEM_MB``, ``VQ_JOB_NAME``, ``VQ_ARRAY_INDEX``, ``VQ_ARRAY_TOTAL``,
  ``VQ_ARRAY_VALUE``), so an element tells itself apart as it would unpacked; each
  slot's stderr in its own ``.err`` (:func:`batch_script`). The script is staged at
  :data:`STAGED_SCRIPT` of ``<work_root>/<alloc>/`` with each element's workspace in its
  slot's directory, and submitted from there.
* **Outcome** (:func:`element_ending`): a slot's :class:`~vq.packing.evidence.TaskOutcome`
  as the element's ending: a marker's status (or a failed step's nonzero one) decides like
  a lane job's exit marker (retries apply); a slot that ended without a readable marker
  and no failing status, or was cancelled, is ``ABORTED_BY_QUEUE``; a queued, running or
  unknown slot has not ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.packing.evidence import TaskOutcome
from vq.packing.planner import PlanRefused, capacity, digest, group_sizes
from vq.packing.profiles import PackingProfile
from vq.packing.roster import RosterRefused, Task, check_args
from vq.packing.script import render_script, sbatch_args

__all__ = [
    "STAGED_SCRIPT",
    "Batch",
    "Element",
    "ElementEnding",
    "batch_allocation_id",
    "batch_script",
    "element_ending",
    "element_task",
    "members_allocation_id",
    "next_batch",
]


@dataclass(frozen=True)
class Element:
    """A PENDING array element as the packer sees it."""

    job_id: str
    array_index: int
    retry_count: int
    command: tuple[str, ...]
    #: ``(NAME, VALUE)`` pairs exported to the slot's command, in this order
    environment: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, spec: JobSpec) -> Element:
        """The element of ``spec`` (an array element: ``array_index`` is set)."""
        if spec.array_index is None:
            raise RosterRefused(f"job {spec.id} is not an array element")
        env = [("VQ_JOB_ID", spec.id), ("VQ_CPUS", str(spec.cpus))]
        if spec.mem_mb is not None:
            env.append(("VQ_MEM_MB", str(spec.mem_mb)))
        if spec.job_name:
            env.append(("VQ_JOB_NAME", spec.job_name))
        env += [("VQ_ARRAY_INDEX", str(spec.array_index))]
        if spec.array_total is not None:
            env.append(("VQ_ARRAY_TOTAL", str(spec.array_total)))
        if spec.array_value is not None:
            env.append(("VQ_ARRAY_VALUE", spec.array_value))
        return cls(spec.id, spec.array_index, spec.retry_count, tuple(spec.command), tuple(env))


@dataclass(frozen=True)
class Batch:
    """One allocation to submit: ``elements[slot]`` runs in slot ``slot``."""

    allocation_id: str
    elements: tuple[Element, ...]
    directives: tuple[str, ...]
    script: bytes

    def slot_of(self, job_id: str) -> int:
        return [e.job_id for e in self.elements].index(job_id)


@dataclass(frozen=True)
class ElementEnding:
    """An element's end. ``state`` None: the exit code decides (retries apply)."""

    state: JobState | None
    exit_code: int | None
    reason: str | None


#: Where a packed array's batch script is staged in ``<work_root>/<alloc>/``, beside
#: each slot's staged workspace ``<slot>/``.
STAGED_SCRIPT = "_vq/job.sh"


def element_task(element: Element) -> Task:
    """The slot task of ``element``: its job id as key, ``env NAME=VALUE… COMMAND`` (or
    the bare command without an environment) as ``args``.

    Raises :class:`~vq.packing.roster.RosterRefused` for a command a slot cannot run
    (empty, NUL bytes, a program starting with ``-`` or, with an environment, containing
    ``=``, oversized)."""
    command = check_args(list(element.command))
    if not element.environment:
        return Task(element.job_id, command)
    if "=" in command[0]:
        raise RosterRefused("the program must not contain '=' (env would take it for a value)")
    assignments = [f"{name}={value}" for name, value in element.environment]
    return Task(element.job_id, check_args(["env", *assignments, *command]))


def batch_allocation_id(lane: str, group: str, elements: Sequence[Element]) -> str:
    """The identity of an allocation holding ``elements`` (slot order) — see module doc."""
    return members_allocation_id(lane, group, [(e.job_id, e.retry_count) for e in elements])


def members_allocation_id(lane: str, group: str, members: Sequence[tuple[str, int]]) -> str:
    """:func:`batch_allocation_id` from each slot's (job id, retry count) alone."""
    return digest(["vq-lane-pack", lane, group, [[job, retry] for job, retry in members]])[:16]


def next_batch(
    lane: str,
    group: str,
    pending: Sequence[Element],
    profile: PackingProfile,
    *,
    free: int,
    tasks_per_allocation: int | None = None,
) -> Batch | None:
    """The next allocation of ``pending`` (one array group), or None when nothing fits.

    ``free`` is the lane's free capacity in elements; ``tasks_per_allocation`` above the
    profile's capacity is refused (:class:`~vq.packing.planner.PlanRefused`), never
    clamped."""
    most = capacity(profile)
    if tasks_per_allocation is not None:
        if not 1 <= tasks_per_allocation <= most:
            raise PlanRefused(
                f"tasks per allocation {tasks_per_allocation} is outside 1..{most}, "
                f"what profile {profile.name} can hold in one allocation"
            )
        most = tasks_per_allocation
    ordered = sorted(pending, key=lambda e: (e.array_index, e.job_id))
    sizes = group_sizes(len(ordered), most)
    if not sizes or free <= 0:
        return None
    chosen = tuple(ordered[: min(sizes[0], free)])
    tasks = [element_task(e) for e in chosen]
    alloc = batch_allocation_id(lane, group, chosen)
    directives = tuple(sbatch_args(alloc, len(tasks), profile))
    return Batch(alloc, chosen, directives, batch_script(alloc, tasks, profile, directives))


def batch_script(
    allocation_id: str,
    tasks: Sequence[Task],
    profile: PackingProfile,
    directives: Sequence[str] | None = None,
) -> bytes:
    """The batch script of a packed array's allocation: :func:`~vq.packing.script.
    render_script` with each slot's stderr in its own ``<alloc>-%j-<slot>.err`` (an
    element keeps a ``stdout.log`` and a ``stderr.log``, as any job)."""
    return render_script(allocation_id, tasks, profile, directives, separate_stderr=True)


def element_ending(outcome: TaskOutcome) -> ElementEnding | None:
    """What a slot's evidence means for its element; None while it has not ended."""
    if outcome.state == "SUCCEEDED":
        return ElementEnding(None, 0, None)
    if outcome.state == "FAILED":
        if outcome.exit_code:  # a nonzero status: the marker's, or the step's
            return ElementEnding(None, outcome.exit_code, None)
        # no readable marker, and a step that exited 0 or never said: it did not succeed
        return ElementEnding(
            JobState.ABORTED_BY_QUEUE,
            outcome.exit_code,
            f"slot {outcome.slot} ended without writing its exit marker",
        )
    if outcome.state == "CANCELLED":
        return ElementEnding(
            JobState.ABORTED_BY_QUEUE, outcome.exit_code, f"slot {outcome.slot} was cancelled"
        )
    return None
