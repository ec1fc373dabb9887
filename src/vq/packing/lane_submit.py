"""Whether an array may be submitted packed (``vq submit LANE --array … --pack PROFILE``),
and the resources its elements then carry (pure: the caller passes the configuration).

Contracts (:func:`check_pack_submission`):

* Only an array is packed (``--array`` or ``--array-from``); a chain or a
  ``--rerun-until-file-exists`` job is refused, a packed slot has no sibling to rerun.
* The array goes to a configured Slurm lane, and that lane is the profile's
  ``target.host``: the profile decides where the allocations go, the lane who submits them.
* The lane keeps accounting (``scheduler_accounting = "sacct"``): a lost receipt is settled
  by finding the allocation in accounting by its identity; without it a daemon crash
  between intent and receipt could never be settled safely.
* The profile decides each element's resources: ``cpus`` = ``cpus_per_task``, ``mem_mb`` =
  ``memory_mib_per_task``, ``wall_time_seconds`` = the effective ``time_limit``. A
  ``--cpus``, ``--mem-mb`` or ``--wall-time`` given with ``--pack`` must equal them
  (anything else is refused, never adjusted), so ``vq status`` shows what a slot has.
* The command must be one a slot can run (:func:`~vq.packing.roster.check_args`), and its
  program must not contain ``=`` (a slot exports the element's ``VQ_ARRAY_*`` through
  ``env``, which would take it for an assignment).

Every refusal is :class:`~vq.errors.InvalidInput` with a hint; nothing is changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vq.errors import InvalidInput
from vq.packing.profiles import PackingProfile

__all__ = ["LaneFacts", "PackRequest", "PackedResources", "check_pack_submission"]


@dataclass(frozen=True)
class PackRequest:
    """A submission with ``--pack``: the values given (None: not given)."""

    profile: str
    lane: str | None
    command: Sequence[str]
    array: bool
    chain: bool = False
    rerun_until: bool = False
    cpus: int | None = None
    mem_mb: int | None = None
    wall_time_seconds: int | None = None


@dataclass(frozen=True)
class LaneFacts:
    """What the configuration says of the requested lane."""

    dialect: str | None  # None: no such lane
    accounting: str | None


@dataclass(frozen=True)
class PackedResources:
    """The resources every element of the packed array carries."""

    profile: PackingProfile
    cpus: int
    mem_mb: int
    wall_time_seconds: int


def check_pack_submission(
    request: PackRequest,
    profiles: Mapping[str, PackingProfile],
    lanes: Mapping[str, LaneFacts],
) -> PackedResources:
    """The packed resources of ``request``, or :class:`InvalidInput` (see module doc)."""
    if not request.array:
        raise InvalidInput(
            "--pack packs the elements of an array",
            hint="add --array 0-N or --array-from FILE, or drop --pack",
        )
    if request.chain or request.rerun_until:
        which = "--chain" if request.chain else "--rerun-until-file-exists"
        raise InvalidInput(
            f"--pack cannot be combined with {which}",
            hint="a packed element runs once per attempt in a slot; drop one of the options",
        )
    profile = profiles.get(request.profile)
    if profile is None:
        known = ", ".join(sorted(profiles)) or "none"
        raise InvalidInput(
            f"no packing profile {request.profile!r} (defined: {known})",
            hint="define [packing.NAME.target] and [packing.NAME.resources] (docs/packing.md)",
        )
    host = profile.target.host
    if request.lane is None:
        raise InvalidInput(
            "--pack needs the Slurm lane the profile targets",
            hint=f"submit with `vq submit {host} --array … --pack {request.profile} -- CMD`",
        )
    facts = lanes.get(request.lane)
    if facts is None or facts.dialect != "slurm":
        raise InvalidInput(
            f"lane {request.lane!r} is not a configured Slurm lane",
            hint='packed arrays run on a [hosts.NAME] with scheduler_dialect = "slurm"',
        )
    if request.lane != host:
        raise InvalidInput(
            f"packing profile {request.profile!r} targets lane {host!r}, not {request.lane!r}",
            hint=f"submit to {host}, or choose a profile whose target.host is {request.lane}",
        )
    if facts.accounting != "sacct":
        raise InvalidInput(
            f"lane {request.lane!r} keeps no accounting (scheduler_accounting = "
            f'"{facts.accounting}"): a lost submission receipt could not be settled',
            hint='packed arrays need scheduler_accounting = "sacct" on their lane',
        )
    res = profile.resources
    wall = res.time_minutes * 60
    for option, given, wanted in (
        ("--cpus", request.cpus, res.cpus_per_task),
        ("--mem-mb", request.mem_mb, res.memory_mib_per_task),
        ("--wall-time", request.wall_time_seconds, wall),
    ):
        if given is not None and given != wanted:
            raise InvalidInput(
                f"{option} {given} differs from what profile {request.profile!r} gives each "
                f"slot ({wanted})",
                hint=f"drop {option}: [packing.{request.profile}.resources] decides it",
            )
    # Imported here: the roster's models are a submission's concern, and every service
    # context (a no-daemon `vq list` included) imports this module for LaneFacts.
    from vq.packing.roster import RosterRefused, check_args

    try:
        args = check_args(list(request.command))
    except RosterRefused as exc:
        raise InvalidInput(
            f"the command cannot run in a packed slot: {exc}",
            hint="give the program and its arguments after `--`",
        ) from None
    if "=" in args[0]:
        raise InvalidInput(
            f"the program {args[0]!r} contains '=', which a packed slot cannot run",
            hint="name the program without '=' (wrap it in a script if needed)",
        )
    return PackedResources(profile, res.cpus_per_task, res.memory_mib_per_task, wall)
