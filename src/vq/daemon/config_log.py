"""The daemon's startup report (§9.1): its effective merged configuration in the log.

Logged once when the daemon starts and again after every successful reload, one line per
key with its source, secrets redacted exactly as ``vq config show`` redacts them
(:mod:`vq.config.report`). Never raises: a report that cannot be built is logged as such.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from vq.config.settings import Settings

__all__ = ["log_effective_config"]

log = logging.getLogger("vq.daemon.config")


def log_effective_config(
    settings: Settings, overrides: Mapping[str, Any] | None, when: str
) -> None:
    """Log the effective configuration (``when``: ``start`` or ``reload``)."""
    from vq.config.report import report_lines

    try:
        lines = report_lines(settings, overrides=overrides)
    except Exception as exc:  # a report is never worth a daemon
        log.warning("effective configuration (%s): not reported: %s", when, exc)
        return
    log.info("effective configuration (%s), secrets redacted:", when)
    for line in lines:
        log.info("  %s", line)
