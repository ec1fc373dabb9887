"""The daemon's method table: every RPC method's name, params model, result model, handler.

The contract (name → params and result model) is :data:`vq.protocol.methods.CONTRACTS`;
:func:`build_routes` pairs each contract with its handler and refuses to build a table
in which a method lacks either. The state-changing control calls (:data:`AUDITED`) are
appended to ``rpc-audit.jsonl`` with the peer's uid, whether they succeeded or not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from vq.domain.spec import utcnow
from vq.errors import VqError
from vq.paths import StatePaths
from vq.protocol.methods import CONTRACTS
from vq.services.control import audit

from .handlers.control import ControlHandlers
from .handlers.health import HealthHandler
from .handlers.info import InfoHandlers
from .handlers.jobs import JobHandlers
from .handlers.reads import ReadHandlers
from .rpc import Handler, Route, current_peer

__all__ = ["AUDITED", "build_routes"]

#: The control calls recorded in ``rpc-audit.jsonl``.
AUDITED = frozenset({"reload", "drain", "undrain", "throttle"})


def _audited(paths: StatePaths, name: str, handler: Handler) -> Handler:
    def wrapper(params: BaseModel) -> BaseModel:
        peer = current_peer()
        record: dict[str, Any] = {
            "ts": utcnow().isoformat(),
            "method": name,
            "params": params.model_dump(mode="json", exclude_unset=True),
            "peer_uid": peer["uid"],
            "peer_pid": peer["pid"],
        }
        try:
            result = handler(params)
        except VqError as exc:
            audit(paths, {**record, "outcome": "error", "error": exc.message})
            raise
        audit(paths, {**record, "outcome": "ok"})
        return result

    return wrapper


def build_routes(
    paths: StatePaths,
    info: InfoHandlers,
    jobs: JobHandlers,
    reads: ReadHandlers,
    control: ControlHandlers,
    health: HealthHandler,
) -> dict[str, Route]:
    """The table served on ``daemon.sock`` (ValueError if it and the contract disagree)."""
    handlers: dict[str, Callable[[Any], BaseModel]] = {
        "ping": info.ping,
        "wake": info.wake,
        "submit": jobs.submit,
        "status": jobs.status,
        "wait_change": reads.wait_change,
        "list": reads.list,
        "kill": jobs.kill,
        "pause": jobs.pause,
        "resume": jobs.resume,
        "resubmit": jobs.resubmit,
        "scheduler_resolve": jobs.scheduler_resolve,
        "reload": control.reload,
        "drain": control.drain,
        "undrain": control.undrain,
        "throttle": control.throttle,
        "capacity": control.capacity,
        "admin_status": control.admin_status,
        "health": health.health,
    }
    if set(handlers) != set(CONTRACTS):
        raise ValueError(f"methods without a handler or contract: {set(handlers) ^ set(CONTRACTS)}")
    return {
        name: Route(
            CONTRACTS[name].params,
            CONTRACTS[name].result,
            _audited(paths, name, handler) if name in AUDITED else handler,
        )
        for name, handler in handlers.items()
    }
