"""Rosters: the ordered, append-only task list of one pack, and its document (pure).

A task is an opaque ``key``, an argument vector and byte-exact stdin. The CLI reads them from
JSONL lines of exactly ``{"key", "args", "stdin_file"}`` (:func:`parse_task_lines`; the
caller reads each ``stdin_file``, relative to the JSONL file).

Growth (:func:`compare_rosters`): the same sequence again is a no-op; the exact registered
sequence followed by new tasks appends them (revision + 1); anything else — a changed,
removed or reordered task, or a suffix alone — is refused. A sealed roster accepts only the
exact sequence. :class:`PackDocument` is ``pack.json``: versioned, validated completely on
every read (stdin digests included).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from vq.domain.validation_words import JSON_WORDS, first_problem

__all__ = [
    "MAX_ARG_BYTES",
    "MAX_STDIN_BYTES",
    "MAX_TASKS",
    "PACK_SCHEMA",
    "Attempt",
    "AttemptIntent",
    "PackDocument",
    "RosterRefused",
    "StoredTask",
    "Task",
    "TaskLine",
    "check_args",
    "compare_rosters",
    "parse_task_lines",
    "roster_digest",
    "validate_pack_name",
]

PACK_SCHEMA = "vq.pack/1"
MAX_TASKS = 100_000
MAX_ARGS = 4096
MAX_ARG_BYTES = 128 * 1024
MAX_STDIN_BYTES = 1 << 20
KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
PACK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class RosterRefused(ValueError):
    """A roster input or change vq refuses; ``line`` is the 1-based JSONL line, if any."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.line = line


def validate_pack_name(name: str) -> str:
    if not PACK_NAME.fullmatch(name):
        raise RosterRefused(
            f"{name!r} is not a pack name (1-64 letters, digits, '.', '_', '-'; "
            "starting with a letter or digit)"
        )
    return name


@dataclass(frozen=True)
class Task:
    """One opaque unit of work. ``args[0]`` is the program; ``stdin`` is fed byte-exact."""

    key: str
    args: tuple[str, ...]
    stdin: bytes = b""

    @property
    def stdin_sha256(self) -> str:
        return hashlib.sha256(self.stdin).hexdigest()


@dataclass(frozen=True)
class TaskLine:
    """One parsed JSONL line; ``stdin_file`` is still a path relative to the JSONL file."""

    key: str
    args: tuple[str, ...]
    stdin_file: str | None
    line: int


def check_args(args: Any, line: int | None = None) -> tuple[str, ...]:
    if not isinstance(args, list) or not args or len(args) > MAX_ARGS:
        raise RosterRefused(f"args must be a non-empty array of at most {MAX_ARGS}", line=line)
    if not all(isinstance(arg, str) for arg in args):
        raise RosterRefused("args must hold strings only", line=line)
    if any("\x00" in arg for arg in args):
        raise RosterRefused("args must not contain NUL bytes", line=line)
    if args[0].startswith("-"):
        raise RosterRefused("args[0] is the program and must not start with '-'", line=line)
    if sum(len(arg.encode()) for arg in args) > MAX_ARG_BYTES:
        raise RosterRefused(f"args exceed {MAX_ARG_BYTES} bytes", line=line)
    return tuple(args)


def parse_task_lines(text: str) -> list[TaskLine]:
    """Parse TASKS.jsonl text; blank lines are refused like any malformed line."""
    tasks: list[TaskLine] = []
    seen: set[str] = set()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise RosterRefused("the task file is empty")
    if len(lines) > MAX_TASKS:
        raise RosterRefused(f"more than {MAX_TASKS} tasks")
    for number, raw in enumerate(lines, start=1):
        try:
            item = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise RosterRefused(f"not a JSON object ({exc.msg})", line=number) from None
        if not isinstance(item, dict) or set(item) != {"key", "args", "stdin_file"}:
            raise RosterRefused(
                'each line is an object of exactly "key", "args" and "stdin_file"', line=number
            )
        key = item["key"]
        if not isinstance(key, str) or not KEY.fullmatch(key):
            raise RosterRefused(
                "key must be 1-128 letters, digits, '.', '_', '-' (starting with a letter "
                "or digit)",
                line=number,
            )
        if key in seen:
            raise RosterRefused(f"key {key!r} appears twice", line=number)
        seen.add(key)
        stdin_file = item["stdin_file"]
        if stdin_file is not None:
            parts = stdin_file.split("/") if isinstance(stdin_file, str) else None
            if (
                parts is None
                or not stdin_file
                or stdin_file.startswith("/")
                or "\x00" in stdin_file
                or any(part in ("", ".", "..") for part in parts)
            ):
                raise RosterRefused(
                    "stdin_file must be null or a relative path below the task file's "
                    "directory (no '..')",
                    line=number,
                )
        tasks.append(TaskLine(key, check_args(item["args"], number), stdin_file, number))
    return tasks


def roster_digest(tasks: Sequence[Task]) -> str:
    """SHA-256 over the canonical ordered roster (keys, args, stdin digests)."""
    canonical = json.dumps(
        [[task.key, list(task.args), task.stdin_sha256] for task in tasks],
        separators=(",", ":"),
        ensure_ascii=True,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def compare_rosters(
    registered: Sequence[Task], incoming: Sequence[Task], *, sealed: bool
) -> Literal["same", "append"]:
    """How ``incoming`` relates to the registered roster; refuses every other change."""
    if len(incoming) < len(registered) or tuple(incoming[: len(registered)]) != tuple(registered):
        first = next(
            (
                index
                for index, task in enumerate(registered)
                if index >= len(incoming) or incoming[index] != task
            ),
            len(registered),
        )
        raise RosterRefused(
            f"the task file does not start with the {len(registered)} registered tasks "
            f"(first difference at task {first + 1}): tasks can be appended, never changed, "
            "removed or reordered"
        )
    if len(incoming) == len(registered):
        return "same"
    if sealed:
        raise RosterRefused("the pack is sealed: no task can be added")
    if len(incoming) > MAX_TASKS:
        raise RosterRefused(f"more than {MAX_TASKS} tasks")
    return "append"


# --- the pack.json document ---------------------------------------------------------
_DOC = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class StoredTask(BaseModel):
    model_config = _DOC

    key: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
    args: Annotated[list[str], Field(min_length=1, max_length=MAX_ARGS)]
    stdin_b64: str
    stdin_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]

    @classmethod
    def of(cls, task: Task) -> StoredTask:
        return cls(
            key=task.key,
            args=list(task.args),
            stdin_b64=base64.b64encode(task.stdin).decode(),
            stdin_sha256=task.stdin_sha256,
        )

    def task(self) -> Task:
        stdin = base64.b64decode(self.stdin_b64, validate=True)
        if hashlib.sha256(stdin).hexdigest() != self.stdin_sha256:
            raise ValueError(f"task {self.key}: stdin does not match its digest")
        return Task(self.key, tuple(self.args), stdin)


class AttemptIntent(BaseModel):
    """What was about to be sent, recorded before ``sbatch`` (no task arguments or stdin).

    The route (the profile's label, its resolved ``target`` and ``resources`` and their
    digests), the allocation's shape and totals, the plan's and script's digests, the
    exact ``sbatch`` command, the retry and duplicate-risk choices, and when.
    """

    model_config = _DOC

    recorded_at: Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")]
    profile: str
    target: dict[str, Any]
    resources: dict[str, Any]
    target_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    resources_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    cpus: int = Field(ge=1)
    memory_mib: int = Field(ge=1)
    gpus: int = Field(ge=0)
    time: str
    sbatch_command: list[str]
    plan_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    shape_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    script_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    retry: list[str] = Field(default_factory=list)
    allow_duplicate_risk: list[str] = Field(default_factory=list)


class Attempt(BaseModel):
    """One allocation's submission record (written by the submission path).

    ``outcome``: ``intent`` (recorded before ``sbatch``; with no receipt it is ambiguous),
    ``accepted`` (the receipt: ``job_id``, ``cluster``) or ``not_submitted`` (resolved by
    an operator). ``revision`` is the pack revision of the outcome. One tagged outcome: an
    attempt can never be both accepted and not submitted. ``how`` says how the outcome was
    reached: ``sbatch`` (its own receipt), ``reconcile`` (one exact identity adopted from
    accounting) or ``resolve`` (an operator's word).
    """

    model_config = _DOC

    allocation_id: Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]
    task_keys: list[str]
    outcome: Literal["intent", "accepted", "not_submitted"]
    revision: int = Field(ge=1)
    job_id: str | None = None
    cluster: str | None = None
    intent: AttemptIntent | None = None
    how: Literal["sbatch", "reconcile", "resolve"] | None = None
    decided_at: str | None = None

    @model_validator(mode="after")
    def _receipt_matches_outcome(self) -> Attempt:
        if (self.outcome == "accepted") != (self.job_id is not None):
            raise ValueError("an accepted attempt has a job_id; no other attempt has one")
        return self


class PackDocument(BaseModel):
    """``<state-root>/packs/<name>/pack.json``."""

    model_config = _DOC

    schema_: Literal["vq.pack/1"] = Field(alias="schema")
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    pack_id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
    revision: int = Field(ge=1)
    sealed: bool
    created_at: str
    updated_at: str
    tasks: Annotated[list[StoredTask], Field(min_length=1, max_length=MAX_TASKS)]
    attempts: list[Attempt] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> PackDocument:
        keys = [task.key for task in self.tasks]
        if len(set(keys)) != len(keys):
            raise ValueError("a task key appears twice")
        known = set(keys)
        seen: set[str] = set()
        for attempt in self.attempts:
            if attempt.allocation_id in seen:
                raise ValueError(f"allocation {attempt.allocation_id} is recorded twice")
            seen.add(attempt.allocation_id)
            if not set(attempt.task_keys) <= known:
                raise ValueError(f"allocation {attempt.allocation_id} names unknown tasks")
        return self

    def roster(self) -> list[Task]:
        return [stored.task() for stored in self.tasks]

    def to_bytes(self) -> bytes:
        """Canonical compact JSON (sorted keys): written once per window of a submit, so
        it goes through the C encoder (an indented dump is pure Python, about 4× slower);
        readers parse it and never compare layouts."""
        document = self.model_dump(mode="json", by_alias=True)
        return (json.dumps(document, separators=(",", ":"), sort_keys=True) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> PackDocument:
        """Parse and validate completely (stdin digests too); ValueError when refused."""
        try:
            document = cls.model_validate_json(data)
        except ValidationError as exc:
            where, message = first_problem(exc, "document", JSON_WORDS)
            raise ValueError(f"{where}: {message}") from None
        document.roster()  # every stdin decodes and matches its digest
        return document
