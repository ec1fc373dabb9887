"""The local executor: jobs run on this host under a collector in their own process group.

It owns the fork server (launches never fork the daemon), the collector's files (exit
marker, spawn-failure note, ``collector.pid``), the process groups (signals, always
after an identity check against pid reuse), ``/proc`` sampling, and the cgroup scope
probe and wrapper (§5.2). See :mod:`vq.executors.base` for the contracts.

Usable without a fork server (the CLI's no-daemon ``vq kill``/``pause``/``resume``):
only ``launch`` needs one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from vq._safe_open import read_regular_beneath
from vq.domain.affinity import thread_defaults
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import storage_error
from vq.paths import StatePaths
from vq.transport.local import LocalRunner

from . import procs
from .base import JobHandle, LaunchResult, Recovered, RecoveryKind
from .cgroups import JOB_CGROUP_MODE, CgroupMode, scope_argv, scope_name, stop_scope
from .cgroups import probe as probe_cgroups
from .forkserver_client import ForkServer
from .identity import find_job_processes, group_is_job, job_processes
from .job_scopes import JobScopes
from .launch import CollectorExit, Launched, LaunchError, LaunchRequest
from .owner_drop import PrivilegeDrop, make_meta_dir
from .sampling import GroupUsage, sample_groups, sample_process
from .start_record import fence, start_record_path

__all__ = ["SPAWN_ERROR_NAME", "LocalExecutor"]

#: The collector's note, next to the exit marker, that the command never started.
SPAWN_ERROR_NAME = "spawn-error"
#: A scoped launch writes SCOPE_REQUESTED_NAME before it is sent; the command, once inside
#: its scope, touches SCOPE_ENTERED_NAME and execs. One without the other after the exit
#: means the scope could not be created: a launch failure, not the command's exit code.
SCOPE_REQUESTED_NAME = "scope-requested"
SCOPE_ENTERED_NAME = "scope-entered"
#: Run inside the scope: note the entry with the scope's cgroup lines (``$0`` is the
#: note's path; shell builtins only, so no extra task is counted), then become the command.
_ENTER_SCOPE = 'while read -r l; do echo "$l"; done < /proc/self/cgroup > "$0" && exec "$@"'


@dataclass
class _Census:
    """One ``/proc`` scan for a whole recovery pass."""

    groups: dict[int, list[int]]
    by_job: dict[str, list[int]]


class LocalExecutor:
    """Runs jobs on this host (see the module docstring)."""

    name = "local"

    def __init__(
        self,
        paths: StatePaths,
        forkserver: ForkServer | None = None,
        runner: LocalRunner | None = None,
        command_prefix: Callable[[JobSpec], list[str]] = lambda spec: [],
        privilege_drop: PrivilegeDrop | None = None,
    ) -> None:
        self.paths = paths
        self.privilege_drop = privilege_drop
        self.forkserver = forkserver
        self.runner = runner or LocalRunner()
        self.cgroup = CgroupMode("direct", "not probed yet")
        self._extra_prefix = command_prefix
        self._census: _Census | None = None
        self.scopes = JobScopes(self.runner)

    # --- the fork server ------------------------------------------------------------------
    def attach_fork_server(self, on_exit: Callable[[CollectorExit], None]) -> ForkServer:
        """Create the fork server; its collectors' exits are delivered to ``on_exit`` (on
        the server's reader thread)."""
        self.forkserver = ForkServer(on_exit)
        return self.forkserver

    def start(self) -> None:
        """Start the fork server (a no-op while it runs)."""
        if self.forkserver is not None:
            self.forkserver.start()

    def restart_if_dead(self) -> bool:
        """Start a fork server that died; True if it had (its collectors are orphans now,
        to be watched through ``/proc``)."""
        if self.forkserver is None or self.forkserver.alive():
            return False
        self.forkserver.start()
        return True

    def close(self) -> None:
        """Stop the fork server; running collectors and their jobs go on."""
        if self.forkserver is not None:
            self.forkserver.close()

    def launcher_status(self, timeout: float) -> tuple[bool, str]:
        """Whether the fork server answers a ping within ``timeout`` seconds."""
        if self.forkserver is None:
            return False, "the fork server has not been started"
        pid = self.forkserver.server_pid
        if self.forkserver.ping(timeout=timeout):
            return True, f"pid {pid} answers"
        return False, f"the fork server (pid {pid}) does not answer"

    # --- cgroup scopes (§5.2) ---------------------------------------------------------
    def probe_scopes(self) -> CgroupMode:
        """Run the bounded scope probe once; later launches follow its answer. With the
        collector drop there is nothing to probe: each job gets its own cgroup."""
        self.cgroup = JOB_CGROUP_MODE if self.privilege_drop else probe_cgroups(self.runner)
        return self.cgroup

    def _prefix(self, spec: JobSpec, mem_mb: int | None) -> list[str]:
        scope: list[str] = []
        if self.cgroup.scoped and self.privilege_drop is None:
            entered = str(self.paths.meta_dir(spec.id) / SCOPE_ENTERED_NAME)
            scope = [
                *scope_argv(spec.id, spec.cpus, mem_mb),
                "/bin/sh",
                "-c",
                _ENTER_SCOPE,
                entered,
            ]
        return [*scope, *self._extra_prefix(spec)]

    def released(self, job_id: str) -> None:
        """The attempt's budget is freed: stop its scope (best-effort)."""
        self.scopes.forget(job_id)
        if self.cgroup.scoped:
            stop_scope(self.runner, job_id)

    # --- launch --------------------------------------------------------------------------
    def start_record_path(self, spec: JobSpec) -> Path | None:
        return start_record_path(self.paths, spec)

    def fence_unstarted(self, spec: JobSpec) -> bool:
        """Prove that the current attempt's command never started and never will
        (:func:`vq.executors.start_record.fence`); False for a claim without a token
        (an older claim: no proof)."""
        path = self.start_record_path(spec)
        return path is not None and fence(path)

    def spawn_error_path(self, job_id: str) -> Path:
        return self.paths.exit_code(job_id).with_name(SPAWN_ERROR_NAME)

    def launch(
        self,
        spec: JobSpec,
        env: Mapping[str, str],
        mem_mb: int | None,
        reply: Callable[[LaunchResult], None],
    ) -> None:
        """Send the launch to the fork server; the answer comes through ``reply`` (on the
        server's reader thread). Raises LaunchError when nothing could be sent, or
        StorageError when the state root could not take the launch's files."""
        paths = self.paths
        job_id = spec.id
        for stale in (
            paths.exit_code(job_id),
            paths.resource_usage(job_id),
            paths.collector_pid(job_id),
            self.spawn_error_path(job_id),
            paths.meta_dir(job_id) / SCOPE_REQUESTED_NAME,
            paths.meta_dir(job_id) / SCOPE_ENTERED_NAME,
        ):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stale)  # a previous attempt's files must never be read as ours
        if self.forkserver is None:
            raise LaunchError("this executor has no fork server")
        scoped = self.cgroup.scoped and self.privilege_drop is None
        if scoped:
            self.scopes.clear_leak(job_id)
        workspace = paths.workspace(job_id)
        try:
            drop = None
            if self.privilege_drop is not None:
                # The owner's trees: the drop creates VQ_WORKDIR itself, as the owner.
                drop = self.privilege_drop.request(spec, mem_mb, str(paths.workdir(job_id)))
                drop["meta"] = list(make_meta_dir(paths.tree_of(job_id), paths.meta_dir(job_id)))
            else:
                paths.workdir(job_id).mkdir(parents=True, exist_ok=True)
                paths.meta_dir(job_id).mkdir(parents=True, exist_ok=True)
            request = LaunchRequest(
                job_id=job_id,
                argv=[*self._prefix(spec, mem_mb), *spec.command],
                cwd=Path(spec.cwd) if spec.cwd else workspace,
                env=dict(env),
                stdout=workspace / spec.stdout_path,
                stderr=workspace / spec.stderr_path,
                exit_code_path=paths.exit_code(job_id),
                usage_path=paths.resource_usage(job_id),
                thread_defaults=thread_defaults(spec.cpus),
                cpu_affinity=spec.cpu_affinity,
                start_record=self.start_record_path(spec),
                drop=drop,
            )
            request.to_message()  # refuse an ill-formed request here, not on the wire
            if scoped:
                (paths.meta_dir(job_id) / SCOPE_REQUESTED_NAME).touch()
        except (ValueError, OSError) as exc:
            full = storage_error(exc, self.paths.root)
            if full is not None:  # not the job's fault: the claim goes back to the queue
                raise full from exc
            raise LaunchError(str(exc)) from exc

        def answered(job_id: str, launched: Launched | None, error: str | None, sent: bool) -> None:
            reply(LaunchResult(job_id, launched, error, sent))

        self.forkserver.launch_async(request, answered)

    # --- observe ---------------------------------------------------------------------------
    def exit_code(self, job_id: str) -> int | None:
        """The command's exit code from ``_vq/exit-code``, or None if absent or invalid."""
        try:
            raw = read_regular_beneath(self.paths.tree_of(job_id), self.paths.exit_code(job_id), 64)
            text = raw.decode("ascii", "replace").strip()
        except OSError:
            return None
        return int(text) if text.isdigit() and int(text) < 65536 else None

    def oom_killed(self, job_id: str) -> bool:
        """Whether the kernel killed the command for its memory limit: the collector's
        receipt counts OOM kills in the job's own cgroup (the privilege drop's group) and
        the command died of SIGKILL. Only a dropped job has such a group of its own."""
        if self.privilege_drop is None:
            return False
        try:
            receipt = json.loads(
                read_regular_beneath(
                    self.paths.tree_of(job_id), self.paths.resource_usage(job_id), 1 << 16
                )
            )
        except (OSError, ValueError):
            return False
        return (
            isinstance(receipt, dict)
            and int(receipt.get("cgroup_oom_kills") or 0) > 0
            and receipt.get("signal") == signal.SIGKILL
        )

    def spawn_failure(self, job_id: str) -> str | None:
        """Why the command could not be started, if it could not: the collector's note,
        or a scoped launch that never entered its scope."""
        try:
            raw = read_regular_beneath(
                self.paths.tree_of(job_id), self.spawn_error_path(job_id), 4096
            )
            text = raw.decode(errors="replace").strip()
        except FileNotFoundError:
            meta = self.paths.meta_dir(job_id)
            if (meta / SCOPE_REQUESTED_NAME).exists() and not (meta / SCOPE_ENTERED_NAME).exists():
                return (
                    f"the job's cgroup scope {scope_name(job_id)} could not be created "
                    "(systemd-run's message is in the job's stderr)"
                )
            return None
        except OSError:
            return None
        return text or "the command could not be started"

    def running(self, handle: JobHandle) -> bool:
        """Whether any member of the job's group is alive (zombies count as gone)."""
        return handle.pgid is not None and bool(procs.live_group_members(handle.pgid))

    def still_running(self, handles: Iterable[JobHandle]) -> set[str]:
        """The jobs whose recorded group is provably theirs and still has a live member
        (:func:`~vq.executors.identity.group_is_job`). For several handles one ``/proc``
        scan first keeps only the groups that have a live member at all."""
        wanted = [h for h in handles if h.pgid is not None]
        if len(wanted) > 1:
            live = procs.live_groups()
            wanted = [h for h in wanted if h.pgid in live]
        return {h.job_id for h in wanted if group_is_job(h.job_id, h.pgid, h.start_ticks)}

    def watcher_alive(self, handle: JobHandle) -> bool:
        """Whether the collector itself still runs (orphan polling): it leads the job's
        group, so its pid is the group's id."""
        return handle.pgid is not None and procs.is_alive(handle.pgid)

    def find_lost_launch(self, job_id: str) -> Launched | None:
        """A launch whose answer was lost (fork-server death): its group, found through
        the ``VQ_JOB_ID`` environment of its processes."""
        found = find_job_processes(job_id)
        stat = procs.read_stat(found[0]) if found else None
        if stat is None:
            return None
        leader = procs.read_stat(stat.pgid)
        return Launched(job_id, stat.pgid, stat.pgid, leader.start_ticks if leader else None)

    def sample(self, handles: Iterable[JobHandle]) -> dict[str, GroupUsage]:
        """Usage of each job, by job id (absent: nothing of it could be read). Per job:
        its named scope's cgroup, else the cgroup of its recorded process (when that is
        not the daemon's own), else the process group (one ``/proc`` scan for all), else
        the single recorded process. ``GroupUsage.cgroup_lookup`` says which."""
        handles = [h for h in handles if h.pgid is not None]
        found: dict[str, GroupUsage] = {}
        walk: dict[int, str] = {}
        for handle in handles:
            assert handle.pgid is not None  # filtered above
            usage = self.scopes.usage(handle.job_id, handle.pgid, scoped=self.cgroup.scoped)
            if usage is not None:
                found[handle.job_id] = usage
            else:
                walk[handle.pgid] = handle.job_id
        groups = sample_groups(walk)
        for pgid, job_id in walk.items():
            usage = groups.get(pgid) or sample_process(pgid)
            if usage is not None:
                found[job_id] = usage
        return found

    # --- control -----------------------------------------------------------------------------
    def _signal(self, handle: JobHandle, sig: int) -> bool:
        if handle.pgid is None or not group_is_job(handle.job_id, handle.pgid, handle.start_ticks):
            return False
        return _signal_permitted(handle.pgid, sig)

    def cancel(self, handle: JobHandle) -> bool:
        """SIGTERM (and SIGCONT, so a stopped group can act on it); the grace is the
        caller's. Returns whether a live group that is provably the job's was signalled
        (False too when this process may not signal it: see :func:`_signal_permitted`)."""
        sent = self._signal(handle, signal.SIGTERM)
        if sent and handle.pgid is not None:
            _signal_permitted(handle.pgid, signal.SIGCONT)
        return sent

    def force_stop(self, handle: JobHandle) -> bool:
        """SIGCONT + SIGKILL to the job's group (after its grace)."""
        if handle.pgid is None or not self._signal(handle, signal.SIGCONT):
            return False
        return _signal_permitted(handle.pgid, signal.SIGKILL)

    def suspend(self, handle: JobHandle) -> bool:
        return self._signal(handle, signal.SIGSTOP)

    def resume(self, handle: JobHandle) -> bool:
        return self._signal(handle, signal.SIGCONT)

    def started(self, spec: JobSpec) -> bool:
        return spec.pgid is not None

    def check_pausable(self, spec: JobSpec) -> None:
        return None  # SIGSTOP works on any live group

    # --- after a restart ---------------------------------------------------------------------
    def begin_recovery(self) -> None:
        """Take the one ``/proc`` census a recovery pass reads."""
        self._census = _Census(procs.live_groups(), job_processes())

    def end_recovery(self) -> None:
        self._census = None

    def _census_now(self) -> _Census:
        if self._census is None:
            self._census = _Census(procs.live_groups(), job_processes())
        return self._census

    def _collector_record(self, spec: JobSpec) -> tuple[int, int] | None:
        """The live collector named by ``_vq/collector.pid`` or by the attempt's start
        record (both "<pid> <start ticks>", identity-checked), if any."""
        record = self.start_record_path(spec)
        for path in (self.paths.collector_pid(spec.id), *([record] if record else [])):
            try:
                raw = read_regular_beneath(self.paths.tree_of(spec.id), path, 256)
                pid_text, ticks_text = raw.decode().split()
                pid, ticks = int(pid_text), int(ticks_text)
            except (OSError, ValueError):
                continue
            if procs.matches_identity(pid, ticks):
                return pid, ticks
        return None

    def _locate(self, spec: JobSpec) -> JobHandle:
        """The job's group: from the spec, else (a launch whose pid was never recorded)
        from the collector's own ``collector.pid``, else from the ``VQ_JOB_ID``
        environment of its processes."""
        if spec.pgid is not None:
            return JobHandle.of(spec)
        record = self._collector_record(spec)
        if record is not None:
            return JobHandle(spec.id, record[0], record[1])
        for pid in self._census_now().by_job.get(spec.id, []):
            stat = procs.read_stat(pid)
            if stat is not None:
                leader = procs.read_stat(stat.pgid)
                return JobHandle(spec.id, stat.pgid, leader.start_ticks if leader else None)
        return JobHandle(spec.id, None, None)

    def _kill_group(self, pgid: int) -> None:
        _signal_permitted(pgid, signal.SIGCONT)
        _signal_permitted(pgid, signal.SIGKILL)

    def recover(self, spec: JobSpec) -> Recovered:
        """Reattach a live group that is the job's (its collector alive); otherwise reap
        what is left of the group and report the durable outcome — or, for a RUNNING
        attempt that left no exit marker and no spawn note, NEVER_STARTED when
        :meth:`fence_unstarted` proves the command never started."""
        handle = self._locate(spec)
        if handle.pgid is not None and group_is_job(spec.id, handle.pgid, handle.start_ticks):
            conflict = self.scopes.conflict(spec.id, handle.pgid) if self.cgroup.scoped else None
            if conflict is not None:  # the scope is another process's: never reattach
                self._kill_group(handle.pgid)
                return Recovered(
                    RecoveryKind.ENDED,
                    handle,
                    exit_code=self.exit_code(spec.id),
                    spawn_failure=self.spawn_failure(spec.id),
                    scope_conflict=conflict,
                )
            if procs.is_alive(handle.pgid):
                return Recovered(
                    RecoveryKind.REATTACHED, handle, found_unrecorded=spec.pgid is None
                )
            self._kill_group(handle.pgid)  # collector gone, members live: reap them
        exit_code, spawn_failure = self.exit_code(spec.id), self.spawn_failure(spec.id)
        if (
            exit_code is None
            and spawn_failure is None
            and spec.state is JobState.RUNNING
            and self.fence_unstarted(spec)
        ):
            return Recovered(RecoveryKind.NEVER_STARTED, handle)
        return Recovered(
            RecoveryKind.ENDED, handle, exit_code=exit_code, spawn_failure=spawn_failure
        )

    def may_have_leaked(self, pgid: int | None) -> bool:
        """False when :meth:`reap_leak` of a terminal job that recorded ``pgid`` would
        find nothing: that group is not alive in the census. (A job that recorded no
        group is located through its files and processes: True, ask :meth:`reap_leak`.)"""
        return pgid is None or pgid in self._census_now().groups

    def reap_leak(self, spec: JobSpec) -> bool:
        """A terminal job whose group survives (provably its own): SIGCONT + SIGKILL."""
        handle = self._locate(spec)
        if (
            handle.pgid is not None
            and handle.pgid in self._census_now().groups
            and group_is_job(spec.id, handle.pgid, handle.start_ticks)
        ):
            self._kill_group(handle.pgid)
            return True
        return False


def _signal_permitted(pgid: int, sig: int) -> bool:
    """:func:`procs.signal_group`, with a group this process may not signal (EPERM: every
    live member belongs to another user) counted as not signalled.

    In multi-user mode a user's CLI signals its own job directly, but the job's group
    briefly holds only root's processes (the collector, or the command before it drops
    to the user). A kill's KILLED state is durable by then, and the root daemon, which
    rereads the specs of the jobs it holds, finishes the stop
    (``vq.daemon.foreign_stops``); a pause so refused reports ``signaled: false``.
    """
    try:
        return procs.signal_group(pgid, sig)
    except PermissionError:
        return False
