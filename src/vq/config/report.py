"""The effective merged configuration as a report (§9.1): flattened, sourced, redacted.

One implementation for ``vq config show`` and the daemon's startup/reload log lines:

* every value is flattened to a dotted key (``daemon.max_cpus``; a whole profile is one
  ``profile.NAME`` value);
* each key names its source: ``default``, ``site:/etc/vq/config.toml``,
  ``user:<config-root>/config.toml`` or ``option`` (a ``vq daemon start`` flag);
* the human lines (:func:`report_lines`) list a host's lane-only keys
  (:data:`vq.config.hosts.LANE_KEYS`) only for a lane (a host with
  ``scheduler_dialect``): on a plain host they are refused, so never in effect (the
  JSON keeps every key);
* an unset ``default_host`` shows the host in effect
  (:func:`vq.config.host_names.effective_default_host`, as ``vq hosts`` prints it);
* secrets are never shown: a secret key (:data:`SECRET_KEYS`) holding a reference
  (``env:``, ``file:``, ``credential:``) is shown as the reference, never resolved; a
  literal value is reduced to its scheme and host.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from vq.config.settings import Settings

__all__ = [
    "SECRET_KEYS",
    "UNSET_MEANS",
    "effective_config",
    "effective_values",
    "flatten",
    "redact",
    "report_lines",
]

#: Configuration keys whose value is a secret or a reference to one (§7.4).
SECRET_KEYS = frozenset({"notifications.webhook_url"})
#: Prefixes of a secret reference (see :mod:`vq.config.secrets`).
REFERENCE_PREFIXES = ("env:", "file:", "credential:")


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys for nested tables; a profile stays one value."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and not name.startswith("profile."):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def redact(key: str, value: Any) -> Any:
    """``value`` safe to print: a secret key keeps a reference, loses a literal."""
    if key not in SECRET_KEYS or not isinstance(value, str) or not value:
        return value
    if value.startswith(REFERENCE_PREFIXES):
        return value  # a reference, not the secret
    parts = urlsplit(value)
    return f"{parts.scheme}://{parts.hostname or '?'}/…(redacted)"


def effective_config(
    settings: Settings,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """(redacted flat settings, the source of each key)."""
    from vq.config.settings import config_layers

    dumped = settings.model_dump(mode="json")
    dumped["profile"] = {
        name: {k: v for k, v in values.items() if v is not None}
        for name, values in dumped["profile"].items()
    }
    effective = flatten(dumped)
    sources = dict.fromkeys(effective, "default")
    layers = [*config_layers(env), *([("option", dict(overrides))] if overrides else [])]
    for source, data in layers:
        for key in flatten(data):
            for known in effective:
                if known == key or known.startswith(key + "."):
                    sources[known] = source
    return {key: redact(key, value) for key, value in effective.items()}, sources


#: What an unset key means, for keys whose unset value is not itself the behaviour.
UNSET_MEANS = {
    "daemon.max_jobs": "unlimited",
    "daemon.default_job_mem_mb": "none (a job without --mem-mb reserves 0 MB)",
    "default_packing": "none (vq pack plan needs --profile)",
    "multi_user.privilege_drop": "none (must be chosen to enable multi-user mode)",
    "quotas.default_max_pending_jobs": "unlimited",
    "quotas.default_max_concurrent_cpus": "unlimited",
}


def effective_values(settings: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Each key's value in effect: unset caps become what the daemon detects on this host
    (``max_cpus``: logical CPUs, ``max_mem_mb``: physical memory) and the keys of
    :data:`UNSET_MEANS` say what unset means; the list names the detected keys."""
    from vq.config.host_names import effective_default_host
    from vq.config.settings import host_logical_cpus, host_memory_mb

    detect = {"daemon.max_cpus": host_logical_cpus, "daemon.max_mem_mb": host_memory_mb}
    resolved = dict(settings)
    detected = []
    for key, value in settings.items():
        if value is not None:
            continue
        if key in detect and (found := detect[key]()) is not None:
            resolved[key] = found
            detected.append(key)
        elif key in UNSET_MEANS:
            resolved[key] = UNSET_MEANS[key]
        elif key == "default_host":
            resolved[key] = f"{effective_default_host(None)} (this queue)"
    return resolved, sorted(detected)


def _lane_only_on_a_plain_host(key: str, settings: Mapping[str, Any]) -> bool:
    """``hosts.NAME.<lane key>[...]`` of a host without ``scheduler_dialect``."""
    from vq.config.hosts import LANE_KEYS

    parts = key.split(".")
    if len(parts) < 3 or parts[0] != "hosts" or parts[2] not in LANE_KEYS:
        return False
    return settings.get(f"hosts.{parts[1]}.scheduler_dialect") is None


def report_lines(
    settings: Settings,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> list[str]:
    """``key = value  (source)`` per key, sorted: what ``vq config show`` prints. Unset
    values show what is in effect: ``daemon.max_cpus = 2  (detected)``,
    ``daemon.max_jobs = unlimited  (default)``, ``default_host = localhost (this queue)
    (default)`` (:func:`effective_values`). A plain host's lane-only keys are left out."""
    values, sources = effective_config(settings, env, overrides)
    resolved, detected = effective_values(values)
    lines = []
    for key in sorted(values):
        if _lane_only_on_a_plain_host(key, values):
            continue
        value, source = resolved[key], sources[key]
        if key in detected:
            lines.append(f"{key} = {value}  (detected)")
        elif values[key] is None and isinstance(value, str):
            lines.append(f"{key} = {value}  ({source})")
        elif isinstance(value, bool):  # as TOML writes it
            lines.append(f"{key} = {str(value).lower()}  ({source})")
        else:
            lines.append(f"{key} = {value!r}  ({source})")
    return lines
