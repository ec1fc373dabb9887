"""Handlers of the control plane (§2.1): ``reload``, ``drain``, ``undrain``, ``throttle``,
``capacity``, ``admin_status``.

The holds (:class:`~vq.daemon.holds.Holds`) keep the drain, throttle and configuration
state; these handlers turn typed params into hold changes and hand loop-owned work
(pausing for a full drain, resuming at undrain, reconfiguring the watchdog) to the loop.
Auditing of the state-changing calls is done by the method table (:mod:`..routes`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict

from vq.config.settings import WatchdogSettings
from vq.domain.admission import Usage
from vq.domain.spec import JobSpec, utcnow
from vq.protocol.methods import (
    AdminStatusResult,
    CapacityResult,
    DrainParams,
    DrainResult,
    EmptyParams,
    ReloadResult,
    ThrottleParams,
    ThrottleResult,
    UndrainResult,
)
from vq.services.control import DrainState, Throttle, drained_job_ids, new_throttle, undrain_answer

from ..holds import Holds
from ..inbox import LoopInbox

__all__ = ["ControlHandlers"]


class ControlHandlers:
    """The control methods over the daemon's holds.

    ``reconfigure`` applies new watchdog settings (called on the loop after a reload);
    ``usage`` reads the supervisor's reserved resources; ``pressure_hold`` says whether
    host memory pressure holds dispatch; ``indexed`` lists the jobs not ended yet.
    """

    def __init__(
        self,
        holds: Holds,
        inbox: LoopInbox,
        reconfigure: Callable[[WatchdogSettings], None],
        usage: Callable[[], Usage],
        pressure_hold: Callable[[], bool],
        indexed: Callable[[], list[JobSpec]],
        dispatch_hold: Callable[[], str | None],
        storage_hold: Callable[[], dict[str, str] | None] = lambda: None,
    ) -> None:
        self._holds = holds
        self._inbox = inbox
        self._reconfigure = reconfigure
        self._usage = usage
        self._pressure_hold = pressure_hold
        self._indexed = indexed
        self._dispatch_hold = dispatch_hold
        self._storage_hold = storage_hold

    def reload(self, _: EmptyParams) -> ReloadResult:
        report = self._holds.reload()
        watchdog = self._holds.settings.watchdog
        self._inbox.call_soon(lambda: self._reconfigure(watchdog))
        return ReloadResult.model_validate(report)

    def drain(self, params: DrainParams) -> DrainResult:
        state = DrainState(params.mode, params.reject_submits, params.reason, utcnow().isoformat())
        self._holds.drain(state)
        if params.mode == "full":
            self._inbox.call_soon(self._holds.pause_for_drain)
        return DrainResult(**asdict(state))

    def undrain(self, _: EmptyParams) -> UndrainResult:
        self._holds.drain(DrainState())
        holds, indexed = self._holds, self._indexed
        self._inbox.call_soon(lambda: holds.resume_after_drain(drained_job_ids(indexed())))
        return UndrainResult.model_validate(undrain_answer())

    def throttle(self, params: ThrottleParams) -> ThrottleResult:
        if params.clear:
            caps = self._holds.set_throttle(Throttle())
        else:
            limits = new_throttle(params.max_jobs, params.max_cpus, params.seconds, utcnow())
            caps = self._holds.set_throttle(limits)
        self._inbox.wake()
        return ThrottleResult(
            throttle=self._holds.status()["throttle"], effective_caps=asdict(caps)
        )

    def capacity(self, _: EmptyParams) -> CapacityResult:
        return CapacityResult(
            configured=asdict(self._holds.configured),
            effective=asdict(self._holds.ctx.caps),
            reserved=asdict(self._usage()),
        )

    def admin_status(self, _: EmptyParams) -> AdminStatusResult:
        return AdminStatusResult(
            **self._holds.status(),
            memory_pressure_hold=self._pressure_hold(),
            dispatch_hold=self._dispatch_hold(),
            storage_hold=self._storage_hold(),
        )
