"""What every use case needs, built once at a composition root (daemon or CLI)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from vq.domain.admission import Caps
from vq.domain.quotas import QuotaLimits
from vq.domain.spec import JobSpec, utcnow
from vq.paths import StatePaths
from vq.services.ownership import OwnerCheck
from vq.store.owned import store_for
from vq.store.specs import SpecStore

if TYPE_CHECKING:  # types only: the configuration models load pydantic and the config
    from vq.config.hosts import LaneSettings
    from vq.config.programs import ProgramSettings
    from vq.packing.lane_submit import LaneFacts
    from vq.packing.profiles import PackingProfile
    from vq.transport.runner import Runner

__all__ = ["ServiceContext", "SubmitProfile"]


class SubmitProfile(Protocol):
    """A ``[profile.NAME]`` preset (``vq.config.ProfileSettings``): the JobSpec field
    values it sets, read as a submit's defaults."""

    def model_dump(self, *, exclude_none: bool = False) -> dict[str, Any]:
        """The preset's fields by JobSpec field name (None: not set, with
        ``exclude_none``)."""
        ...


@dataclass
class ServiceContext:
    """Paths, the spec store, the clock, randomness and the admission caps.

    ``caps`` are the effective caps (the dispatch budget, lowered by a live throttle);
    ``base_caps`` the advertised base caps the configured-cap classification compares
    with (§4.3, §5.1): set by the daemon, read from the last advertised snapshot
    without one, and None when unknown (the classification is then null).

    The clock and randomness are injected so tests can pin them; nothing in services
    reads the environment or the wall clock directly.
    """

    paths: StatePaths
    caps: Caps
    now: Callable[[], datetime] = utcnow
    random_bytes: Callable[[int], bytes] = os.urandom
    #: ``[profile.NAME]`` presets (name → its JobSpec field values)
    profiles: Mapping[str, SubmitProfile] = field(default_factory=dict)
    #: ``[programs.NAME]`` registry (name → its settings), §3.4
    programs: Mapping[str, ProgramSettings] = field(default_factory=dict)
    base_caps: Caps | None = None
    #: set (by the daemon) while the configuration files on disk are invalid: what is
    #: wrong and where; ``profiles`` and ``programs`` are then the last good ones
    config_error: str | None = None
    #: ``recover_on_reboot`` of a job submitted without ``--auto-resume`` (the daemon's
    #: ``vq daemon start --auto-resume`` sets it for submits through that daemon).
    default_recover_on_reboot: bool = False
    #: multi-user mode: the lowest uid whose specs are admitted (``[multi_user] min_uid``)
    min_uid: int = 1000
    #: ``[packing.NAME]`` profiles and the scheduler lanes (name →
    #: :class:`vq.packing.lane_submit.LaneFacts`) a ``vq submit --pack`` is checked against
    packing: Mapping[str, PackingProfile] = field(default_factory=dict)
    pack_lanes: Mapping[str, LaneFacts] = field(default_factory=dict)
    #: the scheduler lanes (name → :class:`vq.config.hosts.LaneSettings`) a lane submit
    #: resolves a managed runtime on, and how to reach one (lane → a
    #: :class:`vq.transport.runner.Runner`; None: the lane's own SSH runner)
    lanes: Mapping[str, LaneSettings] = field(default_factory=dict)
    lane_runner: Callable[[LaneSettings], Runner] | None = None
    #: multi-user mode: the per-verb ownership helper (§7.3) of the acting CLI; None in
    #: single-user mode and in the daemon (its socket admits root and the admin group only)
    owner_check: OwnerCheck | None = None
    #: multi-user mode: the quota of the owner whose tree this context submits into
    #: (a submit warns of a request that can never fit it); None: no owner, or unlimited
    owner_quota: QuotaLimits | None = None
    store: SpecStore = field(init=False)

    def __post_init__(self) -> None:
        self.store = store_for(self.paths, self.min_uid)

    def read_owned(self, job_id: str) -> JobSpec:
        """The spec of a job the caller may act on: the ownership helper refuses another
        owner's job (PermissionDenied) before its spec is read where it can, and again on
        the spec read; without a helper this is ``store.read``."""
        self.check_job(job_id)
        spec = self.store.read(job_id)
        if self.owner_check is not None:
            self.owner_check(spec)
        return spec

    def check_job(self, job_id: str) -> None:
        """The ownership helper's refusal that needs no read (another owner's tree)."""
        if self.owner_check is not None:
            self.owner_check.before_reading(job_id)
