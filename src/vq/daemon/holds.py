"""The daemon's operator holds: drain, throttle, and a config hold (§4.3).

The config hold: a configuration file that changed and is invalid, or a file the daemon
loaded that has disappeared (a missing file is never read as "defaults"), holds dispatch
until a valid file is back or ``vq daemon reload`` accepts what is there now (a reload
of a deleted file runs on the defaults, by the operator's choice).

Thread ownership, kept in code: the holds, the effective caps (``ctx.caps``) and the
reloadable settings are written only on the main loop. RPC threads change them through
:meth:`Holds.drain`, :meth:`Holds.set_throttle` and :meth:`Holds.reload`, which persist
first (so a restart keeps them) and then run the change on the loop and wait for its
reply (:class:`LoopCalls`). Readers on other threads see immutable values (frozen
dataclasses, swapped whole), never a half-made change.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

from vq.config.hosts import HostSettings, lanes_of
from vq.config.settings import SITE_CONFIG, Settings, load_settings
from vq.domain.admission import Caps
from vq.domain.spec import utcnow
from vq.errors import ConfigError, VqError
from vq.executors.scheduler import LaneChanges
from vq.packing.cases.array_submit import pack_configuration
from vq.paths import resolve_config_root
from vq.services.context import ServiceContext
from vq.services.control import (
    PAUSED_BY_DRAIN,
    DrainState,
    Throttle,
    effective_caps,
    read_drain,
    read_throttle,
    write_capacity,
    write_drain,
    write_throttle,
)
from vq.services.pause import pause_job, resume_job

from .config_log import log_effective_config

__all__ = ["PAUSED_BY_DRAIN", "Holds", "LoopCalls"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long an RPC thread waits for the loop to apply its change.
LOOP_REPLY_SECONDS = 30.0


class LoopCalls:
    """Run a function on the loop thread and wait for its result (a call with a reply).

    ``call_soon`` queues work for the loop; until :meth:`loop_started` is called (from
    the loop thread) there is no loop yet, and calls run inline on the caller's thread.
    """

    def __init__(self, call_soon: Callable[[Callable[[], None]], None] | None = None) -> None:
        self._call_soon = call_soon
        self._loop: threading.Thread | None = None

    def loop_started(self) -> None:
        self._loop = threading.current_thread()

    def run(self, fn: Callable[[], T]) -> T:
        loop = self._loop
        if self._call_soon is None or loop is None or threading.current_thread() is loop:
            return fn()
        future: Future[T] = Future()

        def call() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

        self._call_soon(call)
        return future.result(timeout=LOOP_REPLY_SECONDS)

    def post(self, fn: Callable[[], None]) -> None:
        """Queue ``fn`` for the loop without waiting for it (inline before the loop
        exists, or on the loop itself)."""
        loop = self._loop
        if self._call_soon is None or loop is None or threading.current_thread() is loop:
            fn()
            return
        self._call_soon(fn)

    def ask(self, start: Callable[[Callable[[object], None]], None], timeout: float) -> object:
        """Run ``start(reply)`` on the loop and wait up to ``timeout`` seconds for the
        ``reply`` it (or a worker answer applied on the loop later) gives; an exception
        given as the reply, or raised by ``start``, is raised here. Raises
        :class:`TimeoutError` when no reply came in time."""
        answer: Future[object] = Future()

        def reply(value: object) -> None:
            if not answer.done():
                answer.set_result(value)

        self.run(lambda: start(reply))
        result = answer.result(timeout=timeout)
        if isinstance(result, BaseException):
            raise result
        return result


class Holds:
    def __init__(
        self,
        ctx: ServiceContext,
        settings: Settings,
        overrides: Mapping[str, Any] | None,
        running: Callable[[], list[str]],
        loop: LoopCalls | None = None,
        on_hosts: Callable[[dict[str, HostSettings]], LaneChanges] | None = None,
    ) -> None:
        self.ctx = ctx
        #: Applies a reloaded ``[hosts]`` table to the scheduler lanes (on the loop).
        self._on_hosts = on_hosts
        self.loop = loop or LoopCalls()
        self.settings = settings
        self._overrides = overrides
        self._running = running
        self.configured: Caps = settings.daemon.caps()
        self.drain_state: DrainState = read_drain(ctx.paths)
        self.throttle: Throttle = read_throttle(ctx.paths)
        self.config_error: str | None = None
        self._config_stamp = self._stamp()
        #: The config files the settings in force were read from (a missing one holds).
        self._loaded_files = [path for path, mtime in self._config_stamp if mtime is not None]
        self.config_missing: list[str] = []
        self.apply_caps()

    @property
    def overrides(self) -> Mapping[str, Any] | None:
        """The ``vq daemon start`` options layered over the files."""
        return self._overrides

    # --- what dispatch sees ------------------------------------------------------------
    @property
    def holding(self) -> bool:
        return self.drain_state.active or self.config_error is not None

    def hold_reason(self) -> str | None:
        """Why these holds stop dispatch, in one line; None when they do not."""
        if self.config_missing:
            return (
                f"dispatch held: the configuration file {self.config_missing[0]} the daemon "
                "loaded is missing (restore it, or `vq daemon reload` to run on what is there)"
            )
        if self.config_error is not None:
            return f"dispatch held: the configuration is invalid ({self.config_error})"
        if self.drain_state.active:
            why = f": {self.drain_state.reason}" if self.drain_state.reason else ""
            return f"dispatch held: the daemon is draining{why} (`vq daemon undrain` ends it)"
        return None

    def apply_caps(self) -> Caps:
        """Recompute the effective caps (configured, lowered by a live throttle)."""
        caps = effective_caps(self.configured, self.throttle, utcnow())
        if caps != self.ctx.caps or self.configured != self.ctx.base_caps:
            self.ctx.caps, self.ctx.base_caps = caps, self.configured
            write_capacity(self.ctx.paths, caps, os.getpid(), utcnow(), base=self.configured)
        return caps

    def tick(self) -> None:
        """Once a loop pass: expire throttles, notice config files that changed."""
        if self.throttle.active(utcnow()) is False and (
            self.throttle.max_jobs is not None or self.throttle.max_cpus is not None
        ):
            log.info("throttle expired; back to the configured caps")
            self.throttle = Throttle()
            write_throttle(self.ctx.paths, self.throttle)
        self.apply_caps()
        stamp = self._stamp()
        if stamp != self._config_stamp:
            self._config_stamp = stamp
            self._validate_files()

    def _stamp(self) -> tuple[tuple[str, int | None], ...]:
        files = (SITE_CONFIG, resolve_config_root() / "config.toml")
        out: list[tuple[str, int | None]] = []
        for path in files:
            try:
                out.append((str(path), Path(path).stat().st_mtime_ns))
            except OSError:
                out.append((str(path), None))
        return tuple(out)

    def _validate_files(self, *, accept_missing: bool = False) -> Settings | None:
        """The settings the files give now, or None (and the hold) when a file is invalid
        or, unless ``accept_missing`` (a reload), a loaded file is gone."""
        missing = [path for path in self._loaded_files if not Path(path).exists()]
        if missing and not accept_missing:
            if not self.config_missing:
                log.error(
                    "config file %s disappeared; dispatch held until it is restored or reloaded",
                    missing[0],
                )
            self.config_missing = missing
            self.config_error = f"the configuration file {missing[0]} is missing"
            return None
        try:
            settings = load_settings(overrides=self._overrides)
        except ConfigError as exc:
            if self.config_error is None or self.config_missing:
                log.error("config became invalid; dispatch held until it is fixed: %s", exc.message)
            self.config_missing = []
            self.config_error = self.ctx.config_error = exc.message
            return None
        if self.config_error is not None:
            log.info("config is valid again; dispatch resumes")
        self.config_error = self.ctx.config_error = None
        self.config_missing = []
        return settings

    # --- control calls ------------------------------------------------------------------
    def reload(self) -> dict[str, Any]:
        """Validate and apply the config files (on the loop); the change report."""
        return self.loop.run(self._reload)

    def _reload(self) -> dict[str, Any]:
        settings = self._validate_files(accept_missing=True)
        if settings is None:
            raise ConfigError(
                f"the new configuration is invalid; the daemon keeps its last good one and "
                f"holds dispatch: {self.config_error}",
                hint="fix the file and run `vq daemon reload` again",
            )
        changed = _changed_keys(self.settings.model_dump(), settings.model_dump())
        restart = [key for key in changed if key.startswith("notifications.")]
        self.settings = settings
        self._config_stamp = self._stamp()
        self._loaded_files = [path for path, mtime in self._config_stamp if mtime is not None]
        log_effective_config(settings, self._overrides, "reload")
        self.ctx.profiles = settings.profile
        self.ctx.programs = settings.programs
        # packing profiles: what `vq submit --pack` is checked against and what the
        # lanes build new allocations on (one already built keeps its profile)
        self.ctx.packing, self.ctx.pack_lanes = pack_configuration(settings)
        self.ctx.lanes = lanes_of(settings.hosts)  # what a lane submit resolves on
        self.configured = settings.daemon.caps()
        caps = self.apply_caps()
        report: dict[str, Any] = {
            "changed": changed,
            "applied": [key for key in changed if key not in restart],
            "needs_restart": restart,
            "caps": asdict(caps),
        }
        if self._on_hosts is not None:
            lanes = self._on_hosts(settings.hosts)
            report["lanes"] = asdict(lanes)
            touched = lanes.added + lanes.changed + lanes.removed
            if touched:
                log.info(
                    "reload: scheduler lanes added %s, changed %s, removed %s",
                    lanes.added or "-",
                    lanes.changed or "-",
                    lanes.removed or "-",
                )
        return report

    def drain(self, state: DrainState) -> None:
        write_drain(self.ctx.paths, state)

        def apply() -> None:
            self.drain_state = state

        self.loop.run(apply)

    def pause_for_drain(self) -> list[str]:
        """On the loop: a full drain pauses the running local jobs."""
        paused = []
        for job_id in self._running():
            try:
                if pause_job(self.ctx, job_id, by=PAUSED_BY_DRAIN).changed:
                    paused.append(job_id)
            except VqError as exc:
                log.info("job %s not paused for the drain: %s", job_id, exc.message)
        return paused

    def resume_after_drain(self, job_ids: list[str]) -> None:
        for job_id in job_ids:
            try:
                resume_job(self.ctx, job_id, only_paused_by=PAUSED_BY_DRAIN)
            except VqError as exc:
                log.info("job %s not resumed after the drain: %s", job_id, exc.message)

    def set_throttle(self, throttle: Throttle) -> Caps:
        write_throttle(self.ctx.paths, throttle)

        def apply() -> Caps:
            self.throttle = throttle
            return self.apply_caps()

        return self.loop.run(apply)

    def status(self) -> dict[str, Any]:
        return {
            "drain": asdict(self.drain_state),
            "throttle": asdict(self.throttle) if self.throttle.active(utcnow()) else None,
            "config_error": self.config_error,
            "config_missing": list(self.config_missing),
            "configured_caps": asdict(self.configured),
            "effective_caps": asdict(self.ctx.caps),
            "holding_dispatch": self.holding,
        }


def _changed_keys(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The dotted keys whose values differ: ``section.key`` inside a table, the bare name
    for a top-level value (``default_packing``)."""
    changed: set[str] = set()
    for name in old.keys() | new.keys():
        before, after = old.get(name), new.get(name)
        if isinstance(before, dict) or isinstance(after, dict):
            before = before if isinstance(before, dict) else {}
            after = after if isinstance(after, dict) else {}
            changed.update(
                f"{name}.{key}"
                for key in before.keys() | after.keys()
                if before.get(key) != after.get(key)
            )
        elif before != after:
            changed.add(name)
    return sorted(changed)
