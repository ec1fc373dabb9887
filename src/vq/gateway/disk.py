"""The gateway's disk-only verbs: the spec files and workspaces are the truth for them
whether or not a daemon runs (``vq events``, ``vq logs``, ``vq wait``, ``vq fetch``,
``vq cleanup``), and the service context every no-daemon path runs on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from vq.paths import StatePaths

if TYPE_CHECKING:
    from pathlib import Path

    from vq.cleanup.jobs import CleanupPolicy, CleanupReport
    from vq.config.settings import Settings
    from vq.domain.events import Event
    from vq.domain.quotas import QuotaLimits
    from vq.domain.spec import JobSpec
    from vq.fetch.local import FetchResult
    from vq.fetch.snapshot import SourceKind
    from vq.protocol.answers import FinalState
    from vq.services.context import ServiceContext
    from vq.services.ownership import OwnerCheck

__all__ = ["DiskVerbs"]


class _Unset:
    """The ownership helper of :meth:`DiskVerbs.spec` before it is first built."""


_UNSET = _Unset()


class DiskVerbs:
    """The verbs that read or change the files directly, for one state root.

    ``env`` selects the configuration (``VQ_CONFIG_DIR`` and its fallbacks) used for the
    caps, profiles and programs; None means ``os.environ``.
    """

    def __init__(
        self, paths: StatePaths, env: Mapping[str, str] | None = None, owner: int | None = None
    ) -> None:
        self.paths = paths
        self.env = env
        #: multi-user mode: the owner named with ``--uid`` (None: the caller's own tree)
        self.owner = owner
        self._spec_check: OwnerCheck | _Unset | None = _UNSET

    def owner_check(self, settings: Settings | None = None) -> OwnerCheck | None:
        """The per-verb ownership helper (:mod:`vq.services.ownership`) for this process
        and tree: None in single-user mode. In multi-user mode the whole configuration is
        validated and the system policy must be enabled, else ConfigError (fail closed)."""
        from vq.paths import MultiUserLayout

        every_tree = isinstance(self.paths, MultiUserLayout)
        if not every_tree and self.paths.owner_dir is None:
            return None
        from vq.config.settings import load_settings
        from vq.errors import ConfigError
        from vq.services.ownership import Caller, OwnerCheck, admin_gid_of

        policy = (settings or load_settings(self.env)).multi_user
        if not policy.enabled:
            raise ConfigError(
                "multi-user mode is selected but no enabled [multi_user] policy is in force",
                hint="an administrator fixes the system config (docs/multi-user.md)",
            )
        tree = None if every_tree or self.paths.owner_dir is None else self.paths.owner_dir.name
        return OwnerCheck(
            Caller.current(),
            admin_gid_of(policy.admin_group),
            int(tree) if tree is not None else None,
            selected=self.owner if every_tree else None,
        )

    def local_context(self) -> ServiceContext:
        """A service context over the disk (no daemon needed): the configured caps as the
        budget, and the last advertised snapshot (``daemon_capacity.json``) as the base
        caps the capacity classification uses; None, so null, when none is readable."""
        from vq.config.hosts import lanes_of
        from vq.config.settings import load_settings
        from vq.packing.cases.array_submit import pack_configuration
        from vq.services.context import ServiceContext
        from vq.services.control import read_capacity

        settings = load_settings(self.env)
        packing, pack_lanes = pack_configuration(settings)
        return ServiceContext(
            self.paths,
            settings.daemon.caps(),
            profiles=settings.profile,
            programs=settings.programs,
            base_caps=read_capacity(self.paths),
            packing=packing,
            pack_lanes=pack_lanes,
            lanes=lanes_of(settings.hosts),
            owner_check=self.owner_check(settings),
            owner_quota=self._owner_quota(settings),
        )

    def _owner_quota(self, settings: Settings) -> QuotaLimits | None:
        """Multi-user mode, a user's own tree: that owner's quota (None otherwise)."""
        owner_dir = self.paths.owner_dir
        if owner_dir is None or not owner_dir.name.isdecimal():
            return None
        return settings.quotas.policy().limits(int(owner_dir.name))

    # --- disk-only reads -----------------------------------------------------------------
    def known_ids(self) -> list[str]:
        """Every job id with a spec file in the queue (names only, no spec is read): what a
        short id prefix is resolved against."""
        from vq.store.specs import SpecStore

        return SpecStore(self.paths).list_ids()

    def spec(self, job_id: str) -> JobSpec:
        """The job's spec file (NotFound, CorruptSpec), behind the ownership helper in
        multi-user mode (PermissionDenied): ``vq logs``, ``events`` and ``wait`` read it."""
        from vq.store.owned import store_for

        check = self._spec_check
        if isinstance(check, _Unset):  # polled by `logs -f` and `wait`: built once
            check = self._spec_check = self.owner_check()
        if check is not None:
            check.before_reading(job_id)
        spec = store_for(self.paths).read(job_id)
        if check is not None:
            check(spec)
        return spec

    def events(self, job_id: str, *, refuse_archived: bool = True) -> list[Event]:
        """The job's timeline (``_vq/events.jsonl``); NotFound once it is archived (unless
        ``refuse_archived`` is False: then whatever is left, maybe nothing)."""
        from vq.errors import NotFound
        from vq.store.events import read_events

        spec = self.spec(job_id)
        archived = spec.archive_path and not self.paths.workspace(job_id).exists()
        if archived and refuse_archived:
            raise NotFound(
                f"job {job_id} was archived to {spec.archive_path}; its events are in the archive",
                hint=f"tar -xjf {spec.archive_path} -C DIR",
            )
        return read_events(self.paths, job_id)

    def final_state(self, job_id: str) -> FinalState | None:
        """``{id, state, exit_code, failure_reason}`` once the job has ended, else None."""
        spec = self.spec(job_id)
        if not spec.is_terminal:
            return None
        return {
            "id": job_id,
            "state": spec.state.value,
            "exit_code": spec.exit_code,
            "failure_reason": spec.failure_reason,
        }

    def fetch_tree(self, job_id: str, dest: Path | None, kind: SourceKind) -> FetchResult:
        """Copy the job's workspace or workdir to ``dest`` (``vq fetch``)."""
        from vq.fetch.local import fetch_tree

        return fetch_tree(self.local_context(), job_id, dest, kind=kind)

    def fetch_artifact(
        self, job_id: str, name: str, dest: Path | None, kind: SourceKind
    ) -> FetchResult:
        """Copy one regular file of the job's workspace or workdir (``vq fetch --name``)."""
        from vq.fetch.local import fetch_artifact

        ctx = self.local_context()
        return fetch_artifact(ctx, job_id, name, dest, kind=kind)

    def cleanup(self, policy: CleanupPolicy, *, execute: bool) -> CleanupReport:
        """Sweep or archive ended jobs (``vq cleanup``; a dry run unless ``execute``)."""
        from vq.cleanup.jobs import run_cleanup

        return run_cleanup(self.local_context(), policy, execute=execute)
