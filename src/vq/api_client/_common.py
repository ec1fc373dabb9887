"""Shared pieces of the HTTP clients: result types, errors, request bodies, extraction.

Stdlib, httpx and vq leaf modules only (no FastAPI, no pydantic models of the server).
"""

from __future__ import annotations

import base64
import io
import os
import tarfile
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, cast

import httpx

from vq._tar import extract_checked
from vq.domain.archive_rules import Member, MemberKind, check_members
from vq.domain.events import Event
from vq.domain.states import TERMINAL_NAMES
from vq.errors import UnsafeArchive
from vq.protocol.answers import StatusView, SubmitAnswer

__all__ = [
    "TERMINAL",
    "ApiError",
    "FileContent",
    "RunResult",
    "SubmitResult",
    "WaitResult",
    "check_inputs",
    "error_of",
    "extract_outputs",
    "pack_directory",
    "submit_body",
]

FileContent = bytes | str | Path

#: Terminal state names (§3.3); a wait loop stops at any of them.
TERMINAL = TERMINAL_NAMES
#: Statuses worth retrying (the server or the daemon was briefly unavailable).
RETRY_STATUSES = frozenset({500, 502, 503, 504})


class JobDetail(TypedDict, total=False):
    """``GET /api/v1/jobs/{id}`` as the server sent it: the ``vq status --json`` view,
    its recent events and its receipt. The keys this client reads are declared (and
    their types checked when read); the others pass through as sent."""

    id: str
    state: str
    exit_code: int | None
    failure_reason: str | None
    job_name: str | None
    events: list[Event]


class FieldProblem(TypedDict):
    """One refused field of a 422 answer's ``details``: where, and why."""

    loc: str
    message: str


class ApiError(Exception):
    """An error answer: HTTP ``status`` and the body's ``code``, ``message``, ``hint``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        hint: str | None = None,
        details: list[FieldProblem] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint
        self.details = details or []
        self.retry_after = retry_after


@dataclass(frozen=True)
class SubmitResult:
    id: str
    state: str | None
    #: False when the idempotency key named an earlier job (HTTP 200).
    created: bool
    #: The whole ``vq submit --json`` object.
    spec: SubmitAnswer = field(repr=False)


@dataclass(frozen=True)
class WaitResult:
    id: str
    state: str
    changed: bool
    timed_out: bool
    #: The ``vq status --json`` view.
    job: StatusView = field(repr=False)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL


@dataclass(frozen=True)
class JobStatus:
    """``GET /api/v1/jobs/{id}``: the main facts typed, the whole view in ``job``."""

    id: str
    state: str
    exit_code: int | None
    failure_reason: str | None
    job_name: str | None
    #: The most recent events (``events.jsonl`` records), oldest first.
    events: list[Event] = field(repr=False)
    #: The whole ``vq status --json`` view (with its events and receipt).
    job: JobDetail = field(repr=False)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @classmethod
    def from_view(cls, view: JobDetail) -> JobStatus:
        exit_code, reason = view.get("exit_code"), view.get("failure_reason")
        name, events = view.get("job_name"), view.get("events")
        return cls(
            id=str(view.get("id")),
            state=str(view.get("state")),
            exit_code=exit_code if isinstance(exit_code, int) else None,
            failure_reason=reason if isinstance(reason, str) else None,
            job_name=name if isinstance(name, str) else None,
            events=[e for e in events if isinstance(e, dict)] if isinstance(events, list) else [],
            job=view,
        )


@dataclass(frozen=True)
class RunResult:
    """What :meth:`Client.run` ends with. ``failure_reason`` and ``failure_tail`` (the
    last lines of stderr) are set for a job that did not complete, as in ``vq status``."""

    id: str
    state: str
    exit_code: int | None
    outputs_dir: Path | None
    failure_reason: str | None = None
    failure_tail: str | None = None

    @classmethod
    def of(cls, job_id: str, final: WaitResult, outputs_dir: Path | None) -> RunResult:
        """The result of a finished wait (``final``) and the downloaded outputs."""
        job: Mapping[str, object] = final.job if final.state in TERMINAL else {}

        def text(key: str) -> str | None:
            value = job.get(key)
            return value if isinstance(value, str) else None

        exit_code = job.get("exit_code")
        return cls(
            job_id,
            final.state,
            exit_code if isinstance(exit_code, int) else None,
            outputs_dir,
            text("failure_reason"),
            text("failure_tail"),
        )


def error_of(response: httpx.Response) -> ApiError:
    """The :class:`ApiError` of an error answer, whatever its body (a proxy's HTML page,
    truncated JSON, an ``error`` that is not an object)."""
    try:
        body = response.json()
    except ValueError:  # also UnicodeDecodeError
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    hint, details = error.get("hint"), error.get("details")
    retry = response.headers.get("retry-after")
    return ApiError(
        response.status_code,
        str(error.get("code") or f"http-{response.status_code}"),
        str(error.get("message") or response.reason_phrase),
        hint if isinstance(hint, str) else None,
        [cast(FieldProblem, d) for d in details if isinstance(d, dict)]
        if isinstance(details, list)
        else None,
        float(retry) if retry and retry.replace(".", "", 1).isdigit() else None,
    )


def check_inputs(files: dict[str, FileContent] | None, upload: Path | None) -> None:
    """Refuse ``files`` together with ``upload`` before anything is sent."""
    if files and upload is not None:
        raise ValueError("give files or upload, not both")


def _content(value: FileContent) -> bytes:
    if isinstance(value, Path):
        return value.read_bytes()
    return value.encode() if isinstance(value, str) else value


def submit_body(
    command: list[str],
    key: str | None,
    files: dict[str, FileContent] | None,
    upload_token: str | None,
    fields: dict[str, Any],
) -> dict[str, Any]:
    """The JSON of ``POST /api/v1/jobs`` (a fresh uuid4 key when ``key`` is None)."""
    body: dict[str, Any] = {
        "command": list(command),
        "idempotency_key": key or str(uuid.uuid4()),
        **fields,
    }
    if files:
        body["inputs"] = {
            "files": {
                name: base64.b64encode(_content(value)).decode() for name, value in files.items()
            }
        }
    elif upload_token is not None:
        body["inputs"] = {"upload_token": upload_token}
    return body


def pack_directory(directory: Path) -> Path:
    """A temporary ``.tar.gz`` of ``directory``'s content (the caller removes it)."""
    fd, name = tempfile.mkstemp(suffix=".tar.gz", prefix="vq-upload-")
    os.close(fd)
    with tarfile.open(name, "w:gz") as tar:
        for child in sorted(directory.iterdir()):
            tar.add(child, arcname=child.name)
    return Path(name)


def _member(info: tarfile.TarInfo) -> Member:
    # vq's own ``_vq/`` is expected in outputs: check it like any other top-level name.
    head, sep, rest = info.name.partition("/")
    name = f"x{head}{sep}{rest}" if head == "_vq" else info.name
    if info.isfile():
        return Member(name, MemberKind.FILE)
    if info.isdir():
        return Member(name, MemberKind.DIR)
    if info.issym():
        return Member(name, MemberKind.SYMLINK, info.linkname)
    if info.islnk():
        return Member(name, MemberKind.HARDLINK, info.linkname)
    return Member(name, MemberKind.OTHER)


def extract_outputs(data: bytes | Path, dest: Path) -> Path:
    """Extract an ``outputs.tar.gz`` into ``dest`` (its single top directory stripped).

    Every member is checked with vq's archive rules first (no absolute paths, ``..``,
    links out or special files), then extracted with tar's ``data`` filter (before
    Python 3.11.4, with the modes and ownership that filter would give). ``dest`` must
    not exist or be empty.
    """
    source = io.BytesIO(data) if isinstance(data, bytes) else open(data, "rb")  # noqa: SIM115
    with source, tarfile.open(fileobj=source, mode="r:gz") as tar:
        infos = tar.getmembers()
        tops = {info.name.split("/", 1)[0] for info in infos}
        if len(tops) != 1:
            raise UnsafeArchive("the outputs archive should have exactly one top directory")
        top = tops.pop()
        inner = [i for i in infos if i.name.rstrip("/") != top]
        for info in inner:
            info.name = info.name[len(top) + 1 :]
        check_members(_member(info) for info in inner)
        dest.mkdir(parents=True, exist_ok=True)
        if any(dest.iterdir()):
            raise FileExistsError(f"{dest} is not empty")
        extract_checked(tar, dest, inner)
    return dest
