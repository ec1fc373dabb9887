"""RPC methods of the control plane (§2.1): reload, drain, undrain, throttle, capacity,
admin_status. Every state-changing call is appended to ``rpc-audit.jsonl`` with the
peer's uid (best-effort), whether it succeeded or not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from vq.domain.spec import utcnow
from vq.errors import InvalidInput, VqError
from vq.services.control import DrainState, Throttle, audit

from .holds import PAUSED_BY_DRAIN
from .rpc import Method, current_peer

if TYPE_CHECKING:
    from .app import Daemon

__all__ = ["build_control_methods"]


def _audited(daemon: Daemon, name: str, fn: Method) -> Method:
    def wrapper(params: dict[str, Any]) -> Any:
        record: dict[str, Any] = {
            "ts": utcnow().isoformat(),
            "method": name,
            "params": params,
            "peer_uid": current_peer()["uid"],
            "peer_pid": current_peer()["pid"],
        }
        try:
            result = fn(params)
        except VqError as exc:
            audit(daemon.paths, {**record, "outcome": "error", "error": exc.message})
            raise
        audit(daemon.paths, {**record, "outcome": "ok"})
        return result

    return wrapper


def _positive(params: dict[str, Any], key: str) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidInput(f"{key} must be a positive integer")
    return value


def build_control_methods(daemon: Daemon) -> dict[str, Method]:
    holds = daemon.holds
    drained: list[str] = []  # jobs a full drain paused (loop-owned)

    def reload(_: dict[str, Any]) -> dict[str, Any]:
        report = holds.reload()
        settings = holds.settings
        daemon.call_soon(lambda: daemon.watchdog.configure(settings.watchdog))
        daemon.call_soon(lambda: daemon.pressure.configure(settings.watchdog))
        daemon.wake()
        return report

    def drain(params: dict[str, Any]) -> dict[str, Any]:
        mode = params.get("mode", "new")
        if mode not in ("new", "full"):
            raise InvalidInput("mode must be 'new' or 'full'")
        reason = params.get("reason")
        state = DrainState(mode, bool(params.get("reject_submits")), reason, utcnow().isoformat())
        holds.drain(state)
        if mode == "full":
            daemon.call_soon(lambda: drained.extend(holds.pause_for_drain()))
        return asdict(state)

    def undrain(_: dict[str, Any]) -> dict[str, Any]:
        holds.drain(DrainState())

        def resume() -> None:
            holds.resume_after_drain(list(drained))
            drained.clear()

        daemon.call_soon(resume)
        return {"mode": "none", "resumed_paused_by": PAUSED_BY_DRAIN}

    def throttle(params: dict[str, Any]) -> dict[str, Any]:
        if params.get("clear"):
            caps = holds.set_throttle(Throttle())
        else:
            seconds = params.get("seconds")
            if seconds is not None and (not isinstance(seconds, int) or seconds < 1):
                raise InvalidInput("seconds must be a positive integer")
            now = utcnow()
            limits = Throttle(
                _positive(params, "max_jobs"),
                _positive(params, "max_cpus"),
                (now + timedelta(seconds=seconds)).isoformat() if seconds else None,
                now.isoformat(),
            )
            if limits.max_jobs is None and limits.max_cpus is None:
                raise InvalidInput("give max_jobs and/or max_cpus (or clear)")
            caps = holds.set_throttle(limits)
        daemon.wake()
        return {"throttle": holds.status()["throttle"], "effective_caps": asdict(caps)}

    def capacity(_: dict[str, Any]) -> dict[str, Any]:
        return {
            "configured": asdict(holds.configured),
            "effective": asdict(daemon.ctx.caps),
            "reserved": asdict(daemon.supervisor.usage()),
        }

    def admin_status(_: dict[str, Any]) -> dict[str, Any]:
        return {
            **holds.status(),
            "memory_pressure_hold": daemon.pressure.holding,
            "dispatch_hold": daemon.dispatch_hold(),
        }

    mutating: dict[str, Callable[[dict[str, Any]], Any]] = {
        "reload": reload,
        "drain": drain,
        "undrain": undrain,
        "throttle": throttle,
    }
    methods: dict[str, Method] = {name: _audited(daemon, name, fn) for name, fn in mutating.items()}
    methods["capacity"] = capacity
    methods["admin_status"] = admin_status
    return methods
