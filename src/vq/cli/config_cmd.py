"""``vq config show [--json]``, ``vq config check FILE`` and ``vq config audit [--json]``.

``show`` prints the effective merged configuration with the layer each value comes from
(``default``, ``site:/etc/vq/config.toml`` or ``user:<config-root>/config.toml``).
Secrets are never printed: a literal webhook URL is reduced to its scheme and host;
``env:``/``file:``/``credential:`` references are shown as the references they are, never
resolved (:mod:`vq.config.report`). ``audit`` checks every secret reference (exists, safe
permissions, resolves) and exits 1 when one fails; values are never printed.
"""

from __future__ import annotations

from pathlib import Path

import click

from vq.cli.common import echo_json

__all__ = ["config"]


@click.group()
def config() -> None:
    """Show or check the configuration."""


@config.command()
@click.option("--json", "as_json", is_flag=True, help='{"settings": ..., "sources": ...}.')
def show(as_json: bool) -> None:
    """The effective configuration and where each value comes from."""
    from vq.config.report import effective_config, effective_values, report_lines
    from vq.config.settings import load_settings

    settings = load_settings()
    if as_json:
        redacted, sources = effective_config(settings)
        resolved, detected = effective_values(redacted)
        echo_json(
            {"settings": redacted, "sources": sources, "effective": resolved, "detected": detected}
        )
        return
    for line in report_lines(settings):
        click.echo(line)


@config.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
def check(path: Path | None) -> None:
    """Validate a config file without starting anything (exit 9 when invalid).

    Without PATH: the files vq reads here (/etc/vq/config.toml, then the user's
    config.toml), each on its own, then their merge."""
    from vq.config.settings import check_file

    if path is not None:
        check_file(path)
        click.echo(f"{path}: valid")
        return
    from vq.config.settings import SITE_CONFIG, load_settings
    from vq.paths import resolve_config_root

    user = resolve_config_root() / "config.toml"
    found = [layer for layer in (SITE_CONFIG, user) if layer.exists()]
    for layer in found:
        check_file(layer)
    load_settings()  # the merge, as the daemon reads it
    for layer in found:
        click.echo(f"{layer}: valid")
    if not found:
        click.echo(f"no configuration file ({user} does not exist): the defaults apply")


@config.command()
@click.option("--json", "as_json", is_flag=True, help='{"ok": bool, "secrets": [...]}.')
def audit(as_json: bool) -> None:
    """Check that every secret reference exists, is private and resolves (exit 1 if not)."""
    import os

    from vq.config.audit import audit_report, audit_settings
    from vq.config.settings import load_settings

    findings = audit_settings(load_settings(), os.environ)
    report = audit_report(findings)
    if as_json:
        echo_json(report)
    elif not findings:
        click.echo("no secrets are configured")
    else:
        for finding in findings:
            where = finding.reference or "(inline value)"
            if finding.ok:
                click.echo(f"ok    {finding.key} = {where}")
            else:
                click.echo(f"FAIL  {finding.key} = {where}: {finding.problem}")
                if finding.hint:
                    click.echo(f"      hint: {finding.hint}")
    if not report["ok"]:
        raise SystemExit(1)
