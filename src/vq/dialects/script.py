"""The body of every vq batch script (POSIX sh; runs under dash), shared by the dialects.

The body's contract (docs/dialects.md, "The script contract"):

1. ``_vq/scheduler-job-id`` is written first (the scheduler's id, from the first set of
   the dialect's environment variables), so a driver that lost the id after ``sbatch``/``qsub`` can
   recover it from the workspace.
2. TERM, INT and HUP traps pass the signal on to the script's process group (Slurm's
   proctrack/cgroup signals only the batch shell), write ``_vq/exit-code`` = 128 +
   signal and exit with it, skipping copy-back and scratch cleanup. The command runs in
   the background and is waited for, so a trap runs at once, not after the command.
3. ``VQ_JOB_ID``, ``VQ_CPUS``, ``VQ_MEM_MB``, ``VQ_PROGRAM`` and the request's extra
   ``VQ_*`` variables are exported; driver-local program paths are unset.
4. GNU time and the receipt formatter (awk) are tried once on ``true``; if either is
   unusable the script writes an error receipt and exit marker 125 and stops before
   any site code or the payload runs.
5. With ``node_scratch_dir``: a node-local directory is created, seeded from the
   workspace (except ``_vq`` and the live logs) and becomes the working directory.
6. Site prologue, program prologue, the command under GNU time (program
   ``command_wrapper`` first, stdin from /dev/null), the receipt
   ``_vq/resource-usage.json``, program epilogue, site epilogue.
7. Copy-back from scratch (errors suppressed), then ``_vq/exit-code`` (temp file +
   rename) last of all the workspace files, then the scratch directory is removed.

Every argv element is quoted exactly once with :func:`shlex.quote`; hook and prologue
lines are trusted configuration and inserted verbatim.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from vq.dialects import _values as values
from vq.dialects.model import ScriptRequest, UnsafeSchedulerValue
from vq.dialects.runtime_check import commit_check_lines, generation_check_lines
from vq.domain.programs import PROGRAM_VARIABLES

__all__ = ["RECEIPT_FORMAT", "check_request", "render_body"]

#: The GNU time format of the raw receipt line the formatter reads.
RECEIPT_FORMAT = "vq-gnu-time %e %U %S %M"

#: Variables a scheduler job never inherits from the submitting session: driver-local
#: program paths and the local executor's workdir.
_UNSET = (*PROGRAM_VARIABLES, "VQ_WORKDIR", "VQ_MEM_MB")

_VARIABLES_SET_HERE = frozenset({"VQ_JOB_ID", "VQ_CPUS", "VQ_MEM_MB", "VQ_PROGRAM"})
#: Variables that hold paths on the driver: a scheduler job must never receive them.
_DRIVER_PATHS = frozenset(
    {"VQ_WORKDIR", "VQ_PROGRAM_EXE", "VQ_PROGRAM_BIN", "VQ_PROGRAM_PYTHON", "VQ_PROGRAM_GIT_DIR"}
)

# The receipt formatter: awk reads GNU time's raw output (its "Command terminated by
# signal N" line and our RECEIPT_FORMAT line) and prints the same JSON receipt as the
# local collector (schema vq.resource-usage.v1). It exits 1, printing nothing, when the
# raw receipt has no complete line.
_FORMATTER = r"""vq_receipt() {
	LC_ALL=C awk -v rc="$1" -v started="$2" -v finished="$3" '
	function str(s) { return s == "" ? "null" : "\"" s "\"" }
	/^Command terminated by signal [0-9]+$/ { sig = $5 }
	$1 == "vq-gnu-time" && NF == 5 { wall = $2; user = $3; sys = $4; rss = $5; seen = 1 }
	END {
		num = "^[0-9]+([.][0-9]+)?$"
		if (!seen || wall !~ num || user !~ num || sys !~ num || rss !~ /^[0-9]+$/) exit 1
		if (rc !~ /^[0-9]+$/) exit 1
		printf "{\n \"schema\": \"vq.resource-usage.v1\",\n \"status\": \"ok\",\n"
		printf " \"source\": \"gnu-time\",\n"
		printf " \"wall_seconds\": %s,\n", wall
		printf " \"user_cpu_seconds\": %s,\n", user
		printf " \"system_cpu_seconds\": %s,\n", sys
		printf " \"active_cpu_seconds\": %.2f,\n", user + sys
		printf " \"max_rss_kb\": %s,\n \"exit_code\": %s,\n", rss, rc
		printf " \"signal\": %s,\n", (sig == "" ? "null" : sig)
		printf " \"command_status\": \"%s\",\n", (sig == "" ? "exited" : "signaled")
		printf " \"started_at\": %s,\n", str(started)
		printf " \"finished_at\": %s,\n", str(finished)
		printf " \"process_count\": null,\n \"semantics\": {\n"
		printf "  \"wall_seconds\": \"GNU time %%e: elapsed real seconds\",\n"
		printf "  \"cpu\": \"GNU time %%U and %%S: user and system CPU seconds of the"
		printf " command and its waited-for descendants\",\n"
		printf "  \"max_rss_kb\": \"GNU time %%M: largest resident set of the command"
		printf " or a waited-for descendant, in KiB\",\n"
		printf "  \"process_count\": \"not collected by the scheduler script\"\n }\n}\n"
	}' "$4"
}"""

# $1: exit code, $2: command_status, $3: reason (plain text, no quotes or backslashes)
_ERROR_RECEIPT = r"""vq_error_receipt() {
	vq_tmp="$vq_marks/.resource-usage.json.$$"
	{
		printf '{\n "schema": "vq.resource-usage.v1",\n "status": "error",\n'
		printf ' "source": "gnu-time",\n "exit_code": %s,\n "signal": null,\n' "$1"
		printf ' "command_status": "%s",\n "error": "%s",\n' "$2" "$3"
		printf ' "process_count": null\n}\n'
	} >"$vq_tmp" && mv -f "$vq_tmp" "$vq_marks/resource-usage.json"
}"""

_HELPERS = r"""# vq_put NAME VALUE: VALUE and a newline into _vq/NAME (temp file, then rename).
vq_put() {
	printf '%s\n' "$2" >"$vq_marks/.$1.$$" && mv -f "$vq_marks/.$1.$$" "$vq_marks/$1"
}
# vq_finish CODE: the exit marker, then exit with CODE.
vq_finish() {
	vq_put exit-code "$1"
	exit "$1"
}
# vq_trap SIGNAL CODE: pass SIGNAL on to everything the script started (its process
# group; a scheduler may signal only this shell), then the exit marker CODE.
vq_trap() {
	trap '' HUP INT TERM
	kill -s "$1" -- "-$$" 2>/dev/null || kill -s "$1" $vq_child 2>/dev/null
	vq_finish "$2"
}
vq_now() {
	date -u '+%Y-%m-%dT%H:%M:%S+00:00' 2>/dev/null
}
# vq_copy_tree FROM TO: copy FROM's entries except _vq into TO; 1 if any copy failed.
vq_copy_tree() {
	vq_copy_rc=0
	for vq_f in "$1"/* "$1"/.[!.]* "$1"/..?*; do
		[ -e "$vq_f" ] || [ -h "$vq_f" ] || continue
		[ "${vq_f##*/}" = _vq ] && continue
		cp -PRp "$vq_f" "$2"/ || vq_copy_rc=1
	done
	return "$vq_copy_rc"
}"""


def check_request(request: ScriptRequest) -> None:
    """Refuse a request whose values cannot be rendered safely (names the field)."""
    values.check_job_id("job_id", request.job_id)
    values.check_nonce("nonce", request.nonce)
    values.check_text_argv("command", request.command)
    values.check_abs_path("workspace", request.workspace)
    values.check_relative_path("stdout_path", request.stdout_path)
    values.check_relative_path("stderr_path", request.stderr_path)
    values.check_abs_path("gnu_time_command", request.gnu_time_command)
    for name, number in (
        ("cpus", request.cpus),
        ("scheduler_tasks", request.scheduler_tasks),
        ("mem_mb", request.mem_mb),
        ("wall_time_seconds", request.wall_time_seconds),
    ):
        if number is None and name != "cpus":
            continue
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            raise UnsafeSchedulerValue(name, f"{number!r} is not a positive integer")
    if request.mem_directive not in ("request", "omit"):
        raise UnsafeSchedulerValue(
            "scheduler_mem_directive", f"{request.mem_directive!r} is not 'request' or 'omit'"
        )
    for name, value in (
        ("partition", request.partition),
        ("account", request.account),
        ("qos", request.qos),
    ):
        if value is not None:
            values.check_name(name, value)
    if request.runtime_generation is not None:
        values.check_abs_path("runtime_root", request.runtime_generation[0])
        digest = request.runtime_generation[1]
        if len(digest) != 64 or not set(digest) <= set("0123456789abcdef"):
            raise UnsafeSchedulerValue("runtime_artifact", f"{digest!r} is not a SHA-256 digest")
    if request.runtime_commit is not None:
        values.check_abs_path("runtime_git_dir", request.runtime_commit[0])
        commit = request.runtime_commit[1]
        if not 7 <= len(commit) <= 64 or not set(commit.lower()) <= set("0123456789abcdef"):
            raise UnsafeSchedulerValue("runtime_git_sha", f"{commit!r} is not a git commit")
    if request.node_scratch_dir is not None:
        values.check_scratch_template("node_scratch_dir", request.node_scratch_dir)
    if request.program is not None:
        values.check_text_argv("program", (request.program,))
    if request.hooks is not None:
        values.check_text_argv(
            "scheduler_program_hooks.command_wrapper",
            request.hooks.command_wrapper,
            allow_empty=True,
        )
        _check_lines("scheduler_program_hooks.prologue", request.hooks.prologue)
        _check_lines("scheduler_program_hooks.epilogue", request.hooks.epilogue)
    _check_lines("prologue", request.prologue)
    _check_lines("epilogue", request.epilogue)
    for name, value in request.environment.items():
        values.check_variable_name("environment", name)
        if name in _VARIABLES_SET_HERE:
            raise UnsafeSchedulerValue("environment", f"{name} is set by the script itself")
        if name in _DRIVER_PATHS:
            raise UnsafeSchedulerValue("environment", f"{name} is a path on the driver")
        values.check_text_argv(f"environment.{name}", (value,))
    for name, value in request.user_environment.items():
        values.check_user_variable_name("user_environment", name)
        values.check_text_argv(f"user_environment.{name}", (value,))


def _check_lines(field: str, lines: tuple[str, ...]) -> None:
    values.check_text_argv(field, lines, allow_empty=True)


def _q(text: str) -> str:
    return shlex.quote(text)


def _block(title: str, lines: Iterable[str]) -> list[str]:
    """Trusted shell lines as one brace group with stdin from /dev/null (a batch shell
    may be reading this very script from its stdin)."""
    body = list(lines)
    if not body:
        return []
    return [f"# {title} (trusted host configuration)", "{", *body, "} </dev/null"]


def _log_directories(workspace: str, request: ScriptRequest) -> list[str]:
    """``mkdir -p`` of log directories below the workspace (none for top-level logs)."""
    paths = (request.stdout_path, request.stderr_path)
    parents = sorted({path.rsplit("/", 1)[0] for path in paths if "/" in path})
    return [f"mkdir -p {_q(workspace + '/' + parent)}" for parent in parents]


def _first_set(names: tuple[str, ...]) -> str:
    """``${A:-${B-}}``: the first of the variables that is set and not empty."""
    expansion = f"${{{names[-1]}-}}"
    for name in reversed(names[:-1]):
        expansion = f"${{{name}:-{expansion}}}"
    return expansion


def render_body(request: ScriptRequest, *, scheduler_id_variables: tuple[str, ...]) -> str:
    """The script after the directives. ``request`` must have passed
    :func:`check_request`; ``scheduler_id_variables`` name where the job finds its
    scheduler id, e.g. ``("SLURM_JOB_ID",)``."""
    workspace = request.workspace.rstrip("/")
    hooks = request.hooks
    wrapper = hooks.command_wrapper if hooks else ()
    argv = " ".join(_q(arg) for arg in (*wrapper, *request.command))
    scratch = request.node_scratch_dir

    out: list[str] = [
        f"# vq job {request.job_id}: generated by vq, which reads what this script writes",
        "# under _vq/ (docs/dialects.md). Names starting with vq_ are reserved.",
        "",
        f"vq_ws={_q(workspace)}",
        'vq_marks="$vq_ws/_vq"',
        f"vq_time={_q(request.gnu_time_command)}",
        'vq_raw="$vq_marks/resource-usage.time"',
        f"vq_fmt={_q(RECEIPT_FORMAT)}",
        "",
        _HELPERS,
        "",
        _FORMATTER,
        "",
        _ERROR_RECEIPT,
        "",
        'mkdir -p "$vq_marks" || exit 125',
        f'vq_put scheduler-job-id "{_first_set(scheduler_id_variables)}"',
        "vq_child=",
        "trap 'vq_trap HUP 129' HUP",
        "trap 'vq_trap INT 130' INT",
        "trap 'vq_trap TERM 143' TERM",
        *_log_directories(workspace, request),
        f"command exec >>{_q(workspace + '/' + request.stdout_path)} "
        f"2>>{_q(workspace + '/' + request.stderr_path)} || vq_finish 125",
        'cd "$vq_ws" || vq_finish 125',
        "",
        "unset " + " ".join(_UNSET),
        f"export VQ_JOB_ID={request.job_id} VQ_CPUS={request.cpus}",
    ]
    if request.mem_mb is not None:
        out.append(f"export VQ_MEM_MB={request.mem_mb}")
    if request.program is not None:
        out.append(f"export VQ_PROGRAM={_q(request.program)}")
    for name in sorted(request.environment):
        out.append(f"export {name}={_q(request.environment[name])}")
    out += [
        "",
        "# GNU time and the receipt formatter must work before anything else runs.",
        'if ! { [ -x "$vq_time" ] && "$vq_time" -o "$vq_raw" -f "$vq_fmt" true </dev/null &&',
        '\tvq_receipt 0 "" "" "$vq_raw" >/dev/null; } 2>/dev/null; then',
        "\tprintf 'vq: %s (GNU time) or awk (the receipt formatter) is unusable;' \"$vq_time\" >&2",
        "\tprintf ' the command was not started\\n' >&2",
        '\tvq_error_receipt 125 not_run "GNU time or the receipt formatter is unusable"',
        "\tvq_finish 125",
        "fi",
        'rm -f "$vq_raw"',
    ]
    if request.user_environment:
        out += ["", "# the variables the submit named (--export NAME, --env NAME=value)"]
        for name in sorted(request.user_environment):
            out.append(f"export {name}={_q(request.user_environment[name])}")
    if request.runtime_generation is not None:
        out += generation_check_lines(*request.runtime_generation)
    if request.runtime_commit is not None:
        out += commit_check_lines(*request.runtime_commit)
    if scratch is not None:
        out += [
            "",
            "# node-local scratch: seeded from the workspace, the working directory of the job",
            f'vq_scratch_base="{scratch}"',
            f'mkdir -p "$vq_scratch_base" && vq_scratch=$(mktemp -d "$vq_scratch_base/vq-'
            f'{request.job_id}.XXXXXX") || {{',
            "\tprintf 'vq: cannot create node scratch under %s; the command was not started\\n' "
            '"$vq_scratch_base" >&2',
            '\tvq_error_receipt 125 not_run "node scratch could not be created"',
            "\tvq_finish 125",
            "}",
            'if ! vq_copy_tree "$vq_ws" "$vq_scratch"; then',
            "\tprintf 'vq: cannot seed node scratch %s; the command was not started\\n' "
            '"$vq_scratch" >&2',
            '\tvq_error_receipt 125 not_run "node scratch could not be seeded"',
            "\tvq_finish 125",
            "fi",
            f'rm -f "$vq_scratch"/{_q(request.stdout_path)} '
            f'"$vq_scratch"/{_q(request.stderr_path)}',
            'cd "$vq_scratch" || vq_finish 125',
        ]
    out.append("")
    out += _block("site prologue", request.prologue)
    out += _block("program prologue", hooks.prologue if hooks else ())
    out += [
        "vq_started=$(vq_now)",
        "# In the background and waited for, so that a signal is handled at once.",
        f'"$vq_time" -o "$vq_raw" -f "$vq_fmt" -- {argv} </dev/null &',
        "vq_child=$!",
        'wait "$vq_child"',
        "vq_rc=$?",
        "vq_child=",
        "vq_finished=$(vq_now)",
        'if vq_receipt "$vq_rc" "$vq_started" "$vq_finished" "$vq_raw" '
        '>"$vq_marks/.resource-usage.json.$$" 2>/dev/null; then',
        '\tmv -f "$vq_marks/.resource-usage.json.$$" "$vq_marks/resource-usage.json"',
        "else",
        '\tvq_error_receipt "$vq_rc" unknown "GNU time wrote no complete receipt"',
        "fi",
        'rm -f "$vq_raw"',
    ]
    out += _block("program epilogue", hooks.epilogue if hooks else ())
    out += _block("site epilogue", request.epilogue)
    if scratch is not None:
        out += [
            'cd "$vq_ws" || :',
            'vq_copy_tree "$vq_scratch" "$vq_ws" 2>/dev/null || :',
            'vq_put exit-code "$vq_rc"',
            'rm -rf "$vq_scratch" 2>/dev/null',
            'exit "$vq_rc"',
        ]
    else:
        out.append('vq_finish "$vq_rc"')
    return "\n".join(out) + "\n"
