"""The environment a job runs in: what a submit captures, and how a launch merges it.

Pure (stdlib only, no ``os.environ``): callers pass the submitting shell's environment.

``--export`` rules (like Slurm's ``sbatch --export``):

* ``ALL`` — the whole submitting environment becomes the job's base environment
  (the default for a local submit; ``[submit] export`` in the config changes it).
* ``NONE`` — nothing from the submitting shell: the job runs in the environment of the
  daemon that starts it (the default for remote and lane submits and for the HTTP API).
* ``NAME[,NAME=value…]`` — the daemon's environment plus just these: ``NAME`` copies the
  submitting shell's value (silently skipped when unset), ``NAME=value`` sets one.

``--env NAME=value`` (repeatable) sets one variable on top of any rule. Names are shell
identifiers; ``VQ_*`` names belong to vq and are refused (a captured ``VQ_*`` variable is
dropped), because vq sets its own job variables on top at launch.

A capture is stored as :class:`CapturedEnvironment` in the job's ``_vq/environment``
file (never in the JobSpec), so values never appear in ``vq status --json``, the console,
the API or the logs. The collector (``vq.executors._collector``, stdlib-only) reads that
file at launch: a ``submitter`` base replaces the daemon's environment, a ``daemon`` base
is added to it, and the job's ``VQ_*`` variables are set on top either way.
"""

from __future__ import annotations

import json
import re

# typing is imported for the type checker only: the CLI's submit fast path imports this.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

__all__ = [
    "BASE_DAEMON",
    "BASE_SUBMITTER",
    "EXPORT_ALL",
    "EXPORT_NONE",
    "RESERVED_PREFIX",
    "SCHEMA",
    "BadEnvironment",
    "CapturedEnvironment",
    "capture",
    "check_name",
    "default_export",
    "parse_assignment",
    "parse_export",
]

SCHEMA = "vq.environment.v1"
EXPORT_ALL = "ALL"
EXPORT_NONE = "NONE"
#: The captured variables replace the daemon's environment.
BASE_SUBMITTER = "submitter"
#: The captured variables are added to the daemon's environment.
BASE_DAEMON = "daemon"
RESERVED_PREFIX = "VQ_"
MAX_VARIABLES = 4096
MAX_BYTES = 1 << 20

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class BadEnvironment(ValueError):
    """A bad ``--export``/``--env``/``env`` value; the message names the variable, never
    its value."""


class CapturedEnvironment:
    """What one submit captured: the base (``submitter`` or ``daemon``) and variables."""

    __slots__ = ("base", "variables")

    def __init__(self, base: str, variables: dict[str, str]) -> None:
        if base not in (BASE_SUBMITTER, BASE_DAEMON):
            raise BadEnvironment(f"unknown environment base {base!r}")
        self.base, self.variables = base, variables

    def __repr__(self) -> str:  # names only: values may be secrets
        return f"CapturedEnvironment({self.base!r}, names={sorted(self.variables)!r})"

    @property
    def is_empty(self) -> bool:
        """True when launching with it changes nothing (the daemon's environment as is)."""
        return self.base == BASE_DAEMON and not self.variables

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "base": self.base, "variables": dict(self.variables)}

    def to_bytes(self) -> bytes:
        return (json.dumps(self.to_json(), sort_keys=True) + "\n").encode()

    @classmethod
    def from_json(cls, data: object) -> CapturedEnvironment:
        """Validate a stored or transmitted capture; raises BadEnvironment."""
        if not isinstance(data, dict) or data.get("schema", SCHEMA) != SCHEMA:
            raise BadEnvironment("not a vq.environment.v1 object")
        variables = data.get("variables", {})
        if not isinstance(variables, dict):
            raise BadEnvironment("variables must be an object of strings")
        checked = {}
        for name, value in variables.items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise BadEnvironment("variables must be an object of strings")
            checked[check_name(name)] = _check_value(name, value)
        _check_size(checked)
        return cls(str(data.get("base", BASE_DAEMON)), checked)


def check_name(name: str, *, allow_reserved: bool = False) -> str:
    """``name`` if it is a usable variable name, else raise (the name is in the message)."""
    if not _NAME.fullmatch(name):
        raise BadEnvironment(
            f"{name[:64]!r} is not a variable name (letters, digits and _, not starting "
            "with a digit)"
        )
    if not allow_reserved and name.startswith(RESERVED_PREFIX):
        raise BadEnvironment(f"{name} is reserved: vq sets the VQ_* variables itself")
    return name


def _check_value(name: str, value: str) -> str:
    if "\x00" in value:
        raise BadEnvironment(f"the value of {name} contains a NUL byte")
    return value


def _check_size(variables: Mapping[str, str]) -> None:
    if len(variables) > MAX_VARIABLES:
        raise BadEnvironment(f"more than {MAX_VARIABLES} variables")
    if sum(len(k) + len(v) for k, v in variables.items()) > MAX_BYTES:
        raise BadEnvironment(f"the variables exceed {MAX_BYTES // 1024} KiB")


def parse_assignment(text: str) -> tuple[str, str]:
    """``NAME=value`` → (name, value); raises when there is no ``=`` or a bad name."""
    name, equals, value = text.partition("=")
    if not equals:
        raise BadEnvironment(f"{name[:64]!r} needs a value: NAME=value")
    return check_name(name), _check_value(name, value)


def parse_export(text: str) -> tuple[str, list[str], dict[str, str]]:
    """``--export`` → (rule, names to copy, values to set); rule is ALL, NONE or NAMES."""
    stripped = text.strip()
    if stripped.upper() in (EXPORT_ALL, EXPORT_NONE):
        return stripped.upper(), [], {}
    names: list[str] = []
    values: dict[str, str] = {}
    for raw in stripped.split(","):
        item = raw.strip()
        if not item:
            continue
        if "=" in item:
            name, value = parse_assignment(item)
            values[name] = value
        else:
            names.append(check_name(item))
    if not names and not values:
        raise BadEnvironment("--export needs ALL, NONE or NAME[,NAME=value…]")
    return "NAMES", names, values


def default_export(remote: bool) -> str:
    """The rule when neither ``--export`` nor ``[submit] export`` says: local submits take
    the whole shell (ALL), remote and lane submits nothing (NONE), since another host's
    paths and modules differ from this shell's."""
    return EXPORT_NONE if remote else EXPORT_ALL


def capture(
    environ: Mapping[str, str],
    export: str | None,
    assignments: Iterable[str] = (),
    *,
    remote: bool = False,
    configured: str | None = None,
) -> CapturedEnvironment:
    """The environment to store for one submit.

    ``export`` is the ``--export`` text (None: ``configured``, the ``[submit] export``
    value, then :func:`default_export`); ``assignments`` are the ``--env NAME=value``
    texts, applied last.
    """
    text = export if export is not None else configured or default_export(remote)
    rule, names, values = parse_export(text)
    variables: dict[str, str] = {}
    if rule == EXPORT_ALL:
        base = BASE_SUBMITTER
        variables = {
            name: value
            for name, value in environ.items()
            if not name.startswith(RESERVED_PREFIX) and _NAME.fullmatch(name)
        }
    else:
        base = BASE_DAEMON
        for name in names:
            if name in environ:
                variables[name] = environ[name]
    variables.update(values)
    for assignment in assignments:
        name, value = parse_assignment(assignment)
        variables[name] = value
    _check_size(variables)
    return CapturedEnvironment(base, variables)
