"""Host health: ``<state-root>/hosts/<name>.json``, never job state (§2.2, §6.3).

A transport failure changes only this file: it never marks a job failed. Fields:

- ``status``: ``ok`` (the last call got an answer), ``slow`` (the host answered but a
  scheduler command on it did not finish within its limit: a hung ``squeue``, a
  controller under load; the lane backs off, the host is not lost), ``unreachable`` (a
  transient failure: no connection, a timeout, a dropped call), ``invalid`` (the host answered but
  cannot be trusted or used: unknown or changed host key, refused credentials, no
  working ``vq``, a newer spec version), or ``down`` (administratively marked).
- ``last_ok_at`` / ``last_error`` / ``consecutive_failures`` / ``rtt_ms`` /
  ``vq_version`` (the remote ``vq --version``, when a probe read it).
- ``daemon``: whether the host's vq daemon answered when it was last checked (``running``,
  ``not_running``: the host answers over SSH but its queue has no daemon, so nothing it
  holds starts; null when never checked). ``vq hosts --probe`` checks it; a delegated
  submit that the host reports as waiting for a daemon records ``not_running``.
- ``last_attempt_at`` and ``next_probe_at``: probes back off 2, 4, 8 … 300 s after
  consecutive failures (:func:`backoff_seconds`).

``last_error`` and ``vq_version`` hold words a remote chose: they pass through
:func:`remote_text` (control characters escaped, length capped) when written and when
read, so no view of a host's health (``vq hosts``, ``--json``, the console) can carry an
escape sequence from it. :func:`remote_text` is also what every message quoting a
remote's words uses.

Writes are atomic but not fsync'd: this is an observation, rebuilt by the next call.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal, TypedDict

from vq._fs import atomic_write_json
from vq.domain.text import escape_controls
from vq.errors import TransportError
from vq.paths import StateLayout

__all__ = [
    "DaemonStatus",
    "HostHealth",
    "HostStatus",
    "backoff_seconds",
    "health_path",
    "mark_down",
    "read_health",
    "record_daemon",
    "record_failure",
    "record_ok",
    "record_slow",
    "remote_text",
]

HostStatus = Literal["ok", "slow", "unreachable", "invalid", "down", "unknown"]
#: Whether the host's daemon answered when last checked (null: never checked).
DaemonStatus = Literal["running", "not_running"]

_BACKOFF_FIRST_S = 2.0
_BACKOFF_MAX_S = 300.0
#: The longest piece of a remote's own words kept in a message or a health record.
_TEXT_LIMIT = 500


def remote_text(text: str) -> str:
    """A remote's own words as this side shows them: control and invisible formatting
    characters escaped (:func:`vq.domain.text.escape_controls`), at most
    :data:`_TEXT_LIMIT` characters. Idempotent."""
    shown = escape_controls(text)
    return shown if len(shown) <= _TEXT_LIMIT else shown[: _TEXT_LIMIT - 1] + "…"


def backoff_seconds(consecutive_failures: int) -> float:
    """The probe delay after ``consecutive_failures`` failures: 0, 2, 4, 8 … capped at 300."""
    if consecutive_failures <= 0:
        return 0.0
    return float(min(_BACKOFF_FIRST_S * 2.0 ** (consecutive_failures - 1), _BACKOFF_MAX_S))


class HealthJSON(TypedDict):
    """A :class:`HostHealth` as ``hosts/<name>.json`` and ``vq hosts --json`` hold it."""

    name: str
    status: HostStatus
    last_ok_at: str | None
    last_error: str | None
    last_error_reference: str | None
    consecutive_failures: int
    rtt_ms: float | None
    vq_version: str | None
    last_attempt_at: str | None
    next_probe_at: str | None
    daemon: DaemonStatus | None


@dataclass
class HostHealth:
    """The last known health of one configured host (see the module docstring)."""

    name: str
    status: HostStatus = "unknown"
    last_ok_at: str | None = None
    last_error: str | None = None
    last_error_reference: str | None = None
    consecutive_failures: int = 0
    rtt_ms: float | None = None
    vq_version: str | None = None
    last_attempt_at: str | None = None
    next_probe_at: str | None = None
    daemon: DaemonStatus | None = None

    def as_dict(self) -> HealthJSON:
        return {
            "name": self.name,
            "status": self.status,
            "last_ok_at": self.last_ok_at,
            "last_error": self.last_error,
            "last_error_reference": self.last_error_reference,
            "consecutive_failures": self.consecutive_failures,
            "rtt_ms": self.rtt_ms,
            "vq_version": self.vq_version,
            "last_attempt_at": self.last_attempt_at,
            "next_probe_at": self.next_probe_at,
            "daemon": self.daemon,
        }

    @property
    def shown_status(self) -> str:
        """The STATUS ``vq hosts`` prints: ``status``, or ``ssh ok, no daemon`` when the
        host answers but its daemon did not."""
        if self.status == "ok" and self.daemon == "not_running":
            return "ssh ok, no daemon"
        return self.status

    def probe_due(self, now: datetime) -> bool:
        """Whether the backoff after the last failure has elapsed."""
        if self.next_probe_at is None:
            return True
        with contextlib.suppress(ValueError):
            return now >= datetime.fromisoformat(self.next_probe_at)
        return True


def health_path(state_root: Path, name: str) -> Path:
    """``<state-root>/hosts/<name>.json`` (``name`` is a validated host name)."""
    return StateLayout(state_root).host(name)


def read_health(state_root: Path, name: str) -> HostHealth:
    """The stored health of ``name``; a missing or unreadable file is ``unknown``."""
    try:
        raw = json.loads(health_path(state_root, name).read_text())
    except (OSError, ValueError):
        return HostHealth(name)
    if not isinstance(raw, dict):
        return HostHealth(name)
    known = {key: raw[key] for key in HostHealth.__dataclass_fields__ if key in raw}
    known["name"] = name
    try:
        if known.get("daemon") not in (None, "running", "not_running"):
            known["daemon"] = None
        return _shown(HostHealth(**known))
    except TypeError:
        return HostHealth(name)


def _shown(health: HostHealth) -> HostHealth:
    """``health`` with the remote's words in it made safe to show (:func:`remote_text`)."""
    for key in ("last_error", "vq_version"):
        value = getattr(health, key)
        if value is not None:
            setattr(health, key, remote_text(str(value)))
    return health


def _write(state_root: Path, health: HostHealth) -> None:
    path = health_path(state_root, health.name)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write_json(path, _shown(health).as_dict(), durable=False)
    except OSError:
        pass  # an observation: failing to record it must not fail the call itself


def _now() -> datetime:
    return datetime.now(UTC)


def record_ok(
    state_root: Path, name: str, rtt_ms: float, *, vq_version: str | None = None
) -> HostHealth:
    """The host answered: ``ok``, failures reset, round-trip time recorded."""
    health = read_health(state_root, name)
    now = _now().isoformat()
    health.status, health.last_ok_at, health.last_attempt_at = "ok", now, now
    health.consecutive_failures, health.next_probe_at = 0, None
    health.rtt_ms = round(rtt_ms, 1)
    health.last_error = health.last_error_reference = None
    if vq_version is not None:
        health.vq_version = vq_version
    _write(state_root, health)
    return health


def record_slow(state_root: Path, name: str, detail: str, rtt_ms: float) -> HostHealth:
    """The host answered, but a scheduler command on it ran out of time: ``slow``, with
    what timed out as ``last_error``. Not a failure of the host: no probe backoff, and
    ``last_ok_at`` (the host's last answer) moves on."""
    health = read_health(state_root, name)
    now = _now().isoformat()
    health.status, health.last_ok_at, health.last_attempt_at = "slow", now, now
    health.consecutive_failures, health.next_probe_at = 0, None
    health.rtt_ms = round(rtt_ms, 1)
    health.last_error, health.last_error_reference = remote_text(detail), "scheduler-slow"
    _write(state_root, health)
    return health


def record_failure(
    state_root: Path, name: str, error: TransportError | str, *, invalid: bool | None = None
) -> HostHealth:
    """A call failed: ``unreachable`` (transient) or ``invalid``; backoff advanced."""
    health = read_health(state_root, name)
    now = _now()
    if isinstance(error, TransportError):
        message, reference = error.message, error.reference
        bad = (not error.transient) if invalid is None else invalid
    else:
        message, reference, bad = error, "invalid-host", True if invalid is None else invalid
    health.status = "invalid" if bad else "unreachable"
    health.last_error, health.last_error_reference = message, reference
    health.consecutive_failures += 1
    health.last_attempt_at = now.isoformat()
    delay = backoff_seconds(health.consecutive_failures)
    health.next_probe_at = (now + timedelta(seconds=delay)).isoformat()
    _write(state_root, health)
    return health


def mark_down(state_root: Path, name: str) -> HostHealth:
    """The configuration marks the host down: recorded, nothing contacted."""
    health = read_health(state_root, name)
    if health.status != "down":
        health.status = "down"
        _write(state_root, health)
    return health


def record_daemon(state_root: Path, name: str, daemon: DaemonStatus) -> HostHealth:
    """What the host said of its daemon (``running`` or ``not_running``); the rest of the
    health is left as it is."""
    health = read_health(state_root, name)
    health.daemon = daemon
    _write(state_root, health)
    return health
