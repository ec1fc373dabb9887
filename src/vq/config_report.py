"""The effective merged configuration as a report (§9.1): flattened, sourced, redacted.

One implementation for ``vq config show`` and the daemon's startup/reload log lines:

* every value is flattened to a dotted key (``daemon.max_cpus``; a whole profile is one
  ``profile.NAME`` value);
* each key names its source: ``default``, ``site:/etc/vq/config.toml``,
  ``user:<config-root>/config.toml`` or ``option`` (a ``vq daemon start`` flag);
* secrets are never shown: a secret key (:data:`SECRET_KEYS`) holding a reference
  (``env:``, ``file:``, ``credential:``) is shown as the reference, never resolved; a
  literal value is reduced to its scheme and host.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from vq.config import Settings

__all__ = ["SECRET_KEYS", "effective_config", "flatten", "redact", "report_lines"]

#: Configuration keys whose value is a secret or a reference to one (§7.4).
SECRET_KEYS = frozenset({"notifications.webhook_url"})
#: Prefixes of a secret reference (see :mod:`vq.secrets`).
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
    from vq.config import config_layers

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


def report_lines(
    settings: Settings,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> list[str]:
    """``key = value  (source)`` per key, sorted: what ``vq config show`` prints."""
    values, sources = effective_config(settings, env, overrides)
    return [f"{key} = {values[key]!r}  ({sources[key]})" for key in sorted(values)]
