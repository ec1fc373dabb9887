"""The ``[notifications]`` section of the settings (§6.2): the daemon-wide terminal
webhook and the states it reports. Part of :class:`vq.config.settings.Settings`; the daemon
resolves a secret reference when it starts (:mod:`vq.daemon.notify`)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vq.domain.states import WRITABLE_TERMINAL, JobState
from vq.errors import ConfigError

__all__ = ["NotificationSettings"]

#: Terminal state names a notification filter may name (lower case, in §3.3 order).
_NOTIFY_STATES: tuple[str, ...] = tuple(
    state.value.lower() for state in JobState if state in WRITABLE_TERMINAL
)
_URL = re.compile(r"https?://[^/?#\s]+\S*", re.IGNORECASE)


class NotificationSettings(BaseModel):
    """``[notifications]``: the daemon-wide terminal webhook (§6.2), copied at daemon start.

    ``webhook_url`` is empty (disabled), an ``http(s)://`` URL, or a secret reference
    (§7.4, :mod:`vq.config.secrets`): ``env:NAME``, ``file:/absolute/path`` or ``credential:NAME``
    (systemd ``LoadCredential=``). Only the *form* is checked here; the
    daemon resolves a reference when it starts (``vq.daemon.notify.resolve_webhook_url``)
    so reading the configuration never reads a secret. Error messages never echo the value.
    ``notify_on_states`` is normalized to lower case and deduplicated; an empty list means
    no filter.
    """

    # A literal URL embeds its token: keep it out of validation errors and tracebacks.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    webhook_url: str = ""
    notify_on_states: list[str] = Field(default_factory=list)

    @field_validator("webhook_url")
    @classmethod
    def _url_form(cls, value: str) -> str:
        value = value.strip()
        if not value:
            return ""
        from vq.config.secrets import parse_reference

        try:
            reference = parse_reference(value)
        except ConfigError as exc:
            raise ValueError(exc.message) from None
        if reference is None and not _URL.fullmatch(value):
            raise ValueError(
                "must be an http(s):// URL, env:NAME, file:/absolute/path or credential:NAME"
            )
        return value

    @field_validator("notify_on_states")
    @classmethod
    def _terminal_states(cls, value: list[str]) -> list[str]:
        normalized: list[str] = []
        for name in value:
            state = name.strip().lower()
            if state not in _NOTIFY_STATES:
                if state == JobState.INTERRUPTED.value.lower():
                    why = "is a legacy state vq never writes"
                elif state.upper() in JobState.__members__:
                    why = "is not a terminal state"
                else:
                    why = "is not a job state"
                raise ValueError(f"{name!r} {why}; use any of: " + ", ".join(_NOTIFY_STATES))
            if state not in normalized:
                normalized.append(state)
        return normalized
