"""Delegated submission: ``vq submit HOST [SOURCE] … -- CMD`` (§2.2, §3.5, §4.8).

Contract:

- SOURCE is checked and read under the same rules as a local submit: it is materialized
  into a private scratch workspace here (refusing what a local submit refuses), then
  packed as one tar. The remote side runs ``vq submit --source-tar - --json …`` and
  extracts it with its own checks. No SOURCE: nothing is uploaded.
- Before anything is sent the request is staged in ``<state-root>/outbox/<entry>/``
  (:mod:`vq.remote.outbox`: ``request.json``, and ``source.tar``). The entry is removed
  once the remote answered (accepted or refused) or the call provably never reached the
  host.
- The HTTP API's fields become ``vq submit`` options (:func:`options_from_fields`), its
  ``submitter`` too (``--submitter``): the delegated job records who asked for it, not
  the account the request arrived under.
- ``--idempotency-key`` is forwarded once, verbatim. Once the call may have started, any
  answer that cannot be read is :class:`~vq.errors.OutcomeUnknown` (exit 12; HTTP 504):
  a timeout, a dropped connection, output past the cap, an exit without the remote vq's
  own ``vq: error:`` line, an unexpected error of the remote vq (exit 1), or an answer
  that is not a valid ``vq submit --json`` payload
  (:class:`~vq.protocol.remote_answers.SubmitAnswer`: a well-formed job id, or a group
  with its jobs). Nothing is replayed, the outbox entry
  is kept, and the hint says to rerun with the same key (which returns the original job
  if the first call got through). Only a refusal the remote vq reported (its
  ``vq: error:`` line with its exit code) or a call that provably never reached the host
  removes the entry without an answer.
- Reconciliation: when a keyed submit is accepted, the entries kept for earlier attempts
  with the same host and key are settled by that answer and removed
  (:func:`vq.remote.outbox.resolve`; an attempt still in flight is left to settle
  itself); they are named in the payload's ``reconciled_outbox`` (absent when there
  were none).
- A host without a running daemon still accepts the job (its spec is written there) and
  says so on its stderr, as a local submit does (:data:`vq.cli.output.NO_DAEMON`): that
  notice is passed back as ``host_notices`` (the host's words, escaped; absent when it
  said nothing of the kind) and the host's health records ``daemon: not_running``
  (``running`` otherwise).
"""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict, cast

from vq.errors import (
    NotFound,
    OutcomeUnknown,
    RemoteProtocolError,
    TransportError,
    UnsupportedSpecVersion,
)
from vq.hosts.health import remote_text
from vq.protocol.answers import ListRow
from vq.protocol.remote_answers import SubmitAnswer
from vq.remote.host import RemoteHost, may_have_run, remote_error, said_vq_error
from vq.remote.outbox import OutboxRequest, Staged, discard, outbox_dir, resolve, stage
from vq.transport.runner import RunResult

__all__ = [
    "RemoteSubmitAnswer",
    "delegate_submit",
    "options_from_fields",
    "outbox_dir",
    "pack_source",
]


class RemoteSubmitAnswer(TypedDict, total=False):
    """Another host's ``vq submit --json``, as :class:`~vq.protocol.remote_answers.
    SubmitAnswer` checked it (a job's ``id`` and ``state``, or a group's id and its
    ``jobs``; the other fields as sent), plus ``reconciled_outbox``: the outbox entries
    this answer settled."""

    id: str
    state: str
    jobs: list[ListRow]
    array_group_id: str
    chain_group_id: str
    capacity_warnings: list[str]
    idempotent_replay: bool
    reconciled_outbox: list[str]
    host_notices: list[str]


#: Upload budget on top of ssh_timeout: a slow link still gets this many bytes a second.
_UPLOAD_BYTES_PER_S = 4 << 20


#: Submit field → its ``vq submit`` option (the HTTP API's fields, §10.2, with the lane
#: a ``host`` naming a lane sets and the ``submitter`` the API records: the job keeps
#: who asked for it on the host it is delegated to).
_FIELD_OPTIONS = {
    "cpus": "--cpus",
    "mem_mb": "--mem-mb",
    "priority": "--priority",
    "job_name": "--job-name",
    "retry_max": "--retry",
    "rerun_until_file_exists": "--rerun-until-file-exists",
    "rerun_max": "--rerun-max",
    "profile": "--profile",
    "program": "--program",
    "expected_sha": "--expected-sha",
    "runtime_root": "--runtime-root",
    "runtime_artifact": "--runtime-artifact",
    "scheduler_target": "--scheduler-target",
    "submitter": "--submitter",
}


def options_from_fields(fields: dict[str, Any]) -> list[str]:
    """The ``vq submit`` options carrying submit ``fields`` (as the HTTP API names them)."""
    options: list[str] = []
    for name, value in fields.items():
        if value is None or name == "command":
            continue
        if name in _FIELD_OPTIONS:
            options += [_FIELD_OPTIONS[name], str(value)]
        elif name == "wall_time_seconds":
            options += ["--wall-time", f"{int(value)}s"]
        elif name == "retry_backoff_seconds":
            options += ["--retry-backoff", f"{int(value)}s"]
        elif name == "not_before":
            moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
            options += ["--not-before", moment.isoformat()]
        elif name in ("tags", "depends_on", "depends_on_any"):
            flag = {"tags": "--tag", "depends_on": "--after", "depends_on_any": "--after-any"}
            for item in value:
                options += [flag[name], str(item)]
        elif name == "clean_workdir_on_terminal":
            options += ["--clean-workdir"] if value else []
        elif name == "recover_on_reboot":
            options += ["--auto-resume"] if value else []
        elif name == "environment":  # the API's env: added to the remote daemon's
            options += ["--export", "NONE"]
            for key, item in sorted(dict(value.get("variables") or {}).items()):
                options.append(f"--env={key}={item}")
        else:
            raise ValueError(f"submit field {name!r} cannot be delegated to a remote host")
    return options


def pack_source(source: Path) -> bytes:
    """SOURCE as an uncompressed tar, after the local submit's safety checks."""
    from vq.store.workspace import materialize

    if not source.exists() and not source.is_symlink():
        raise NotFound(
            f"source {str(source)!r} does not exist",
            hint="SOURCE is a file, a directory or a .tar/.tar.gz/.tar.bz2/.zip archive",
        )
    scratch = Path(tempfile.mkdtemp(prefix="vq-pack-"))
    try:
        workspace = scratch / "ws"
        materialize(source, workspace, sync_parent=False)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for child in sorted(workspace.iterdir()):
                if child.name != "_vq":
                    tar.add(child, arcname=child.name, recursive=True)
        return buffer.getvalue()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def delegate_submit(
    host: RemoteHost,
    options: list[str],
    command: list[str],
    source: Path | None,
    *,
    idempotency_key: str | None,
) -> RemoteSubmitAnswer:
    """Submit on ``host``; returns the remote ``--json`` payload (see the module docstring).

    ``options`` are the submit options as given (``--idempotency-key`` included once);
    ``--json`` and ``--source-tar -`` are added here.
    """
    tar = pack_source(source) if source is not None else None
    words = ["submit", "--json", *options]
    if tar is not None:
        words += ["--source-tar", "-"]
    words += ["--", *command]
    request: OutboxRequest = {
        "host": host.name,
        "argv": words,
        "idempotency_key": idempotency_key,
        "source": str(source) if source is not None else None,
        "created_at": datetime.now(UTC).isoformat(),
    }
    staged = stage(host.state_root, host.name, request, tar)
    try:
        return _send(host, words, tar, staged, idempotency_key)
    finally:
        staged.release()


def _send(
    host: RemoteHost, words: list[str], tar: bytes | None, staged: Staged, key: str | None
) -> RemoteSubmitAnswer:
    """Run the staged submit once and read its answer (see the module docstring)."""
    entry = staged.path
    deadline = host.timeout + (len(tar) / _UPLOAD_BYTES_PER_S if tar else 0.0)
    try:
        result = host.run(words, stdin=tar if tar is not None else b"", deadline_s=deadline)
    except TransportError as exc:
        if not may_have_run(exc):
            discard(entry)  # it never reached the host
            raise
        raise _unknown(host, entry, key, exc.message) from exc
    if result.rc != 0:
        if said_vq_error(result) and result.rc != 1:  # the remote vq refused it
            discard(entry)
            raise remote_error(host.name, result)
        raise _unknown(host, entry, key, _unread(result))
    try:
        payload = cast(RemoteSubmitAnswer, host.read(words, result.stdout, SubmitAnswer))
    except RemoteProtocolError as exc:
        raise _unknown(host, entry, key, exc.message) from exc
    except UnsupportedSpecVersion:
        discard(entry)  # accepted, in a spec this vq cannot read
        raise
    discard(entry)
    _note_daemon(host, result, payload)
    if key is not None:
        settled = resolve(host.state_root, host.name, key, keep=entry)
        if settled:
            payload["reconciled_outbox"] = [str(e.path) for e in settled]
    return payload


#: The words of a host's notice that no daemon runs there (:data:`vq.cli.output.NO_DAEMON`).
_NO_DAEMON_WORDS = "no daemon is running"


def _note_daemon(host: RemoteHost, result: RunResult, payload: RemoteSubmitAnswer) -> None:
    """Pass the host's "no daemon is running" notice back (``host_notices``) and record
    what it says of the daemon in the host's health."""
    from vq.hosts.health import record_daemon

    said = [
        remote_text(line.removeprefix("vq: "))
        for line in result.stderr.decode(errors="replace").splitlines()
        if line.startswith("vq: ") and _NO_DAEMON_WORDS in line
    ]
    if said:
        payload["host_notices"] = said
    record_daemon(host.state_root, host.name, "not_running" if said else "running")


def _unread(result: RunResult) -> str:
    """Why an answer with a non-zero status tells nothing about the job."""
    lines = result.stderr.decode(errors="replace").strip().splitlines()
    said = f": {remote_text(lines[-1])}" if lines else ""
    return f"vq there exited with status {result.rc}{said}"


def _unknown(host: RemoteHost, entry: Path, key: str | None, why: str) -> OutcomeUnknown:
    rerun = "rerun the same command with the same --idempotency-key once the host answers"
    return OutcomeUnknown(
        f"the submit to host {host.name} may or may not have been accepted "
        f"({why}); the request is kept in {entry}",
        hint=rerun
        if key
        else f"check `vq queue {host.name}` before resubmitting; "
        "use --idempotency-key to make submits repeat-safe",
    )
