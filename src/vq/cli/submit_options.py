"""The options of ``vq submit`` as data, and turning parsed values into submit params.

Stdlib-only. One table feeds both the Click command (help, error messages) and the
fast path in :mod:`vq.cli.main`, which parses well-formed ``vq submit`` command lines
without importing Click at all. Anything the fast path is unsure about (help, unknown
option, a value out of range) goes to Click, so users always see Click's messages.
"""

from __future__ import annotations

import os

from vq.domain.durations import parse_duration
from vq.errors import InvalidInput, NotFound, UsageError

# typing is imported for the type checker only: this module is on the Click-free
# `vq submit` fast path, where importing typing costs milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


__all__ = ["GIVEN", "SUBMIT_OPTIONS", "Option", "build_params", "parse_fast"]


class Option:
    """One option: its flag, destination, kind ("int" | "str" | "flag" | "multi"), help.

    A plain class rather than a dataclass: ``dataclasses`` imports ``inspect``, which
    alone costs several milliseconds on the fast path.
    """

    __slots__ = ("default", "dest", "flag", "help", "kind", "maximum", "minimum")

    def __init__(
        self,
        flag: str,
        dest: str,
        kind: str,
        help: str,
        default: Any = None,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> None:
        self.flag, self.dest, self.kind, self.help = flag, dest, kind, help
        self.default, self.minimum, self.maximum = default, minimum, maximum


SUBMIT_OPTIONS: tuple[Option, ...] = (
    Option("--cpus", "cpus", "int", "CPUs to reserve.", 1, 1, 4096),
    Option("--mem-mb", "mem_mb", "int", "Memory limit in MB.", None, 1, None),
    Option("--wall-time", "wall_time", "str", "Wall-time limit, e.g. 90s, 10m, 2h30m."),
    Option("--priority", "priority", "int", "Higher runs first.", 0, -1000, 1000),
    Option("--not-before", "not_before", "str", "Start no earlier than an ISO time or a delay."),
    Option("--job-name", "job_name", "str", "A name for the job."),
    Option("--tag", "tags", "multi", "A tag (repeatable).", ()),
    Option("--retry", "retry_max", "int", "Rerun a failing command up to N more times.", 0, 0, 100),
    Option("--retry-backoff", "retry_backoff", "str", "First retry delay (doubles each time)."),
    Option("--after", "after", "multi", "Start after this job COMPLETED (repeatable).", ()),
    Option("--after-any", "after_any", "multi", "Start after this job ended (repeatable).", ()),
    Option("--array", "array", "str", "Submit an array: indices like 0-99 or 1,5,7-9."),
    Option("--array-from", "array_from", "str", "Submit an array: one element per line of FILE."),
    Option(
        "--max-parallel",
        "max_parallel",
        "int",
        "Run at most N elements of the array at once.",
        None,
        1,
        None,
    ),
    Option(
        "--chain",
        "chain",
        "int",
        "Submit N segments, each after the previous success.",
        None,
        2,
        10000,
    ),
    Option(
        "--rerun-until-file-exists",
        "rerun_until",
        "str",
        "Rerun a COMPLETED job (as a sibling) until PATH exists.",
    ),
    Option("--rerun-max", "rerun_max", "int", "At most N reruns (default 10).", None, 1, 1000),
    Option(
        "--clean-workdir", "clean_workdir", "flag", "Delete $VQ_WORKDIR when the job ends.", False
    ),
    Option(
        "--auto-resume",
        "auto_resume",
        "flag",
        "After a reboot or daemon crash lost it, rerun the job as a sibling.",
        False,
    ),
    Option(
        "--idempotency-key",
        "idempotency_key",
        "str",
        "Repeat-safe submit: the same key and intent return the same job.",
    ),
    Option("--profile", "profile", "str", "Presets from [profile.NAME]; flags given win."),
    Option("--program", "program", "str", "A registered [programs.NAME]; pins checked."),
    Option(
        "--expected-sha",
        "expected_sha",
        "str",
        "Pin a venv --program to this git SHA (a prefix), checked at submit and dispatch.",
    ),
    Option("--cwd", "cwd", "str", "Run here instead of the workspace."),
    Option("--json", "as_json", "flag", "Print the whole spec as JSON.", False),
)

_BY_FLAG = {option.flag: option for option in SUBMIT_OPTIONS}

#: Key in the parsed values holding the set of option destinations given explicitly.
GIVEN = "_given"

#: Submit parameter → the option that sets it. A parameter whose option was not given is
#: left out of the request, so a ``--profile`` (or the server's default) can fill it.
PARAM_OPTION = {
    "cpus": "cpus",
    "mem_mb": "mem_mb",
    "wall_time_seconds": "wall_time",
    "priority": "priority",
    "tags": "tags",
    "retry_max": "retry_max",
    "clean_workdir_on_terminal": "clean_workdir",
    "program": "program",
}


def _int_in_range(option: Option, text: str) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return None
    if option.minimum is not None and value < option.minimum:
        return None
    if option.maximum is not None and value > option.maximum:
        return None
    return value


def parse_fast(args: list[str]) -> tuple[list[str], dict[str, Any], list[str]] | None:
    """(positional, values, command) for a well-formed command line, else None."""
    if "--" in args:
        cut = args.index("--")
        head, command = args[:cut], args[cut + 1 :]
    else:
        head, command = args, []
    values: dict[str, Any] = {o.dest: o.default for o in SUBMIT_OPTIONS}
    values[GIVEN] = set()
    for multi in SUBMIT_OPTIONS:
        if multi.kind == "multi":
            values[multi.dest] = []
    positional: list[str] = []
    tokens = iter(head)
    for token in tokens:
        if not token.startswith("-") or token == "-":  # noqa: S105 - a dash, not a secret
            positional.append(token)
            continue
        flag, has_value, inline = token.partition("=")
        option = _BY_FLAG.get(flag)
        if option is None:
            return None  # help, unknown or abbreviated options: let Click explain
        values[GIVEN].add(option.dest)
        if option.kind == "flag":
            if has_value:
                return None
            values[option.dest] = True
            continue
        text = inline if has_value else next(tokens, None)
        if text is None:
            return None
        if option.kind == "int":
            number = _int_in_range(option, text)
            if number is None:
                return None
            values[option.dest] = number
        elif option.kind == "multi":
            values[option.dest].append(text)
        else:
            values[option.dest] = text
    return positional, values, command


def _not_before(text: str | None) -> str | None:
    if text is None:
        return None
    from datetime import UTC, datetime, timedelta

    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = datetime.now(UTC) + timedelta(seconds=parse_duration(text))
    if moment.tzinfo is None:
        moment = moment.astimezone()  # a naive time is the user's local time
    return moment.astimezone(UTC).isoformat()


def _delay_text(text: str | None) -> str | None:
    """``--not-before`` as given when it is a delay (``1h``), not an absolute time."""
    if text is None:
        return None
    from datetime import datetime

    try:
        datetime.fromisoformat(text)
    except ValueError:
        return text.strip()
    return None


def _source(positional: list[str]) -> str | None:
    if not positional:
        return None
    if len(positional) > 1:
        raise UsageError(
            f"expected at most one SOURCE before `--`, got {len(positional)}: "
            + " ".join(positional),
            hint="remote HOST targets are not configured; put the command after `--`",
        )
    path = os.path.abspath(positional[0])
    if not os.path.lexists(path):
        raise NotFound(
            f"source {positional[0]!r} does not exist",
            hint="SOURCE is a file, a directory or a .tar/.tar.gz/.tar.bz2/.zip archive",
        )
    return path


def build_params(
    positional: list[str], values: dict[str, Any], command: list[str]
) -> dict[str, Any]:
    """The ``submit`` RPC params from parsed values; raises a VqError for bad input."""
    if not command:
        raise UsageError(
            "no command given", hint="put the command after `--`: vq submit -- echo hello"
        )
    cwd = values.get("cwd")
    if cwd and not os.path.isdir(cwd):
        raise InvalidInput(f"--cwd {cwd!r} is not a directory")
    wall_time = values.get("wall_time")
    backoff = values.get("retry_backoff")
    array_values = None
    if values.get("array_from"):
        array_values = _array_lines(values["array_from"])
    array = None
    if values.get("array"):
        from vq.domain.arrays import parse_array

        array = parse_array(values["array"])
    params: dict[str, Any] = {
        "command": command,
        "source": _source(positional),
        "cwd": os.path.abspath(cwd) if cwd else None,
        "cpus": values["cpus"],
        "mem_mb": values["mem_mb"],
        "wall_time_seconds": parse_duration(wall_time) if wall_time else None,
        "priority": values["priority"],
        "not_before": _not_before(values.get("not_before")),
        "not_before_requested": _delay_text(values.get("not_before")),
        "job_name": values.get("job_name"),
        "tags": list(values["tags"]),
        "retry_max": values["retry_max"],
        "retry_backoff_seconds": parse_duration(backoff) if backoff else None,
        "depends_on": list(values.get("after") or []),
        "depends_on_any": list(values.get("after_any") or []),
        "array": array,
        "array_values": array_values,
        "max_parallel": values.get("max_parallel"),
        "chain": values.get("chain"),
        "rerun_until_file_exists": values.get("rerun_until"),
        "rerun_max": values.get("rerun_max"),
        "clean_workdir_on_terminal": bool(values.get("clean_workdir")),
        "recover_on_reboot": bool(values.get("auto_resume")),
        "idempotency_key": values.get("idempotency_key"),
        "profile": values.get("profile"),
        "program": values.get("program"),
        "expected_sha": values.get("expected_sha"),
    }
    given = values.get(GIVEN)
    if given is not None:
        params = {
            key: value
            for key, value in params.items()
            if key not in PARAM_OPTION or PARAM_OPTION[key] in given
        }
    return params


def _array_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            lines = [line.rstrip("\n") for line in handle]
    except FileNotFoundError:
        raise NotFound(f"--array-from file {path!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read --array-from file {path!r}: {exc}") from exc
    values = [line for line in lines if line.strip()]
    if not values:
        raise InvalidInput(f"--array-from file {path!r} has no non-empty lines")
    return values
