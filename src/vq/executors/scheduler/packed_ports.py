"""What the packed arrays of a lane use of the lane that owns them, as one protocol.

:class:`~.packed.PackedLane` and its parts (:mod:`.packed_state`, :mod:`.packed_submit`,
:mod:`.packed_observe`, :mod:`.packed_recovery`) are typed against :class:`PackHost`,
never against the lane class: the owning :class:`~.lane.SchedulerLane` fills it in with
exactly these members, and the packed parts import nothing of the lane's own modules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from vq.config.hosts import LaneSettings
from vq.domain.dependencies import Lookup
from vq.errors import TransportError

from .ports import LaneContext, LaneLifecycle

__all__ = ["PackHost"]


class PackHost(Protocol):
    """The owning lane, as its packed arrays see it. Every member is used on the daemon
    loop; ``run_on_worker`` runs ``work`` on the lane's worker and ``done`` back on the
    loop with its result (or the exception it raised)."""

    @property
    def name(self) -> str:
        """The lane's name (``[hosts.NAME]``)."""
        ...

    @property
    def settings(self) -> LaneSettings:
        """The lane's settings as configured now."""
        ...

    @property
    def ctx(self) -> LaneContext:
        """The state root, its specs and its clock."""
        ...

    @property
    def lifecycle(self) -> LaneLifecycle:
        """The one lifecycle writer."""
        ...

    @property
    def dependency_state(self) -> Lookup:
        """A job's state by id, for an element's ``--after`` gates."""
        ...

    def monotonic(self) -> float:
        """The loop's clock (deadlines of due steps)."""
        ...

    def take_token(self) -> bool:
        """One scheduler round within the host's token bucket (False: none left now)."""
        ...

    def run_on_worker(self, work: Callable[[], Any], done: Callable[[object], None]) -> None:
        """``work`` on the lane's worker, then ``done(result)`` on the loop."""
        ...

    def host_failed(self, exc: TransportError) -> None:
        """A transport failure reaching the lane's login host: it marks the host."""
        ...
