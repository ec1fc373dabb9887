"""``vq config audit`` (§7.4): every secret setting is a reference that resolves safely.

For each configuration key that holds a secret (:data:`vq.config.report.SECRET_KEYS`)
and is set, :func:`audit_settings` checks through :func:`vq.config.secrets.audit` that the
reference exists, has safe permissions (a file only its owner can access) and resolves
to a usable value. An inline secret fails the audit: it lives in the config file. The
report never contains a secret value.

The references are resolved in the caller's environment (``env:`` variables,
``$CREDENTIALS_DIRECTORY``): run the audit where the daemon runs, with its environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypedDict
from urllib.parse import urlsplit

from vq.config.secrets import Finding, FindingJSON, audit

if TYPE_CHECKING:
    from vq.config.settings import Settings

__all__ = ["audit_report", "audit_settings"]


def _webhook_problem(value: str) -> str | None:
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return "the secret is not an http(s):// URL"
    return None


def audit_settings(settings: Settings, env: Mapping[str, str]) -> list[Finding]:
    """One finding per secret setting that is set, in key order."""
    checks = [
        ("notifications.webhook_url", settings.notifications.webhook_url, _webhook_problem),
    ]
    findings = [audit(key, value, env, check) for key, value, check in sorted(checks)]
    return [finding for finding in findings if finding is not None]


class AuditReport(TypedDict):
    """``vq config audit --json``."""

    ok: bool
    secrets: list[FindingJSON]


def audit_report(findings: list[Finding]) -> AuditReport:
    """The ``vq config audit --json`` object."""
    return {
        "ok": all(finding.ok for finding in findings),
        "secrets": [finding.as_dict() for finding in findings],
    }
