"""Every field a submission may carry, declared once: name, value kind, limits, help, flag.

The models and option tables that accept submit fields are derived from
:data:`SUBMIT_FIELDS`:

* ``vq submit``'s options (:mod:`vq.cli.submit_options`, Click and the fast path);
* the ``submit`` RPC params (:class:`vq.protocol.messages.SubmitParams`);
* the ``[profile.NAME]`` presets (:class:`vq.config.settings.ProfileSettings`: the ``profile``
  fields);
* the resubmit overrides (``vq resubmit``'s options and
  :class:`vq.web.api.models.ResubmitRequest`: the ``override`` fields);
* the web API's submit body (:class:`vq.web.api.submit.JobRequest`): every field but
  those whose ``not_over_http`` says why not.

A model declares each field's Python type (the type checker needs it) and takes its
default, limits and description from :func:`constraints`; ``tests/unit/test_submit_fields``
fails when a model's fields and this table disagree.

Without ``typing`` or pydantic at run time (only the domain's limits): the Click-free
``vq submit`` path imports it.
"""

from __future__ import annotations

from vq.domain.durations import MAX_DURATION_SECONDS
from vq.domain.names import MAX_JOB_NAME
from vq.domain.sizes import MAX_MEM_MB

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["SUBMIT_FIELDS", "SubmitField", "constraints", "field"]


class SubmitField:
    """One submit field.

    ``name``: the params/spec field; ``kind``: its value ("int", "str", "bool",
    "str_list", "int_list", "datetime"); ``flag``/``dest``/``cli``: the ``vq submit``
    option, its parsed name and how it is parsed ("int", "str", "flag", "multi");
    ``default``; ``minimum``/``maximum`` (numbers), ``min_length``/``max_length`` (strings
    and lists), ``pattern`` (strings);
    ``profile``: a ``[profile.NAME]`` may preset it; ``override``: the web API's resubmit
    may change it; ``not_over_http``: why ``POST /api/v1/jobs`` does not take it (None:
    it does).
    """

    __slots__ = (
        "cli",
        "default",
        "dest",
        "flag",
        "help",
        "kind",
        "max_length",
        "maximum",
        "min_length",
        "minimum",
        "name",
        "not_over_http",
        "override",
        "pattern",
        "profile",
    )

    def __init__(
        self,
        name: str,
        kind: str,
        flag: str,
        dest: str,
        cli: str,
        help: str,
        *,
        default: Any = None,
        minimum: int | None = None,
        maximum: int | None = None,
        min_length: int | None = None,
        max_length: int | None = None,
        pattern: str | None = None,
        profile: bool = False,
        override: bool = False,
        not_over_http: str | None = None,
    ) -> None:
        self.name, self.kind, self.flag, self.dest, self.cli = name, kind, flag, dest, cli
        self.help, self.default = help, default
        self.minimum, self.maximum = minimum, maximum
        self.min_length, self.max_length, self.pattern = min_length, max_length, pattern
        self.profile, self.override = profile, override
        self.not_over_http = not_over_http


F = SubmitField
_GROUPS = "arrays and chains take no idempotency key yet"

#: In ``vq submit --help`` order.
SUBMIT_FIELDS: tuple[SubmitField, ...] = (
    F("cpus", "int", "--cpus", "cpus", "int", "CPUs to reserve.",
      default=1, minimum=1, maximum=4096, profile=True, override=True),
    F("mem_mb", "int", "--mem-mb", "mem_mb", "int", "Memory limit in MB.",
      minimum=1, maximum=MAX_MEM_MB, profile=True, override=True),
    F("wall_time_seconds", "int", "--wall-time", "wall_time", "str",
      "Wall-time limit: 90s, 10m, 2h30m, 1d or [D-]HH:MM:SS (a bare number is refused).",
      minimum=1, maximum=MAX_DURATION_SECONDS, profile=True, override=True),
    F("priority", "int", "--priority", "priority", "int", "Higher runs first.",
      default=0, minimum=-1000, maximum=1000, profile=True, override=True),
    F("not_before", "datetime", "--not-before", "not_before", "str",
      "Start no earlier than an ISO time or a delay."),
    F("job_name", "str", "--job-name", "job_name", "str", "A name for the job.",
      min_length=1, max_length=MAX_JOB_NAME, override=True),
    F("tags", "str_list", "--tag", "tags", "multi", "A tag (repeatable).",
      default=(), max_length=32, profile=True),
    F("retry_max", "int", "--retry", "retry_max", "int",
      "Rerun a failing command up to N more times.",
      default=0, minimum=0, maximum=100, profile=True),
    F("retry_backoff_seconds", "int", "--retry-backoff", "retry_backoff", "str",
      "First retry delay (doubles each time).", minimum=1, maximum=86400),
    F("depends_on", "str_list", "--after", "after", "multi",
      "Start after this job COMPLETED (repeatable).", default=(), max_length=10000),
    F("depends_on_any", "str_list", "--after-any", "after_any", "multi",
      "Start after this job ended (repeatable).", default=(), max_length=10000),
    F("array", "int_list", "--array", "array", "str",
      "Submit an array: indices like 0-99 or 1,5,7-9.", min_length=1, max_length=100000,
      not_over_http=_GROUPS),
    F("array_values", "str_list", "--array-from", "array_from", "str",
      "Submit an array: one element per line of FILE.", min_length=1, max_length=100000,
      not_over_http=_GROUPS),
    F("max_parallel", "int", "--max-parallel", "max_parallel", "int",
      "Run at most N elements of the array at once.", minimum=1, not_over_http=_GROUPS),
    F("chain", "int", "--chain", "chain", "int",
      "Submit N segments, each after the previous success.", minimum=2, maximum=10000,
      not_over_http=_GROUPS),
    F("rerun_until_file_exists", "str", "--rerun-until-file-exists", "rerun_until", "str",
      "Rerun a COMPLETED job (as a sibling) until PATH exists.", min_length=1, max_length=1024),
    F("rerun_max", "int", "--rerun-max", "rerun_max", "int",
      "At most N reruns (default 10).", minimum=1, maximum=1000),
    F("clean_workdir_on_terminal", "bool", "--clean-workdir", "clean_workdir", "flag",
      "Delete $VQ_WORKDIR when the job ends.", default=False, profile=True),
    F("recover_on_reboot", "bool", "--auto-resume", "auto_resume", "flag",
      "After a reboot or daemon crash lost it, rerun the job as a sibling.", default=False),
    F("idempotency_key", "str", "--idempotency-key", "idempotency_key", "str",
      "Repeat-safe submit: the same key and intent return the same job.",
      min_length=1, max_length=256),
    F("profile", "str", "--profile", "profile", "str",
      "Presets from [profile.NAME]; flags given win.", min_length=1, max_length=128),
    F("program", "str", "--program", "program", "str",
      "A registered [programs.NAME]; pins checked.",
      min_length=1, max_length=128, profile=True),
    F("expected_sha", "str", "--expected-sha", "expected_sha", "str",
      "Pin a venv --program to this git SHA (a prefix), checked at submit and dispatch.",
      pattern=r"^[0-9a-fA-F]{4,64}$"),
    F("cwd", "str", "--cwd", "cwd", "str", "Run here instead of the workspace.",
      not_over_http="a server path"),
    F("runtime_root", "str", "--runtime-root", "runtime_root", "str",
      "Bind the job to a generation of this runtime deployment root (with "
      "--runtime-artifact); its payload is exported as VQ_RUNTIME_PAYLOAD.",
      min_length=2, max_length=4096, not_over_http="not offered over HTTP yet"),
    F("runtime_artifact", "str", "--runtime-artifact", "runtime_artifact", "str",
      "The generation's digest (vq runtime deploy); verified at submit and dispatch.",
      pattern=r"^[0-9a-f]{64}$", not_over_http="not offered over HTTP yet"),
    F("scheduler_target", "str", "--scheduler-target", "scheduler_target", "str",
      "Run through this scheduler lane ([hosts.NAME] with scheduler_dialect); "
      "what `vq submit LANE` sets.",
      pattern=r"^[a-z0-9][a-z0-9-]{0,62}$",
      not_over_http="not offered over HTTP yet (`host` delegates to a remote daemon)"),
    F("scheduler_pack", "str", "--pack", "pack", "str",
      "Pack the array's elements into Slurm allocations of [packing.NAME] "
      "(`vq submit LANE --array … --pack NAME`).",
      pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", not_over_http=_GROUPS),
)  # fmt: skip

_BY_NAME = {f.name: f for f in SUBMIT_FIELDS}


def field(name: str) -> SubmitField:
    """The declaration of submit field ``name`` (KeyError for an unknown one)."""
    return _BY_NAME[name]


def constraints(name: str, *, optional: bool = False, required: bool = False) -> dict[str, Any]:
    """Keyword arguments for a pydantic ``Field`` of submit field ``name``.

    ``description``, the limits (``ge``, ``le``, ``min_length``, ``max_length``,
    ``pattern``) and the
    default (a list default as a ``default_factory``); ``optional``: default None
    instead (profile presets and overrides, where absent means "not given");
    ``required``: no default at all (the web API's ``idempotency_key``).
    """
    declared = _BY_NAME[name]
    kwargs: dict[str, Any] = {"description": declared.help}
    for key, value in (
        ("ge", declared.minimum),
        ("le", declared.maximum),
        ("min_length", declared.min_length),
        ("max_length", declared.max_length),
        ("pattern", declared.pattern),
    ):
        if value is not None:
            kwargs[key] = value
    if required:
        pass
    elif optional or declared.default is None:
        kwargs["default"] = None
    elif isinstance(declared.default, tuple):
        kwargs["default_factory"] = list
    else:
        kwargs["default"] = declared.default
    return kwargs
