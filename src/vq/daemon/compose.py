"""The composition root: :func:`compose_daemon` builds and wires every part of a daemon.

This is the one place that knows how the parts fit together; each part receives what
it needs through its constructor (callbacks included), so nothing is patched after
construction and a test can build the same daemon on a temporary state root and drive
:meth:`~vq.daemon.app.Daemon.tick` itself.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from vq.config.hosts import lanes_of
from vq.config.settings import Settings, WatchdogSettings
from vq.domain.quotas import QuotaPolicy
from vq.domain.spec import JobSpec
from vq.errors import ConfigError, VqError
from vq.executors.local import LocalExecutor
from vq.executors.owner_drop import PrivilegeDrop
from vq.executors.registry import ExecutorRegistry
from vq.executors.scheduler import LaneContext, LaneSet, LoopGuard, lane_factory
from vq.packing.cases.array_submit import pack_configuration
from vq.packing.cases.remote import PackRemote
from vq.paths import MultiUserLayout, StatePaths
from vq.services.context import ServiceContext
from vq.services.lifecycle import Lifecycle
from vq.store.owned import MultiOwnerSpecStore
from vq.transport.local import LocalRunner

from .app import RESCAN_SECONDS, Daemon, DaemonParts
from .dispatch import Dispatcher
from .handlers.control import ControlHandlers
from .handlers.health import HealthHandler, HealthParts
from .handlers.info import DaemonFacts, InfoHandlers
from .handlers.jobs import JobHandlers
from .handlers.reads import ReadHandlers
from .handlers.views import IndexViews
from .holds import Holds, LoopCalls
from .inbox import LoopInbox
from .index import JobIndex
from .lane_controls import LaneControls
from .local_engine import LocalEngine
from .multi_user import MultiUser, OwnerQuotas, owner_hold
from .notify import Notifier
from .owner_submit import OwnerSubmitSockets
from .pressure import PressureGuard
from .routes import build_routes
from .rpc import peer_closed
from .sidecar import WebOptions, WebSidecar
from .storage import StorageGuard
from .supervisor import LaunchResult, Supervisor
from .terminal import EndedJobs
from .watchdog import Watchdog

__all__ = ["compose_daemon"]

#: Multi-user mode: users' CLIs write their own trees and cannot wake the daemon.
MULTI_USER_RESCAN_SECONDS = 1.0


def compose_daemon(
    paths: StatePaths,
    settings: Settings,
    *,
    auto_resume: bool = False,
    overrides: dict[str, Any] | None = None,
    web: WebOptions | None = None,
    env: Mapping[str, str] | None = None,
    multi_user: MultiUser | None = None,
) -> Daemon:
    """One daemon for ``paths`` with ``settings`` (ConfigError: an unusable webhook secret).

    ``overrides`` are the command line's ``[daemon]`` settings, kept across reloads;
    ``env`` is the environment jobs inherit (default: this process's). ``multi_user``
    (with a :class:`~vq.paths.MultiUserLayout`): the root daemon of every user's tree.
    """
    environ = dict(os.environ if env is None else env)
    packing, pack_lanes = pack_configuration(settings)
    ctx = ServiceContext(
        paths,
        settings.daemon.caps(),
        profiles=settings.profile,
        programs=settings.programs,
        default_recover_on_reboot=auto_resume,  # only the default of later submits
        min_uid=multi_user.policy.min_uid if multi_user is not None else 1000,
        packing=packing,
        pack_lanes=pack_lanes,
        lanes=lanes_of(settings.hosts),
    )
    owner_of = paths.owners.get if isinstance(paths, MultiUserLayout) else None
    if multi_user is not None and owner_of is None:
        raise ConfigError("a multi-user daemon needs the system root's layout")
    inbox = LoopInbox()
    loop_calls = LoopCalls(inbox.call_soon)
    index = JobIndex(ctx.store)
    runner = LocalRunner()
    notifier = Notifier.from_settings(settings.notifications, environ)
    ended = EndedJobs(ctx, index.upsert, [notifier.notify])
    #: The one writer of state transitions; the end of a job runs on the loop.
    lifecycle = Lifecycle(
        ctx,
        on_change=index.upsert,
        on_ended=lambda spec: inbox.call_soon(lambda: ended.job_ended(spec)),
    )
    executor = LocalExecutor(
        paths,
        runner=runner,
        privilege_drop=PrivilegeDrop(owner_of) if owner_of is not None else None,
    )
    quotas = (
        OwnerQuotas(multi_user.quotas, owner_of)
        if multi_user is not None and owner_of is not None
        else None
    )
    #: Scheduler lanes this daemon drives: engines that dispatch their own jobs, owned
    #: by the loop thread (``guard``). Rebuilt on a reload (``Holds`` applies the new
    #: ``[hosts]`` on the loop); other threads reach them through ``LaneControls``.
    guard = LoopGuard()
    make_lane = lane_factory(
        LaneContext(paths, ctx.store, ctx.now),
        lifecycle,
        # each lane's PENDING specs, as the registry places them (``executors`` below)
        pending=lambda name: executors.partition(index.pending()).by_lane.get(name, []),
        call_soon=inbox.call_soon,
        dependency_state=index.dependency_state,
        hold=lambda: holds.holding,  # a drain stops lane dispatch too (bound below)
        packing=lambda: ctx.packing,  # a reload replaces them
        pack_remote=PackRemote,
        guard=guard,
    )
    lanes = LaneSet(make_lane, settings.hosts, guard)
    lane_controls = LaneControls(lanes, loop_calls)
    executors = ExecutorRegistry(executor, lane_controls, parked=lane_controls.parked)

    # The supervisor hands launch answers to the dispatcher, which needs the supervisor:
    # the one forward reference, resolved before the loop (or any launch) runs.
    def apply_launch(result: LaunchResult) -> None:
        dispatcher.apply_launch(result)

    supervisor = Supervisor(ctx, lifecycle, executor, wake=inbox.wake, on_launch=apply_launch)
    #: Holds dispatch while the state root cannot take a spec write (ENOSPC/EDQUOT/EIO).
    storage = StorageGuard(paths, ctx.now)
    supervisor.on_storage_error = storage.note
    executor.attach_fork_server(supervisor.on_collector_exit)
    watchdog = Watchdog(ctx, supervisor, index.get, settings.watchdog)
    pressure = PressureGuard(ctx, supervisor, index.get, settings.watchdog, index.upsert)

    def running_groups() -> list[str]:
        return [
            job_id
            for job_id, holder in supervisor.holders.items()
            if not holder.collector_done and holder.pgid is not None
        ]

    holds = Holds(ctx, settings, overrides, running_groups, loop_calls, on_hosts=lanes.reconfigure)

    def affinity_cores() -> frozenset[int] | None:
        """The cores jobs are pinned within (the daemon's own affinity), or None when
        ``[daemon] cpu_affinity`` is off (read on the loop; a reload applies)."""
        if not holds.settings.daemon.cpu_affinity or not hasattr(os, "sched_getaffinity"):
            return None
        return frozenset(os.sched_getaffinity(0))

    def dispatch_hold() -> str | None:
        """Why dispatch is held now (memory pressure, a drain, the config), or None; the
        ``pending_reason`` of a PENDING job that would otherwise be dispatched."""
        if pressure.hold_reason is not None:
            return pressure.hold_reason
        return holds.hold_reason()

    dispatcher = Dispatcher(
        ctx,
        supervisor,
        executors,
        index,
        lifecycle,
        environ,
        hold=lambda: pressure.holding or holds.holding or storage.holding,
        affinity_cores=affinity_cores,
        quotas=quotas,
    )

    def reconfigure(watch: WatchdogSettings) -> None:
        watchdog.configure(watch)
        pressure.configure(watch)

    def unended_specs() -> list[JobSpec]:
        """The indexed jobs that have not ended, as on disk now (holds write behind it)."""
        specs = []
        for spec in index.all():
            if not spec.is_terminal:
                try:
                    specs.append(ctx.store.read(spec.id))
                except VqError:
                    continue
        return specs

    facts = DaemonFacts(
        started_monotonic=time.monotonic(), started_at=ctx.now(), storage_hold=storage.hold_dict
    )
    views = IndexViews(ctx, index)
    jobs = JobHandlers(
        ctx,
        index,
        views,
        inbox,
        lifecycle,
        supervisor.usage,
        supervisor.start_grace,
        dispatch_hold,
        storage_hold=storage.hold_dict,
        quota_hold=quotas.hold if quotas is not None else None,
        executors=executors,
        lanes=lanes,
        loop_calls=loop_calls,
    )
    routes = build_routes(
        paths,
        InfoHandlers(ctx, facts, inbox, lambda: affinity_cores() is not None, dispatch_hold),
        jobs,
        ReadHandlers(ctx, index, views, jobs.status, peer_closed),
        ControlHandlers(
            holds,
            inbox,
            reconfigure,
            supervisor.usage,
            lambda: pressure.holding,
            unended_specs,
            dispatch_hold,
            storage_hold=storage.hold_dict,
        ),
        HealthHandler(
            HealthParts(
                ctx,
                facts,
                settings.daemon.tick_seconds,
                holds,
                lambda: pressure.holding,
                executor,
                index,
                storage_hold=storage.hold_dict,
            )
        ),
    )
    return Daemon(
        DaemonParts(
            paths=paths,
            settings=settings,
            ctx=ctx,
            inbox=inbox,
            index=index,
            holds=holds,
            loop_calls=loop_calls,
            lifecycle=lifecycle,
            supervisor=supervisor,
            executor=executor,
            executors=executors,
            lanes=lanes,
            watchdog=watchdog,
            pressure=pressure,
            storage=storage,
            dispatcher=dispatcher,
            local_engine=LocalEngine(dispatcher, supervisor, executor),
            notifier=notifier,
            facts=facts,
            routes=routes,
            runner=runner,
            web=WebSidecar(paths, web) if web is not None else None,
            auto_resume=auto_resume,
            socket_access=multi_user.socket_access() if multi_user is not None else None,
            rescan_seconds=MULTI_USER_RESCAN_SECONDS if multi_user is not None else RESCAN_SECONDS,
            doorbell=paths.doorbell if multi_user is not None else None,
            owner_sockets=(
                _owner_sockets(paths, ctx, auto_resume, multi_user.quotas, index)
                if multi_user
                else None
            ),
        )
    )


def _owner_sockets(
    paths: StatePaths,
    ctx: ServiceContext,
    auto_resume: bool,
    quotas: QuotaPolicy,
    index: JobIndex,
) -> OwnerSubmitSockets:
    """Each owner's submit socket; a job written through it is the owner's own submit
    (their tree, their ``submitter``) with this daemon's caps and defaults."""
    if not isinstance(paths, MultiUserLayout) or not isinstance(ctx.store, MultiOwnerSpecStore):
        raise ConfigError("a multi-user daemon needs the system root's layout")

    def context_for(uid: int) -> ServiceContext:
        return ServiceContext(
            paths.for_owner(uid),
            ctx.caps,
            base_caps=ctx.base_caps,
            default_recover_on_reboot=auto_resume,
            min_uid=ctx.min_uid,
            owner_quota=quotas.limits(uid),
        )

    def hold(uid: int, job_id: str) -> str | None:
        return owner_hold(paths.owners, index.quarantined, uid, job_id)

    return OwnerSubmitSockets(paths, ctx.store, context_for, hold)
