"""``vq config show [--json]`` and ``vq config check FILE``.

``show`` prints the effective merged configuration with the layer each value comes from
(``default``, ``site:/etc/vq/config.toml`` or ``user:<config-root>/config.toml``).
Secrets are never printed: a literal webhook URL is reduced to its scheme and host;
``env:``/``file:`` references are shown as the references they are, never resolved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click

from vq.cli.common import echo_json

__all__ = ["config"]

SECRET_KEYS = {"notifications.webhook_url"}


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and not name.startswith("profile."):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def redact(key: str, value: Any) -> Any:
    if key not in SECRET_KEYS or not isinstance(value, str) or not value:
        return value
    if value.startswith(("env:", "file:")):
        return value  # a reference, not the secret
    parts = urlsplit(value)
    return f"{parts.scheme}://{parts.hostname or '?'}/…(redacted)"


@click.group()
def config() -> None:
    """Show or check the configuration."""


@config.command()
@click.option("--json", "as_json", is_flag=True, help='{"settings": ..., "sources": ...}.')
def show(as_json: bool) -> None:
    """The effective configuration and where each value comes from."""
    from vq.config import config_layers, load_settings

    settings = load_settings()
    dumped = settings.model_dump(mode="json")
    dumped["profile"] = {
        name: {k: v for k, v in values.items() if v is not None}
        for name, values in dumped["profile"].items()
    }
    effective = _flatten(dumped)
    sources = dict.fromkeys(effective, "default")
    for source, data in config_layers():
        for key in _flatten(data):
            for known in effective:
                if known == key or known.startswith(key + "."):
                    sources[known] = source
    redacted = {key: redact(key, value) for key, value in effective.items()}
    if as_json:
        echo_json({"settings": redacted, "sources": sources})
        return
    for key in sorted(redacted):
        click.echo(f"{key} = {redacted[key]!r}  ({sources[key]})")


@config.command()
@click.argument("path", type=click.Path(path_type=Path))
def check(path: Path) -> None:
    """Validate one config file without starting anything (exit 9 when invalid)."""
    from vq.config import check_file

    check_file(path)
    click.echo(f"{path}: valid")
