"""Settings from layered TOML (§9.1), read once at a composition root.

Layers, last wins: built-in defaults → ``/etc/vq/config.toml`` → ``<config-root>/config.toml``
(config root: ``VQ_CONFIG_DIR`` → ``$XDG_CONFIG_HOME/vq`` → ``~/.config/vq``) → explicit
overrides (daemon flags). Unknown keys are refused with their dotted path and file, so a
typo never silently does nothing. ``docs/config.md`` documents every key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from vq.config.hosts import HostSettings, check_default_host, check_host_names
from vq.config.multi_user import MultiUserSettings, QuotaSettings
from vq.config.notifications import NotificationSettings
from vq.config.programs import ProgramSettings, check_program_names
from vq.config.raw import read_toml
from vq.config.roots import config_root
from vq.config.web import WebSettings
from vq.domain.admission import Caps
from vq.domain.durations import parse_duration
from vq.domain.sizes import parse_mem_mb
from vq.domain.validation_words import CONFIG_WORDS, describe
from vq.errors import ConfigError, InvalidInput
from vq.protocol.submit_fields import constraints

if TYPE_CHECKING:
    from vq.packing.profiles import PackingProfile

__all__ = [
    "DaemonSettings",
    "ProfileSettings",
    "Settings",
    "SubmitSettings",
    "WatchdogSettings",
    "WebSettings",
    "host_logical_cpus",
    "host_memory_mb",
    "load_settings",
    "packing_profiles",
]

SITE_CONFIG = Path("/etc/vq/config.toml")


def host_logical_cpus() -> int:
    return os.cpu_count() or 1


def host_memory_mb() -> int | None:
    """Total physical memory in MB, or None when the platform cannot tell."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024))
    except (ValueError, OSError, AttributeError):
        return None


class DaemonSettings(BaseModel):
    """``[daemon]``: the local admission budget and loop timing."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    max_jobs: int | None = Field(default=None, ge=1)
    max_cpus: int | None = Field(default=None, ge=1)
    max_mem_mb: int | None = Field(default=None, ge=1)
    default_job_mem_mb: int | None = Field(default=None, ge=1)
    tick_seconds: float = Field(default=1.0, gt=0, le=60)
    #: Pin each local job to as many cores as it declares (disjoint while cores
    #: suffice). On by default where the platform has ``sched_setaffinity`` (Linux).
    cpu_affinity: bool = Field(default_factory=lambda: hasattr(os, "sched_setaffinity"))
    #: Daemon-socket connections served at once (long-polls hold one each); more are
    #: answered "daemon busy" at once. Read at start.
    max_connections: int = Field(default=256, ge=4, le=4096)

    def caps(self) -> Caps:
        """Effective caps: unset ``max_cpus``/``max_mem_mb`` mean the host's totals."""
        return Caps(
            max_jobs=self.max_jobs,
            max_cpus=self.max_cpus if self.max_cpus is not None else host_logical_cpus(),
            max_mem_mb=self.max_mem_mb if self.max_mem_mb is not None else host_memory_mb(),
            default_job_mem_mb=self.default_job_mem_mb,
        )


class WatchdogSettings(BaseModel):
    """``[watchdog]``: starvation and host-memory-pressure policy (§4.4)."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    #: A job using less than this percentage of one CPU ...
    starved_cpu_percent: float = Field(default=1.0, ge=0, le=100)
    #: ... over this many seconds is STARVED. 0 disables the check.
    starved_window_seconds: float = Field(default=3600.0, ge=0)
    #: Host memory use (percent of total) at which running local jobs are paused.
    memory_pause_percent: float = Field(default=85.0, gt=0, le=100)
    #: Jobs paused by the pressure pass are resumed once use falls below this.
    memory_resume_percent: float = Field(default=70.0, gt=0, le=100)

    @model_validator(mode="after")
    def _ordered(self) -> WatchdogSettings:
        if self.memory_resume_percent >= self.memory_pause_percent:
            raise ValueError("memory_resume_percent must be below memory_pause_percent")
        return self


class ProfileSettings(BaseModel):
    """``[profile.NAME]``: submit presets under the JobSpec's own field names (§9.2).

    Explicit ``vq submit`` flags win over a profile's values. ``wall_time = "10m"`` (any
    form of :func:`vq.domain.durations.parse_duration`, no bare number) may stand in for
    ``wall_time_seconds``, and ``mem = "2G"`` (as ``vq submit --mem`` takes it) for
    ``mem_mb``.
    """

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    # The submit fields declared profile=True (vq.protocol.submit_fields), their limits.
    cpus: int | None = Field(**constraints("cpus", optional=True))
    mem_mb: int | None = Field(**constraints("mem_mb", optional=True))
    wall_time_seconds: int | None = Field(**constraints("wall_time_seconds", optional=True))
    priority: int | None = Field(**constraints("priority", optional=True))
    tags: list[str] | None = Field(**constraints("tags", optional=True))
    retry_max: int | None = Field(**constraints("retry_max", optional=True))
    clean_workdir_on_terminal: bool | None = Field(
        **constraints("clean_workdir_on_terminal", optional=True)
    )
    program: str | None = Field(**constraints("program", optional=True))

    @model_validator(mode="before")
    @classmethod
    def _mem_text(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "mem" not in data:
            return data
        data = dict(data)
        text = data.pop("mem")
        if "mem_mb" in data:
            raise ValueError("give mem or mem_mb, not both")
        if not isinstance(text, str):
            raise ValueError('mem must be a string such as "500M" or "2G"')
        try:
            data["mem_mb"] = parse_mem_mb(text)
        except InvalidInput as exc:
            raise ValueError(f"mem: {exc.message}") from None
        return data

    @model_validator(mode="before")
    @classmethod
    def _wall_time_text(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "wall_time" not in data:
            return data
        data = dict(data)
        text = data.pop("wall_time")
        if "wall_time_seconds" in data:
            raise ValueError("give wall_time or wall_time_seconds, not both")
        if not isinstance(text, str):
            raise ValueError('wall_time must be a string such as "10m" or "2h30m"')
        try:
            data["wall_time_seconds"] = parse_duration(text, bare_seconds=False)
        except InvalidInput as exc:
            raise ValueError(f"wall_time: {exc.message}") from None
        return data


class SubmitSettings(BaseModel):
    """``[submit]``: defaults of ``vq submit`` on this machine."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    #: the ``--export`` rule when none is given: ALL, NONE or NAME[,NAME=value…]
    export: str = "ALL"

    @field_validator("export")
    @classmethod
    def _export(cls, value: str) -> str:
        from vq.domain.environment import BadEnvironment, parse_export

        try:
            parse_export(value)
        except BadEnvironment as exc:
            raise ValueError(str(exc)) from None
        return value


class Settings(BaseModel):
    """The whole configuration. Every section refuses unknown keys."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    daemon: DaemonSettings = Field(default_factory=DaemonSettings)
    watchdog: WatchdogSettings = Field(default_factory=WatchdogSettings)
    profile: dict[str, ProfileSettings] = Field(default_factory=dict)
    submit: SubmitSettings = Field(default_factory=SubmitSettings)
    programs: dict[str, ProgramSettings] = Field(default_factory=dict)
    notifications: NotificationSettings = Field(default_factory=NotificationSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    #: System policy only (see :mod:`vq.config.multi_user`); a personal config may not set it.
    multi_user: MultiUserSettings = Field(default_factory=MultiUserSettings)
    quotas: QuotaSettings = Field(default_factory=QuotaSettings)
    #: ``[packing.NAME.target|resources]``: validated by :func:`vq.packing.profiles.parse_profiles`.
    packing: dict[str, Any] = Field(default_factory=dict)
    default_packing: str | None = None
    # Remote vq daemons (§2.2), see vq.config.hosts.
    hosts: dict[str, HostSettings] = Field(default_factory=dict)
    default_host: str | None = Field(default=None, min_length=1, max_length=63)

    _host_names = field_validator("hosts")(check_host_names)

    @field_validator("default_host")
    @classmethod
    def _known_default_host(cls, value: str | None, info: ValidationInfo) -> str | None:
        check_default_host(value, info.data.get("hosts", {}))
        return value

    @field_validator("programs")
    @classmethod
    def _program_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_program_names(value)
        return value


#: A config file larger than this is refused (no sane config comes near it).


def _read_layer(path: Path) -> tuple[dict[str, Any], str]:
    """The parsed TOML of one config file and its text (see :func:`vq.config.raw.read_toml`:
    ``({}, "")`` when absent, every other failure a ConfigError naming the file)."""
    return read_toml(path)


def _merge(base: dict[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def line_of(text: str, loc: tuple[str | int, ...]) -> int | None:
    """The 1-based line defining the key at ``loc`` in TOML ``text`` (best-effort).

    Tracks ``[table]`` headers and matches ``key =`` under the table that holds it.
    """
    keys = [str(part) for part in loc if not isinstance(part, int)]
    if not keys:
        return None
    table, key = ".".join(keys[:-1]), keys[-1]
    current = ""
    fallback = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("[") and not line.startswith("[["):
            current = line.strip("[] ").replace('"', "")
            if current == ".".join(keys):
                fallback = number  # the key is itself a table: its header
            continue
        name = line.split("=", 1)[0].strip().strip('"') if "=" in line else None
        if name == key and current == table:
            return number
        if name is not None and f"{current}.{name}".strip(".") == ".".join(keys):
            return number
    return fallback


_PROGRAM_KINDS = ("binary", "venv", "import")
_MESSAGES = {
    "union_tag_not_found": "needs kind = one of " + ", ".join(_PROGRAM_KINDS),
    "union_tag_invalid": "kind must be one of " + ", ".join(_PROGRAM_KINDS),
}


def _validate(data: dict[str, Any], origin: str, text: str | None = None) -> Settings:
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = tuple(first["loc"])
        if len(loc) > 2 and loc[0] == "programs" and loc[2] in _PROGRAM_KINDS:
            loc = loc[:2] + loc[3:]  # the discriminated union's tag is not a key
        key = ".".join(str(part) for part in loc)
        message = _MESSAGES.get(first["type"]) or describe(first, CONFIG_WORDS)
        line = line_of(text, loc) if text is not None else None
        where = f"{origin}:{line}" if line is not None else origin
        raise ConfigError(
            f"{where}: {key}: {message}",
            hint="see docs/config.md for every key and its default",
        ) from exc
    _check_packing(data, origin, text)
    return settings


def _check_packing(data: dict[str, Any], origin: str, text: str | None) -> None:
    """Validate every packing profile of ``data`` (one layer, or the merged whole)."""
    from vq.packing.profiles import ProfileError, check_default, parse_profiles

    try:
        profiles = parse_profiles(data)
        if text is None:  # the merged configuration: the default must name a profile
            check_default(data.get("default_packing"), set(profiles))
    except ProfileError as exc:
        line = None
        for depth in range(len(exc.loc), 0, -1):  # a missing key: its table's header
            if text is not None and line is None:
                line = line_of(text, exc.loc[:depth])
        where = f"{origin}:{line}" if line is not None else origin
        raise ConfigError(
            f"{where}: {'.'.join(exc.loc)}: {exc.reason}",
            hint="see docs/packing.md for the profile keys",
        ) from exc


def packing_profiles(settings: Settings) -> dict[str, PackingProfile]:
    """The validated packing profiles of loaded ``settings`` (by name)."""
    from vq.packing.profiles import parse_profiles

    return parse_profiles({"packing": settings.packing})


def check_file(path: Path) -> Settings:
    """Validate one config file on its own (``vq config check``); nothing is started."""
    if not path.exists():
        raise ConfigError(f"{path} is not a file", hint="give the path of a config.toml")
    data, text = _read_layer(path)
    return _validate(data, str(path), text)


def config_layers(
    env: Mapping[str, str] | None = None, *, site_config: Path = SITE_CONFIG
) -> list[tuple[str, dict[str, Any]]]:
    """The file layers in merge order, as (source, data); empty files are skipped."""
    env = os.environ if env is None else env
    layers = []
    for label, path in (("site", site_config), ("user", Path(config_root(env)) / "config.toml")):
        data, _ = _read_layer(path)
        if data:
            layers.append((f"{label}:{path}", data))
    return layers


def load_settings(
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    site_config: Path = SITE_CONFIG,
) -> Settings:
    """Merge the layers and validate each file on its own (so errors name the file).

    ``[multi_user]`` and ``[quotas]`` are system policy: they may come from ``site_config`` or
    ``$VQ_CONFIG_DIR/config.toml`` (the system config when that variable is set), never
    from a personal ``$XDG_CONFIG_HOME/vq`` or ``~/.config/vq`` file.
    """
    env = os.environ if env is None else env
    merged: dict[str, Any] = {}
    user = Path(config_root(env)) / "config.toml"
    personal = None if env.get("VQ_CONFIG_DIR") else user
    for path in (site_config, user):
        layer, text = _read_layer(path)
        if layer:
            _validate(layer, str(path), text)
            for section in ("multi_user", "quotas"):
                if section in layer and path == personal:
                    raise ConfigError(
                        f"{path}:{line_of(text, (section,)) or 1}: {section}: is system "
                        "policy and cannot be set in a personal config",
                        hint=f"set [{section}] in {site_config} (or $VQ_CONFIG_DIR/config.toml)",
                    )
            twice = set(layer.get("packing", {})) & set(merged.get("packing", {}))
            if twice:  # a profile lives whole in one layer: never merged key by key
                name = sorted(twice)[0]
                raise ConfigError(
                    f"{path}: packing.{name}: the profile is also defined in {site_config}",
                    hint="define each packing profile whole in one file",
                )
            merged = _merge(merged, layer)
    if overrides:
        merged = _merge(merged, overrides)
    return _validate(merged, "configuration")
