"""The options of ``vq submit`` as data, and turning parsed values into submit params.

Stdlib-only. One table feeds both the Click command (help, error messages) and the
fast path in :mod:`vq.cli.main`, which parses well-formed ``vq submit`` command lines
without importing Click at all. Anything the fast path is unsure about (help, unknown
option, a value out of range) goes to Click, so users always see Click's messages.
"""

from __future__ import annotations

import os

from vq.domain.arrays import MAX_ARRAY_SIZE
from vq.domain.durations import parse_duration, parse_moment
from vq.errors import InvalidInput, NotFound, UsageError
from vq.protocol.submit_fields import SUBMIT_FIELDS

# typing is imported for the type checker only: this module is on the Click-free
# `vq submit` fast path, where importing typing costs milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


__all__ = [
    "GIVEN",
    "STDIN_TAR_LABEL",
    "SUBMIT_OPTIONS",
    "Option",
    "build_params",
    "parse_fast",
    "release_spool",
]

#: ``workspace_source`` of a job whose workspace came as a tar on stdin (``--source-tar -``).
STDIN_TAR_LABEL = "ssh: source tar on stdin"

#: The largest ``--array-from`` file read (bytes).
MAX_ARRAY_FROM_BYTES = 16 * 1024 * 1024


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


#: ``--mem 2G``: the command line's unit form of ``mem_mb`` (no submit field of its own).
_MEM = Option("--mem", "mem", "str", "Memory limit with a unit: 500M, 2G (M = MiB).")

_FIELD_OPTIONS = tuple(
    Option(f.flag, f.dest, f.cli, f.help, f.default, f.minimum, f.maximum) for f in SUBMIT_FIELDS
)

#: The submit fields' options (:data:`vq.protocol.submit_fields.SUBMIT_FIELDS`, with
#: ``--mem`` beside ``--mem-mb``), then the command's own ``--source-tar``,
#: ``--submitter``, ``--export``, ``--env`` and ``--json``.
SUBMIT_OPTIONS: tuple[Option, ...] = (
    _FIELD_OPTIONS[0],
    _MEM,
    *_FIELD_OPTIONS[1:],
    Option(
        "--source-tar",
        "source_tar",
        "str",
        "Read the workspace as a tar stream from stdin ('-'); used by vq submit HOST.",
    ),
    Option(
        "--submitter",
        "submitter",
        "str",
        "Record NAME as who submitted the job (what the web API forwards when it delegates "
        "a submit here); multi-user mode records the caller's uid instead.",
    ),
    Option(
        "--export",
        "export",
        "str",
        "Environment to pass: ALL (local default; `[submit] export`), NONE (default for a "
        "HOST or LANE), or NAME[,NAME=value…].",
    ),
    Option(
        "--env", "env_vars", "multi", "Set NAME=value in the job's environment (repeatable).", ()
    ),
    Option("--json", "as_json", "flag", "Print the whole spec as JSON.", False),
)

_BY_FLAG = {option.flag: option for option in SUBMIT_OPTIONS}

#: Key in the parsed values holding the set of option destinations given explicitly.
GIVEN = "_given"

#: Submit parameter → the option that sets it. A parameter whose option was not given is
#: left out of the request, so a ``--profile`` (or the server's default) can fill it.
PARAM_OPTION = {f.name: f.dest for f in SUBMIT_FIELDS if f.profile}


def _int_in_range(option: Option, text: str) -> int | None:
    if not text.isascii():
        return None  # int() accepts other scripts' digits; Click refuses them clearly
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
    from datetime import UTC, datetime

    return parse_moment(text, datetime.now(UTC), ago=False).isoformat()


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
    _require_utf8(command, positional, values)
    wall_time = values.get("wall_time")
    backoff = values.get("retry_backoff")
    array_values = None
    if values.get("array_from") is not None:
        array_values = _array_lines(values["array_from"])
    array = None
    if values.get("array") is not None:
        from vq.domain.arrays import parse_array

        array = parse_array(values["array"])
    _require_runtime_pair(values.get("runtime_root"), values.get("runtime_artifact"))
    source = _source(positional)
    source_tar = values.get("source_tar")
    if source_tar is not None and source is not None:
        raise UsageError(
            "give either SOURCE or --source-tar, not both",
            hint="--source-tar - reads the workspace tar from stdin",
        )
    if source_tar is not None and source_tar != "-":
        raise UsageError(
            f"--source-tar takes '-' (stdin), not {source_tar!r}",
            hint="to submit a local archive, give it as SOURCE",
        )
    params: dict[str, Any] = {
        "command": command,
        "source": source,
        "cwd": os.path.abspath(cwd) if cwd else None,
        "cpus": values["cpus"],
        "mem_mb": _mem_mb(values),
        "wall_time_seconds": parse_duration(wall_time, bare_seconds=False) if wall_time else None,
        "priority": values["priority"],
        "not_before": _not_before(values.get("not_before")),
        "not_before_requested": _delay_text(values.get("not_before")),
        "job_name": values.get("job_name"),
        "tags": list(values["tags"]),
        "retry_max": values["retry_max"],
        "retry_backoff_seconds": parse_duration(backoff) if backoff else None,
        "depends_on": _full_ids(values.get("after")),
        "depends_on_any": _full_ids(values.get("after_any")),
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
        "environment": _environment(values),
        "scheduler_target": values.get("scheduler_target"),
        "runtime_root": values.get("runtime_root"),
        "runtime_artifact": values.get("runtime_artifact"),
        "scheduler_pack": values.get("pack"),
    }
    if values.get("submitter") is not None:
        params["submitter"] = values["submitter"]
    given = values.get(GIVEN)
    if given is not None and "mem" in given:
        given = given | {"mem_mb"}
    if given is not None:
        params = {
            key: value
            for key, value in params.items()
            if key not in PARAM_OPTION or PARAM_OPTION[key] in given
        }
    if source_tar is not None:  # last: every other check has passed before stdin is read
        params["source"], params["source_label"] = _spool_stdin_tar(), STDIN_TAR_LABEL
    return params


def _require_runtime_pair(root: str | None, digest: str | None) -> None:
    """A job is bound to a runtime generation by its root *and* its digest, or not at all."""
    if root is not None and digest is None:
        raise UsageError(
            "--runtime-root needs --runtime-artifact",
            hint=f"name the generation too: --runtime-artifact DIGEST (the digest "
            f"`vq runtime deploy DIR {root}` printed; the generations are under "
            f"{root}/generations)",
        )
    if digest is not None and root is None:
        raise UsageError(
            "--runtime-artifact needs --runtime-root",
            hint="name the root the generation was deployed to: --runtime-root ROOT "
            "(the ROOT given to `vq runtime deploy DIR ROOT`)",
        )


def _mem_mb(values: dict[str, Any]) -> int | None:
    if values.get("mem") is None:
        return values.get("mem_mb")
    if values.get("mem_mb") is not None and "mem_mb" in values.get(GIVEN, ("mem_mb",)):
        raise UsageError("give --mem or --mem-mb, not both", hint="--mem 2G is --mem-mb 2048")
    from vq.domain.sizes import parse_mem_mb

    return parse_mem_mb(values["mem"])


def _require_utf8(command: list[str], positional: list[str], values: dict[str, Any]) -> None:
    """Refuse argv bytes that are not UTF-8 (the spec stores text; they cannot round-trip)."""
    texts = [*command, *positional]
    texts += [v for v in values.values() if isinstance(v, str)]
    texts += [v for v in values.values() if isinstance(v, (list, tuple)) for v in v]
    for text in texts:
        if isinstance(text, str):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidInput(
                    f"argument {os.fsencode(text)!r} is not valid UTF-8",
                    hint="vq stores commands as text: pass such bytes through a file or "
                    "an escape the command decodes itself (printf '\\xff')",
                ) from None


def _spool_stdin_tar() -> str:
    """Copy the tar on stdin to ``<state-root>/incoming/`` (private) and return its path.

    The submit path then treats it as an ordinary ``.tar`` SOURCE (same safety checks);
    :func:`release_spool` removes it once the submit has returned.
    """
    import sys
    import tempfile

    from vq.config import roots

    incoming = os.path.join(roots.state_root(os.environ), "incoming")
    os.makedirs(incoming, mode=0o700, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix="stdin-", suffix=".tar", dir=incoming)
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := sys.stdin.buffer.read(1 << 20):
                out.write(chunk)
    except BaseException:
        os.unlink(path)
        raise
    return path


def release_spool(params: dict[str, Any]) -> None:
    """Remove the stdin tar spooled for ``params`` (a no-op for any other source)."""
    if params.get("source_label") == STDIN_TAR_LABEL and params.get("source"):
        try:
            os.unlink(params["source"])
        except OSError:
            pass


def _full_ids(given: list[str] | None) -> list[str]:
    """``--after``/``--after-any`` ids, short prefixes resolved (like every id argument).

    A prefix no job id starts with is tried as an array or chain group's; a full id is
    passed on as it is (the submit service expands a group id into its elements)."""
    if not given:
        return []
    from vq.cli.short_ids import resolve_job_id
    from vq.errors import NotFound

    def full(text: str) -> str:
        try:
            return resolve_job_id(text)
        except NotFound:
            from vq.cli.job_ids import resolve_group_id

            return resolve_group_id(text)

    return [full(text) for text in given]


def _environment(values: dict[str, Any]) -> dict[str, Any] | None:
    """The submitting shell's environment per ``--export``/``--env``.

    A local submit defaults to ``[submit] export``, then ALL. A scheduler-lane submit
    (``--scheduler-target``) runs on another host: it defaults to NONE, ignores
    ``[submit] export`` (a local default) and refuses ALL, so only the variables named by
    ``--export NAME``/``--env`` travel into its batch script.
    """
    from vq.domain.environment import BASE_DAEMON, BadEnvironment, capture

    export = values.get("export")
    lane = values.get("scheduler_target")
    configured = None
    if export is None and lane is None:
        from vq.cli.submit_env import configured_export

        configured = configured_export(os.environ)
    hint = "--export ALL|NONE|NAME[,NAME=value…] and --env NAME=value"
    try:
        captured = capture(
            os.environ,
            export,
            values.get("env_vars") or (),
            remote=lane is not None,
            configured=configured,
        )
    except BadEnvironment as exc:
        raise UsageError(str(exc), hint=hint) from None
    if lane is not None and captured.base != BASE_DAEMON:
        raise UsageError(
            f"--export ALL is not supported with scheduler lane {lane}",
            hint="name the variables the job needs: --export NAME[,NAME…] or --env NAME=value",
        )
    if values.get("pack") is not None and captured.variables:
        raise UsageError(
            "--export NAME and --env are not carried into packed allocations",
            hint="a packed element gets vq's VQ_* variables only; submit without --pack "
            "to forward variables",
        )
    script_own = sorted(name for name in captured.variables if name.startswith("vq_"))
    if lane is not None and script_own:
        raise UsageError(
            f"{script_own[0]} cannot be forwarded to scheduler lane {lane}",
            hint="vq_* names are the batch script's own shell variables; rename it",
        )
    return None if captured.is_empty else captured.to_json()


def _array_lines(path: str) -> list[str]:
    """The non-empty lines of an ``--array-from`` file, bounded in bytes and lines."""
    from vq._fs import FileTooLarge, NotRegularFile, read_regular

    try:
        data = read_regular(path, MAX_ARRAY_FROM_BYTES, follow=True)
    except FileNotFoundError:
        raise NotFound(f"--array-from file {path!r} does not exist") from None
    except OSError as exc:
        raise InvalidInput(
            f"cannot read --array-from file {path!r}: it {exc.strerror}"
            if isinstance(exc, (FileTooLarge, NotRegularFile))
            else f"cannot read --array-from file {path!r}: {exc.strerror}",
            hint=f"give a regular text file of at most {MAX_ARRAY_SIZE} lines "
            f"and {MAX_ARRAY_FROM_BYTES // (1024 * 1024)} MiB",
        ) from None
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise InvalidInput(f"--array-from file {path!r} is not UTF-8 text") from None
    values = [line for line in lines if line.strip()]
    if not values:
        raise InvalidInput(f"--array-from file {path!r} has no non-empty lines")
    if len(values) > MAX_ARRAY_SIZE:
        raise InvalidInput(
            f"--array-from file {path!r} has {len(values)} lines; arrays are limited to "
            f"{MAX_ARRAY_SIZE} elements",
            hint="split the list and submit several arrays",
        )
    return values
