"""A scoped token's submit limits and daily quota (§10.4), for ``POST /api/v1/jobs``.

* :func:`check_submit_allowed` — a token limited to profiles/programs submits only those
  (403 otherwise);
* :func:`charge_submission` — counts a new job against the token's ``max_jobs_per_day``
  (429 with ``Retry-After`` when over), once per idempotency key and UTC day;
* :func:`refund_submission` — gives that charge back when the submit was then refused
  (bad input, unknown dependency...), so only jobs that exist are counted.

Counts live in ``<config-root>/web-token-usage.json`` (0600), read and written under
its flock, so concurrent submits (threads or processes) never exceed a quota. All three
are no-ops for principals that are not scoped tokens. Stdlib only, except the HTTP error
class imported where a refusal is raised.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypedDict

from vq.web.auth._files import locked, read_json_private, write_json_private
from vq.web.auth.principal import Principal
from vq.web.auth.scoped import _utc, list_tokens

__all__ = [
    "USAGE_FILE",
    "charge_submission",
    "charge_upload",
    "check_submit_allowed",
    "check_within_profile",
    "refund_submission",
    "refund_upload",
    "seconds_to_utc_midnight",
    "upload_bytes_left",
    "upload_quota_error",
    "usage_today",
]

USAGE_FILE = "web-token-usage.json"


def seconds_to_utc_midnight(now: datetime) -> int:
    """Whole seconds (at least 1) until the next UTC day begins: the Retry-After value."""
    now = _utc(now)
    midnight = datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
    return max(1, math.ceil((midnight - now).total_seconds()))


def _usage_path(config_root: Path) -> Path:
    return config_root / USAGE_FILE


def usage_today(config_root: Path, token_id: str, now: datetime) -> int:
    """Jobs charged to ``token_id`` in the current UTC day."""
    data = read_json_private(_usage_path(config_root), "agent token usage") or {}
    entry = data.get("days", {}).get(token_id) if isinstance(data, dict) else None
    if not isinstance(entry, dict) or entry.get("day") != _utc(now).date().isoformat():
        return 0
    count = entry.get("count")
    return count if isinstance(count, int) else 0


class DayEntry(TypedDict, total=False):
    """One token's usage of one UTC day in the usage file (the file may have been
    edited: each value's type is checked when read)."""

    day: str
    count: int
    keys: list[str]
    upload_bytes: int


def _day_entry(data: Any, token_id: str, day: str) -> tuple[dict[str, DayEntry], DayEntry]:
    """``(days, entry)``: every token's records and this token's for ``day`` (a fresh dict
    when it is stale or absent)."""
    found = data.get("days") if isinstance(data, dict) else None
    days: dict[str, DayEntry] = found if isinstance(found, dict) else {}
    entry = days.get(token_id)
    kept = isinstance(entry, dict) and entry.get("day") == day
    return days, DayEntry(**entry) if kept and entry is not None else {"day": day}


def _uploaded(entry: DayEntry) -> int:
    value = entry.get("upload_bytes", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _entry(data: Any, token_id: str, day: str) -> tuple[dict[str, DayEntry], int, list[str]]:
    """``(days, used, keys)`` of one token's usage record for ``day`` (fresh if stale)."""
    days, entry = _day_entry(data, token_id, day)
    used = entry.get("count", 0)
    used = used if isinstance(used, int) else 0
    keys = entry.get("keys", [])
    keys = [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []
    return days, used, keys


def charge_submission(
    config_root: Path,
    principal: Principal,
    now: datetime,
    count: int = 1,
    *,
    key_hash: str | None = None,
) -> bool:
    """Count ``count`` new jobs against a scoped token's daily quota, or refuse them.

    Call it from ``POST /api/v1/jobs`` after the request validated (and after
    :func:`check_submit_allowed`), just before the job is written; if the submit is then
    refused, :func:`refund_submission` gives the charge back. Returns whether this call
    charged (False: not a scoped token, or the key was charged already). Days are UTC
    days; the count resets at 00:00 UTC. The read-count-write holds the flock of
    ``web-token-usage.json``, so concurrent submissions never exceed the quota.

    Raises ``ApiError(429, "rate-limited")`` with a ``Retry-After`` header (seconds until
    the next UTC midnight) when the token's ``max_jobs_per_day`` would be exceeded, and
    ``ApiError(401)`` if the token was revoked meanwhile. No-op for any principal that is
    not a scoped token. ``now`` should be timezone-aware (naive means UTC).

    ``key_hash`` (the submit's idempotency key hash) makes the charge once per key and
    day: the charged keys are recorded with the count under the same lock, so concurrent
    first submits of one key (which make one job) are charged once.
    """
    if principal.kind != "scoped_token" or principal.token_id is None:
        return False
    from vq.web.errors import ApiError

    now = _utc(now)
    token = next((t for t in list_tokens(config_root) if t.id == principal.token_id), None)
    if token is None or token.state(now) != "active":
        raise ApiError(401, "unauthorized", "the bearer token is no longer valid")
    day = now.date().isoformat()
    path = _usage_path(config_root)
    with locked(path):
        data = read_json_private(path, "agent token usage") or {}
        days, used, keys = _entry(data, token.id, day)
        charged = key_hash[:32] if key_hash is not None else None
        if charged is not None and charged in keys:
            return False  # this key was charged already (a concurrent or repeated submit)
        limit = token.max_jobs_per_day
        if limit is not None and used + count > limit:
            retry = seconds_to_utc_midnight(now)
            raise ApiError(
                429,
                "rate-limited",
                f"agent token {token.name!r} reached its quota of {limit} jobs per day",
                hint=f"the quota resets at 00:00 UTC (in {retry} s)",
                headers={"Retry-After": str(retry)},
            )
        if charged is not None:
            keys.append(charged)
        days[token.id] = {**_day_entry(data, token.id, day)[1], "count": used + count, "keys": keys}
        write_json_private(path, {"version": 1, "days": days})
    return True


def refund_submission(
    config_root: Path, principal: Principal, now: datetime, *, key_hash: str | None = None
) -> None:
    """Undo one :func:`charge_submission` of ``principal`` today (a refused submit).

    Only call it after a charge that returned True, when the submit then failed in a way
    that created no job. The count never goes below zero; a refund after UTC midnight is
    a no-op (the charge belonged to a day that is over).
    """
    if principal.kind != "scoped_token" or principal.token_id is None:
        return
    day = _utc(now).date().isoformat()
    path = _usage_path(config_root)
    with locked(path):
        data = read_json_private(path, "agent token usage") or {}
        days, used, keys = _entry(data, principal.token_id, day)
        if used == 0:
            return
        charged = key_hash[:32] if key_hash is not None else None
        if charged is not None:
            if charged not in keys:
                return
            keys.remove(charged)
        previous = _day_entry(data, principal.token_id, day)[1]
        days[principal.token_id] = {**previous, "count": used - 1, "keys": keys}
        write_json_private(path, {"version": 1, "days": days})


def check_submit_allowed(principal: Principal, profile: str | None, program: str | None) -> None:
    """Refuse (``ApiError(403, "forbidden")``) a submission outside a token's limits.

    A scoped token created with ``--profiles`` must name one of them as the job's profile;
    one created with ``--programs`` must name one of those programs. Tokens without such
    limits, sessions and the admin token pass. Call it from ``POST /api/v1/jobs`` with the
    request's ``profile`` and ``program`` (None when the request has none), before
    :func:`charge_submission`.
    """
    if principal.kind != "scoped_token":
        return
    from vq.web.errors import ApiError

    for what, allowed, asked in (
        ("profile", principal.profiles, profile),
        ("program", principal.programs, program),
    ):
        if allowed and asked not in allowed:
            named = ", ".join(sorted(allowed))
            raise ApiError(
                403,
                "forbidden",
                f"token {principal.name!r} may submit only with {what} {named}"
                + ("" if asked is None else f" (not {asked[:64]!r})"),
                hint=f"set the job's {what} to one of: {named}",
            )


#: Submit fields a profile-scoped token may not raise above its profile's value, and the
#: value that stands in when the profile sets none (None: no ceiling, the default is
#: "no limit", which any limit only narrows).
_CEILINGS: dict[str, int | None] = {
    "cpus": 1,
    "mem_mb": None,
    "wall_time_seconds": None,
    "priority": 0,
}


def check_within_profile(
    principal: Principal, fields: dict[str, Any], profile: dict[str, Any] | None
) -> None:
    """Refuse (``ApiError(403, "forbidden")`` naming the field) a submission by a token
    limited to profiles that asks for more ``cpus``, ``mem_mb``, ``wall_time_seconds`` or
    ``priority`` than its profile (``profile``: that profile's settings as a dict). No-op
    for principals without a profile limit."""
    if principal.kind != "scoped_token" or not principal.profiles:
        return
    from vq.web.errors import ApiError

    for field, fallback in _CEILINGS.items():
        asked = fields.get(field)
        ceiling = (profile or {}).get(field)
        ceiling = fallback if ceiling is None else ceiling
        if isinstance(asked, int) and ceiling is not None and asked > ceiling:
            raise ApiError(
                403,
                "forbidden",
                f"token {principal.name!r} may not raise {field} above its profile's "
                f"{ceiling} (asked {asked})",
                hint=f"leave {field} out to take the profile's value",
            )


def upload_bytes_left(config_root: Path, principal: Principal, now: datetime) -> int | None:
    """Upload bytes a scoped token may still send today (None: no quota)."""
    if principal.kind != "scoped_token" or principal.token_id is None:
        return None
    token = next((t for t in list_tokens(config_root) if t.id == principal.token_id), None)
    if token is None or token.max_upload_bytes_per_day is None:
        return None
    data = read_json_private(_usage_path(config_root), "agent token usage") or {}
    _, entry = _day_entry(data, token.id, _utc(now).date().isoformat())
    return max(0, token.max_upload_bytes_per_day - _uploaded(entry))


def upload_quota_error(principal: Principal, left: int, now: datetime) -> Exception:
    """The 429 of an upload over a token's daily byte quota (``left``: bytes left today)."""
    from vq.web.errors import ApiError

    retry = seconds_to_utc_midnight(now)
    return ApiError(
        429,
        "rate-limited",
        f"the upload is over the daily upload quota of agent token {principal.name!r} "
        f"({left} bytes left today; --max-upload-bytes-per-day)",
        hint=f"the quota resets at 00:00 UTC (in {retry} s)",
        headers={"Retry-After": str(retry)},
    )


def charge_upload(config_root: Path, principal: Principal, now: datetime, size: int) -> None:
    """Count ``size`` upload bytes against a scoped token's daily quota, or refuse them
    (429 with ``Retry-After``) when that would exceed ``max_upload_bytes_per_day``. Under
    the usage file's flock, so concurrent uploads never exceed it together."""
    if principal.kind != "scoped_token" or principal.token_id is None:
        return
    token = next((t for t in list_tokens(config_root) if t.id == principal.token_id), None)
    if token is None or token.max_upload_bytes_per_day is None:
        return
    now = _utc(now)
    day = now.date().isoformat()
    path = _usage_path(config_root)
    with locked(path):
        data = read_json_private(path, "agent token usage") or {}
        days, entry = _day_entry(data, token.id, day)
        if _uploaded(entry) + size > token.max_upload_bytes_per_day:
            left = max(0, token.max_upload_bytes_per_day - _uploaded(entry))
            raise upload_quota_error(principal, left, now)
        days[token.id] = {**entry, "upload_bytes": _uploaded(entry) + size}
        write_json_private(path, {"version": 1, "days": days})


def refund_upload(config_root: Path, principal: Principal, now: datetime, size: int) -> None:
    """Give back ``size`` bytes :func:`charge_upload` counted today, when what they were
    for was refused before anything was written (an inline submit that failed)."""
    if principal.kind != "scoped_token" or principal.token_id is None or size <= 0:
        return
    day = _utc(now).date().isoformat()
    path = _usage_path(config_root)
    with locked(path):
        data = read_json_private(path, "agent token usage") or {}
        days, entry = _day_entry(data, principal.token_id, day)
        if principal.token_id not in days:
            return
        days[principal.token_id] = {**entry, "upload_bytes": max(0, _uploaded(entry) - size)}
        write_json_private(path, {"version": 1, "days": days})
