"""The systemd user unit that runs the daemon (§1.2 item 6, §5.2): render and install.

:func:`render_unit` is pure: it turns the ``vq`` command, the environment variables that
select the state and config roots, and nothing else into the text of ``vq.service``.
The unit runs ``vq daemon run`` in the foreground with ``KillMode=process``: stopping or
restarting the service signals the daemon alone, so running jobs (their own process
groups) outlive it and the next start reattaches them (§4.7). ``Restart=on-failure``
brings a crashed daemon back, but not one that refused to start (exit 9: an invalid
configuration; 15: a permission refused) until the operator fixes the cause.

:func:`install_unit` writes it to ``<config-home>/systemd/user/vq.service`` atomically,
refusing to replace an existing file unless ``force``.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from vq._fs import atomic_write_bytes
from vq.errors import Conflict

__all__ = [
    "ENV_PASSED",
    "UNIT_NAME",
    "enable_commands",
    "install_unit",
    "render_unit",
    "unit_path",
    "vq_command",
]

UNIT_NAME = "vq.service"
#: Variables copied into the unit when set at install time (they select the roots).
ENV_PASSED = ("VQ_STATE_DIR", "VQ_CONFIG_DIR", "VQ_ARCHIVE_DIR", "XDG_DATA_HOME")


def vq_command() -> list[str]:
    """The absolute argv prefix that runs this installation's ``vq``."""
    script = Path(sys.executable).with_name("vq")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "vq"]


def unit_path(env: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/systemd/user/vq.service`` (default ``~/.config/...``)."""
    config_home = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")) / ".config")
    return Path(config_home).expanduser() / "systemd" / "user" / UNIT_NAME


def _systemd_escape(text: str) -> str:
    """``%`` starts a systemd specifier: a literal one is ``%%``."""
    return text.replace("%", "%%")


def _quote(argv: Sequence[str]) -> str:
    return " ".join(_systemd_escape(shlex.quote(part)) for part in argv)


def _env_line(name: str, value: str) -> str:
    escaped = _systemd_escape(value.replace("\\", "\\\\").replace('"', '\\"'))
    return f'Environment="{name}={escaped}"'


def render_unit(command: Sequence[str], env: Mapping[str, str]) -> str:
    """The unit text; ``command`` is :func:`vq_command`, ``env`` selects what to pass."""
    passed = [_env_line(name, env[name]) for name in ENV_PASSED if env.get(name)]
    lines = [
        "# Installed by `vq daemon install-service`; see docs/cgroup-setup.md.",
        "[Unit]",
        "Description=vq job queue daemon",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={_quote([*command, 'daemon', 'run'])}",
        f"ExecReload={_quote([*command, 'daemon', 'reload'])}",
        "# Signal only the daemon on stop or restart: jobs run on and are reattached.",
        "KillMode=process",
        "Restart=on-failure",
        "RestartSec=5",
        "# 9: the configuration was refused, 15: a permission was: a restart would fail again.",
        "RestartPreventExitStatus=9 15",
        *passed,
        "",
        "[Install]",
        "WantedBy=default.target",
    ]
    return "\n".join(lines) + "\n"


def enable_commands() -> list[str]:
    """What the operator runs next."""
    return [
        "systemctl --user daemon-reload",
        f"systemctl --user enable --now {UNIT_NAME}",
        "loginctl enable-linger $USER  # keep it running after logout",
    ]


def install_unit(path: Path, text: str, force: bool) -> bool:
    """Write ``text`` to ``path``; returns whether a file was replaced.

    Conflict (exit 6) when ``path`` exists and ``force`` is false; nothing is written.
    """
    existed = path.exists() or path.is_symlink()
    if existed and not force:
        raise Conflict(
            f"{path} already exists",
            hint="pass --force to overwrite it (`systemctl --user daemon-reload` after)",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode())
    return existed
