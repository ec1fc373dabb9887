"""``[web]``: limits of the HTTP submission API (§10.2), a section of :mod:`vq.config.settings`.

Kept in its own leaf module (pydantic only) so ``vq.config.settings`` stays small; the web layer
reads these through ``load_settings().web``. ``docs/config.md`` documents every key.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["GIB", "MIB", "WebSettings"]

MIB = 1024 * 1024
GIB = 1024 * MIB
_HOST = re.compile(r"[A-Za-z0-9.-]{1,253}|\[?[0-9A-Fa-f:.]{2,45}\]?")


class WebSettings(BaseModel):
    """``[web]``: sizes and lifetimes of submitted inputs."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    #: Total decoded bytes of ``inputs.files`` (base64 in the JSON body of a submit).
    inline_max_bytes: int = Field(default=5 * MIB, ge=1, le=1024 * MIB)
    #: Bytes of one ``POST /api/v1/uploads`` body (a tar.gz).
    upload_max_bytes: int = Field(default=512 * MIB, ge=1)
    #: Bytes one upload may unpack to (regular files, hard links counted at full size).
    upload_max_unpacked_bytes: int = Field(default=4 * GIB, ge=1)
    #: Entries (files, directories, links) one upload may hold.
    upload_max_members: int = Field(default=100_000, ge=1)
    #: An unused upload token expires (and its file is swept) this long after the upload.
    upload_ttl_seconds: int = Field(default=3600, ge=1, le=7 * 86400)
    #: Host names (beside the loopback ones) the console answers to; others get 400
    #: (DNS rebinding). ``vq web serve --allow-remote`` needs at least one.
    allowed_hosts: list[str] = Field(default_factory=list, max_length=64)
    #: Serve the fleet console (``/fleet``, ``/api/v1/fleet``) over every configured host,
    #: as ``vq web serve --fleet`` and ``vq daemon start --web --fleet`` do.
    fleet: bool = False
    #: Long-polls (``GET /api/v1/jobs/{id}/wait``) one credential (token, account,
    #: "anonymous") may hold at once; one more gets 503 with ``Retry-After``.
    wait_max_per_credential: int = Field(default=128, ge=1, le=100_000)
    #: Long-polls one client address may hold at once.
    wait_max_per_peer: int = Field(default=128, ge=1, le=100_000)
    #: Long-polls the console holds in all (each holds a connection to the daemon too,
    #: which has its own cap, ``[daemon] max_connections``).
    wait_max_total: int = Field(default=256, ge=1, le=100_000)

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _HOST.fullmatch(name):
                raise ValueError(f"{name!r} is not a host name or IP address (no port, no scheme)")
        return [name.lower() for name in value]
