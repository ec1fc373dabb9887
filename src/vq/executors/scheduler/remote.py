"""Blocking operations on a scheduler lane's login host, through a :class:`Runner`.

Everything here runs on the lane's worker thread, never on the daemon loop: staging a
workspace (tar over SSH into ``<scratch_root>/.vibeqc-cluster/jobs/<jobid>/``), running
the dialect's queries (submit, status, accounting, control, find-by-tag), reading the
remote exit marker and copying the workspace back (tar over SSH, safe extraction).

Contracts:

* Staging is idempotent: a second stage of the same job overwrites the same files.
* A query's answer is parsed by the dialect's own parser; a transport failure raises
  :class:`~vq.errors.TransportError` (the caller backs off; it is never evidence about
  a job).
* Copy-back extracts through Python's ``data`` filter after the archive rules checked
  every member, and never writes the driver's own ``_vq/events.jsonl``.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from vq._tar import extract_checked, tar_member
from vq.config.hosts import LaneSettings
from vq.dialects import (
    AccountingReport,
    CommandResult,
    ControlAction,
    ControlOutcome,
    ParseFailure,
    Query,
    RecheckRequired,
    SchedulerDialect,
    SplitRequired,
    StatusReport,
    SubmitAccepted,
    TagMatch,
)
from vq.dialects.submit_guard import GuardState, guarded_submit_argv, parse_guard, probe_argv
from vq.domain.archive_rules import check_members
from vq.errors import OutputTooLarge, UnsafeArchive
from vq.transport.runner import Runner

__all__ = ["SCRIPT_NAME", "LaneRemote", "stage_archive"]

#: The batch script's place in the remote workspace.
SCRIPT_NAME = "_vq/job.sh"
#: Local files that never travel to the cluster or back: the driver's own records, and
#: the submit's captured environment (its named variables travel in the batch script).
_DRIVER_ONLY = frozenset({"_vq/events.jsonl", "_vq/scheduler-intent.json", "_vq/environment"})
#: The largest workspace staged or copied back in one call.
MAX_TRANSFER_BYTES = 512 << 20

T = TypeVar("T")

#: ``timeout``'s exit status when it stopped the command, and after it had to kill it.
_TIMED_OUT, _KILLED = 124, 137

_PACK = 'cd -- "$1" && tar -cf - .'
_CAT_IF = 'if [ -f "$1" ]; then cat -- "$1"; else exit 3; fi'


def stage_archive(workspace: Path, script: str) -> bytes:
    """An uncompressed tar of ``workspace`` (without the driver's own records) plus the
    batch script at ``_vq/job.sh``, in memory."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for root, dirs, files in os.walk(workspace):
            dirs.sort()
            for name in sorted(dirs + files):
                path = Path(root) / name
                relative = path.relative_to(workspace).as_posix()
                if relative in _DRIVER_ONLY or relative == SCRIPT_NAME:
                    continue
                tar.add(path, arcname=relative, recursive=False)
        data = script.encode()
        info = tarfile.TarInfo(SCRIPT_NAME)
        info.size, info.mode = len(data), 0o700
        if not (workspace / "_vq").is_dir():
            meta = tarfile.TarInfo("_vq")
            meta.type, meta.mode = tarfile.DIRTYPE, 0o700
            tar.addfile(meta)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def pack_archive(workspaces: Sequence[Path], script: bytes, script_name: str) -> bytes:
    """An uncompressed tar of a packed allocation: slot ``n``'s directory ``n/`` holds
    ``workspaces[n]`` without its ``_vq/`` records (the slot's own ``_vq/`` is the batch
    script's), and ``script_name`` holds the batch script (0700), in memory. Raises
    :class:`OSError` when a workspace cannot be read or the whole exceeds
    :data:`MAX_TRANSFER_BYTES`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for slot, workspace in enumerate(workspaces):
            for root, dirs, files in os.walk(workspace):
                if Path(root) == workspace:
                    dirs[:] = [d for d in dirs if d != "_vq"]
                dirs.sort()
                for name in sorted(dirs + files):
                    path = Path(root) / name
                    arcname = f"{slot}/{path.relative_to(workspace).as_posix()}"
                    tar.add(path, arcname=arcname, recursive=False)
            if buffer.tell() > MAX_TRANSFER_BYTES:
                raise OSError(f"the workspaces exceed {MAX_TRANSFER_BYTES >> 20} MiB")
        folder = tarfile.TarInfo(str(Path(script_name).parent))
        folder.type, folder.mode = tarfile.DIRTYPE, 0o700
        tar.addfile(folder)
        info = tarfile.TarInfo(script_name)
        info.size, info.mode = len(script), 0o700
        tar.addfile(info, io.BytesIO(script))
    return buffer.getvalue()


class LaneRemote:
    """One lane's login host: its runner, dialect and scratch layout."""

    def __init__(self, lane: LaneSettings, runner: Runner, dialect: SchedulerDialect) -> None:
        self.lane = lane
        self.runner = runner
        self.dialect = dialect

    @property
    def deadline(self) -> float:
        return max(5.0, self.lane.ssh_timeout * 3)

    def workspace(self, job_id: str) -> str:
        return self.lane.remote_workspace(job_id)

    def script_path(self, job_id: str) -> str:
        return f"{self.workspace(job_id)}/{SCRIPT_NAME}"

    # --- queries ---------------------------------------------------------------------------
    @property
    def query_limit(self) -> float:
        """How long a scheduler query may run on the login host before it is stopped
        there: a few seconds inside the SSH call's deadline, so a hung ``squeue`` comes
        back as a slow scheduler (the host answered), never as a lost host."""
        return max(1.0, self.deadline - 3.0)

    def ask(self, query: Query[T]) -> T | ParseFailure:
        """Run ``query`` on the login host under ``timeout`` (:attr:`query_limit`) and
        parse the answer; a query stopped there is a ``timed_out`` failure (never
        evidence about a job). A transport failure raises TransportError."""
        limit = f"{self.query_limit:g}"
        result = self.runner.run(
            ["timeout", "-k", "1", limit, *query.argv], deadline_s=self.deadline
        )
        if result.rc in (_TIMED_OUT, _KILLED) and not result.stdout.strip():
            command = next((w for w in query.argv if w != "env" and "=" not in w), "query")
            return ParseFailure(
                command, "timed_out", f"{command} timed out: no answer within {limit} s"
            )
        return query.parse(
            CommandResult(
                result.rc,
                result.stdout.decode(errors="replace"),
                result.stderr.decode(errors="replace"),
            )
        )

    def stage_and_submit(
        self,
        job_id: str,
        archive: bytes,
        records: str,
        token: str,
        supersede: str | None = None,
    ) -> GuardState:
        """Under the submit guard of ``records`` (:mod:`vq.dialects.submit_guard`): unpack
        ``archive`` into the job's remote workspace and submit its script, in one SSH call,
        unless an earlier call of this attempt already did (its recorded answer) or still
        may (``busy``). A transport failure raises :class:`~vq.errors.TransportError` and
        is ambiguous (the submit may have run)."""
        query = self.dialect.submit(self.script_path(job_id))
        argv = guarded_submit_argv(
            records, token, query.argv, workspace=self.workspace(job_id), supersede=supersede
        )
        result = self.runner.run(
            argv, stdin=archive, deadline_s=self.deadline + len(archive) / (1 << 20)
        )
        return parse_guard(
            result.stdout.decode(errors="replace"), result.stderr.decode(errors="replace")
        )

    def submit_state(self, records: str) -> GuardState:
        """What the submit guard of ``records`` holds (nothing is run): ``busy``, an
        ``answer``, ``in_doubt`` or ``none``."""
        result = self.runner.run(
            probe_argv(records), deadline_s=self.deadline, max_output_bytes=64 << 10
        )
        return parse_guard(
            result.stdout.decode(errors="replace"), result.stderr.decode(errors="replace")
        )

    def parse_submit(self, job_id: str, answer: GuardState) -> SubmitAccepted | ParseFailure:
        """The submit command's own answer inside ``answer`` (kind ``answer``), read by
        the dialect's submit parser."""
        query = self.dialect.submit(self.script_path(job_id))
        return query.parse(CommandResult(answer.rc or 0, answer.stdout, answer.stderr))

    def status(self, ids: Sequence[str]) -> StatusReport | ParseFailure:
        """One status round: the dialect's one query (its fallback when the answer is
        over the output cap); a recheck asks the ids an owner query did not list by id;
        a Slurm split (an id the scheduler rejected by name) asks each id alone, as
        §8.2 requires."""
        query = self.dialect.status(ids)
        try:
            answer = self.ask(query)
        except OutputTooLarge:
            if query.fallback is None:
                raise
            instead = self.ask(query.fallback)
            answer = instead
        if isinstance(answer, RecheckRequired):
            by_id = self.ask(answer.query)
            return answer.merge(self._resolved(by_id))
        return self._resolved(answer)

    def _resolved(
        self, answer: StatusReport | SplitRequired | RecheckRequired | ParseFailure
    ) -> StatusReport | ParseFailure:
        if isinstance(answer, RecheckRequired):  # a by-id query never asks again
            return answer.report
        if not isinstance(answer, SplitRequired):
            return answer
        singles: dict[str, StatusReport | SplitRequired | RecheckRequired | ParseFailure] = {}
        for one in answer.ids:
            single = self.ask(self.dialect.status([one]))
            singles[one] = single
        return answer.resolve(singles)

    def accounting(self, ids: Sequence[str], since: datetime) -> AccountingReport | None:
        query = self.dialect.accounting(ids, since)
        if query is None or self.lane.accounting == "none":
            return None
        answer = self.ask(query)
        return answer if isinstance(answer, AccountingReport) else None

    def control(self, action: ControlAction, scheduler_job_id: str) -> ControlOutcome:
        answer = self.ask(self.dialect.control(action, scheduler_job_id))
        if isinstance(answer, ParseFailure):
            return ControlOutcome("failed", answer.detail)
        return answer

    def find_by_tag(self, job_id: str, since: datetime) -> tuple[TagMatch, ...] | None:
        """Every scheduler job tagged for ``job_id`` (None: a query could not be read)."""
        found: dict[str, TagMatch] = {}
        for query in self.dialect.find_by_tag(job_id, since):
            answer = self.ask(query)
            if isinstance(answer, ParseFailure):
                return None
            for match in answer:
                found.setdefault(match.scheduler_job_id, match)
        return tuple(found.values())

    # --- files -----------------------------------------------------------------------------
    def read_small(self, job_id: str, relative: str) -> str | None:
        """A small file of the remote workspace, or None when it does not exist."""
        path = f"{self.workspace(job_id)}/{relative}"
        result = self.runner.run(
            ["sh", "-c", _CAT_IF, "sh", path], deadline_s=self.deadline, max_output_bytes=4096
        )
        if result.rc == 3:
            return None
        result.check(f"reading {relative}")
        return result.stdout.decode(errors="replace")

    def exit_marker(self, job_id: str) -> int | None:
        """``_vq/exit-code`` of the remote workspace: the return code, or None."""
        text = self.read_small(job_id, "_vq/exit-code")
        text = (text or "").strip()
        return int(text) if text.isdigit() and int(text) < 65536 else None

    def copy_back(self, job_id: str, destination: Path) -> None:
        """Copy the remote workspace into ``destination`` (the local workspace)."""
        result = self.runner.run(
            ["sh", "-c", _PACK, "sh", self.workspace(job_id)],
            deadline_s=self.deadline * 4,
            max_output_bytes=MAX_TRANSFER_BYTES,
        )
        result.check("copying the workspace back")
        extract(result.stdout, destination)


def extract(archive: bytes, destination: Path) -> None:
    """Extract a copy-back tar into ``destination`` safely: the payload's entries pass
    the archive rules, ``_vq/`` brings back only regular files directly below it (the
    script's markers and receipt), the ``data`` filter applies to all, and the driver's
    own records are never overwritten. On a Python without the ``data`` filter
    (Debian 12's 3.11.2) the archive rules' checks stand alone and each entry's mode and
    owner are made what the filter would make them (:func:`vq._tar.extract_checked`)."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        payload: list[tarfile.TarInfo] = []
        meta: list[tarfile.TarInfo] = []
        for info in tar.getmembers():
            name = info.name.removeprefix("./")
            if name in ("", ".") or name in _DRIVER_ONLY:
                continue
            info.name = name
            if name == "_vq" and info.isdir():
                meta.append(info)
            elif name.startswith("_vq/"):
                if not info.isfile() or "/" in name[4:]:
                    raise UnsafeArchive(f"copy-back entry {name!r} is not a plain _vq file")
                meta.append(info)
            else:
                payload.append(info)
        check_members(tar_member(info) for info in payload)
        extract_checked(tar, destination, [*meta, *payload])
