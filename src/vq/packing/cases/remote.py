"""The Slurm login host of a pack's target, reached through a :class:`Runner`.

:func:`lane_runner` resolves a profile's ``host`` to a configured Slurm lane
(``[hosts.NAME]`` with ``scheduler_dialect = "slurm"``) and builds its SSH runner.
:class:`PackRemote` runs the bounded commands of :mod:`vq.dialects.slurm_alloc` (and the
step control of :mod:`vq.dialects.slurm_steps`) through it:
30 s per command, 1 MiB per stream (an overflow raises
:class:`~vq.errors.OutputTooLarge`), ``env LC_ALL=C TZ=UTC``. Untrustworthy output raises
:class:`~vq.dialects.slurm_alloc.ObservationError`; a transport failure raises the
runner's :class:`~vq.errors.TransportError`. Nothing here touches ``pack.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from vq.config.settings import Settings
from vq.dialects import slurm_alloc, slurm_steps
from vq.dialects.slurm_alloc import (
    COMMAND_DEADLINE_S,
    MAX_STREAM_BYTES,
    AccountingRecord,
    ObservationError,
    QueueRow,
    SbatchTestOnlyAnswer,
)
from vq.dialects.submit_guard import GuardState, guarded_submit_argv, parse_guard, probe_argv
from vq.errors import ConfigError
from vq.packing import slurm_rounds
from vq.packing.evidence import parse_markers
from vq.packing.lane_batch import STAGED_SCRIPT
from vq.packing.script import comment
from vq.packing.slurm_rounds import RoundAnswer, Watched
from vq.transport.runner import Runner, RunResult
from vq.transport.ssh import SshRunner

__all__ = ["MAX_COLLECT_BYTES", "MAX_LOG_BYTES", "PackRemote", "RunnerFor", "lane_runner"]

MAX_LOG_BYTES = 1 << 20
#: How a service reaches a lane: the lane's name → its runner.
RunnerFor = Callable[[str], Runner]

# One fixed script per read; its words arrive as arguments, never spliced into the text.
_MARKERS = (
    'cd -- "$1" 2>/dev/null || exit 0; for s in *; do '
    'if [ -f "$s/_vq/exit-code" ]; then printf "%s|%s\\n" "$s" '
    '"$(head -c 16 "$s/_vq/exit-code" | tr -dc 0-9-)"; fi; done'
)
_SUBMIT = 'mkdir -p -- "$1" "$2" || exit 96; shift 2; exec "$@"'
#: Under the submit guard: the logs' directory (Slurm opens the allocation's log before
#: the script runs), then the submit command. Exit 96: no directory, sbatch never ran.
_LOGS_THEN = 'mkdir -p -- "$1" || exit 96; shift; exec "$@"'
_TAIL = 'if [ -f "$1" ]; then exec tail -c "$2" -- "$1"; else exit 3; fi'
#: A packed array's ended slots, as one tar on stdout. Per log that exists (``$2`` is
#: the logs' common prefix ``<log_root>/<alloc>-<job>-``): ``logs/<slot>.<x>`` its last
#: ``$3`` bytes, ``logs/<slot>.<x>.size`` its size when read (the tail is exactly the
#: bytes before that size: a log still growing cannot shift it) and ``logs/<slot>.<x>.at``
#: its (up to) 64 bytes from the caller's offset, to check a local live copy against;
#: all from a private temporary directory removed on exit. Then each slot's directory
#: ``<slot>/`` under ``$1`` that exists. The words after ``$3`` are triples ``SLOT
#: OUT_AT ERR_AT``. Exit 95: the temporary copy failed.
_COLLECT = (
    "w=$1 p=$2 n=$3; shift 3; t=$(mktemp -d) || exit 95; trap 'rm -rf -- \"$t\"' EXIT; "
    'mkdir -- "$t/logs" || exit 95; d=; while [ "$#" -ge 3 ]; do s=$1; '
    'for x in out err; do if [ "$x" = out ]; then a=$2; else a=$3; fi; f=$p$s.$x; '
    'if [ -f "$f" ]; then z=$(wc -c <"$f") || exit 95; z=$((z + 0)); k=0; '
    'if [ "$z" -gt "$n" ]; then k=$((z - n)); fi; '
    'tail -c "+$((k + 1))" -- "$f" | head -c "$((z - k))" >"$t/logs/$s.$x" || exit 95; '
    'tail -c "+$((a + 1))" -- "$f" | head -c 64 >"$t/logs/$s.$x.at" || exit 95; '
    'printf \'%s\\n\' "$z" >"$t/logs/$s.$x.size" || exit 95; fi; '
    'done; if [ -d "$w/$s" ]; then d="$d $s"; fi; shift 3; done; '
    'if [ -n "$d" ]; then tar -cf - -C "$t" logs -C "$w" $d; else tar -cf - -C "$t" logs; fi'
)
#: The most one copy-back of an allocation's ended slots may bring (their workspaces and
#: logs together), as for a lane job's workspace.
MAX_COLLECT_BYTES = 512 << 20


def lane_runner(settings: Settings) -> RunnerFor:
    """A :data:`RunnerFor` over the Slurm lanes of ``settings``."""

    def runner_for(host: str) -> Runner:
        configured = settings.hosts.get(host)
        lane = configured.lane(host) if configured is not None else None
        if lane is None or lane.dialect != "slurm":
            raise ConfigError(
                f"packing target host {host!r} is not a configured Slurm lane",
                hint=f'add [hosts.{host}] with scheduler_dialect = "slurm" and scratch_root '
                "(docs/scheduler.md)",
            )
        return SshRunner(
            lane.ssh, ssh_options=lane.ssh_options, host_key_policy=lane.host_key_policy
        )

    return runner_for


class PackRemote:
    """The bounded Slurm commands of packed allocations on one login host."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def _run(self, argv: list[str], stdin: bytes | None = None) -> RunResult:
        return self.runner.run(
            argv, stdin=stdin, deadline_s=COMMAND_DEADLINE_S, max_output_bytes=MAX_STREAM_BYTES
        )

    def test_only(self, script: bytes) -> SbatchTestOnlyAnswer:
        result = self._run(slurm_alloc.sbatch_test_only_argv(), script)
        return slurm_alloc.parse_sbatch_test_only(result.rc, _text(result.stderr))

    @staticmethod
    def submit_command(log_root: str, work_root: str) -> list[str]:
        """One remote command that makes ``log_root`` and ``work_root`` (Slurm opens the
        allocation's log before the script runs), then runs ``sbatch --parsable``.
        Built before the intent is recorded: a refusal here sends nothing."""
        argv = ["sh", "-c", _SUBMIT, "sh", log_root, work_root, "sbatch", "--parsable"]
        return slurm_alloc.bounded(argv)

    @staticmethod
    def stage_submit_command(
        log_root: str,
        allocation_work: str,
        records: str,
        token: str,
        supersede: str | None = None,
    ) -> list[str]:
        """One remote command, under the submit guard of ``records``
        (:mod:`vq.dialects.submit_guard`): unpack the tar on its stdin into
        ``allocation_work`` (``<work_root>/<alloc>``: each slot's workspace and the script
        at ``STAGED_SCRIPT``), make ``log_root``, then run ``sbatch --parsable`` of that
        script, unless an earlier call for this allocation already did (its recorded
        answer) or still may (``busy``)."""
        script = f"{allocation_work}/{STAGED_SCRIPT}"
        submit = slurm_alloc.bounded(
            ["sh", "-c", _LOGS_THEN, "sh", log_root, "sbatch", "--parsable", script]
        )
        return guarded_submit_argv(
            records, token, submit, workspace=allocation_work, supersede=supersede
        )

    def submit_guarded(self, command: list[str], stdin: bytes) -> GuardState:
        """Run :meth:`stage_submit_command` (the staging tar on stdin; its deadline grows
        by 1 s per MiB) and read the guard's answer. A transport failure raises: the
        caller looks the allocation up."""
        result = self.submit(command, stdin)
        return parse_guard(_text(result.stdout), _text(result.stderr))

    def submit_state(self, records: str) -> GuardState:
        """What the submit guard of ``records`` holds (nothing is run)."""
        result = self._run(probe_argv(records))
        return parse_guard(_text(result.stdout), _text(result.stderr))

    def submit(self, command: list[str], stdin: bytes) -> RunResult:
        """Run :meth:`submit_command` (the script on stdin) or :meth:`stage_submit_command`
        (the staging tar on stdin; its deadline grows by 1 s per MiB). The caller parses
        the receipt: its absence is ambiguous."""
        return self.runner.run(
            command,
            stdin=stdin,
            deadline_s=COMMAND_DEADLINE_S + len(stdin) / (1 << 20),
            max_output_bytes=MAX_STREAM_BYTES,
        )

    def queue_row(self, job_id: str, allocation_id: str) -> QueueRow | None:
        result = self._run(slurm_alloc.squeue_argv(job_id))
        return slurm_alloc.parse_squeue(
            result.rc, _text(result.stdout), _text(result.stderr), allocation_id
        )

    def accounting(self, allocation_id: str, since: str) -> list[AccountingRecord]:
        result = self._run(slurm_alloc.sacct_argv(allocation_id, since))
        if result.rc != 0:
            raise ObservationError(f"sacct failed (exit status {result.rc})")
        return slurm_alloc.parse_sacct(_text(result.stdout), allocation_id)

    def observe_round(self, watched: Sequence[Watched], since: str) -> list[RoundAnswer]:
        """One round over ``watched`` (at most one :func:`~vq.packing.slurm_rounds.rounds`
        group): one ``squeue``, one ``sacct`` from ``since`` and one read of the slot
        markers for them all; per allocation, in order, its (queue row, accounting
        records, markers) or the error that makes its evidence untrustworthy. A failed
        command or a malformed answer raises for the whole round."""
        jobs = {item.job_id: item.allocation_id for item in watched}
        ids = [item.allocation_id for item in watched]
        queue = self._run(slurm_alloc.squeue_round_argv(list(jobs)))
        rows = slurm_alloc.parse_squeue_round(
            queue.rc, _text(queue.stdout), _text(queue.stderr), jobs
        )
        sacct = self._run(slurm_alloc.sacct_round_argv(ids, since))
        if sacct.rc != 0:
            raise ObservationError(f"sacct failed (exit status {sacct.rc})")
        records = slurm_alloc.parse_sacct_round(_text(sacct.stdout), ids)
        found = self._run(slurm_rounds.markers_round_argv([item.work for item in watched]))
        if found.rc != 0:
            raise ObservationError(f"reading slot markers failed (exit status {found.rc})")
        markers = slurm_rounds.parse_markers_round(_text(found.stdout), len(watched))
        answers: list[RoundAnswer] = []
        for item, marks in zip(watched, markers, strict=True):
            row, accounting = rows.get(item.job_id), records[item.allocation_id]
            for failure in (row, accounting, marks):
                if isinstance(failure, ObservationError):
                    answers.append(failure)
                    break
            else:
                assert not isinstance(accounting, ObservationError)
                assert not isinstance(marks, ObservationError)
                assert not isinstance(row, ObservationError)
                answers.append((row, accounting, marks))
        return answers

    def markers(self, allocation_work: str) -> dict[int, int | None]:
        """Each slot's exit marker under ``<work_root>/<alloc>`` (none yet: empty)."""
        result = self._run(slurm_alloc.bounded(["sh", "-c", _MARKERS, "sh", allocation_work]))
        if result.rc != 0:
            raise ObservationError(f"reading the slot markers failed (exit status {result.rc})")
        return parse_markers(_text(result.stdout))

    def allocation_jobs(self, allocation_id: str, since: str) -> list[str]:
        """The jobs that are this allocation, by its identity, submitted since ``since``.

        One bounded ``squeue --name=vqp-<alloc>`` (an active job with the exact comment
        counts at once, before accounting has it), one bounded ``sacct
        --name=vqp-<alloc>``, then one single-job ``squeue`` per job accounting names: a
        job still queued or running under another comment is someone else's and is
        dropped; a job whose accounting repeats the exact comment counts, and so does an
        ended one where accounting stores no comments (the name is all there is).
        Exactly one job is the allocation; none means neither the queue nor accounting
        has seen it; several is ambiguous history. Raises :class:`ObservationError` on
        an untrustworthy answer."""
        named = self._run(slurm_alloc.squeue_named_argv(allocation_id))
        active = slurm_alloc.parse_squeue_named(named.rc, _text(named.stdout), allocation_id)
        records = self.accounting(allocation_id, since)
        exact = comment(allocation_id)
        jobs = list(active)
        for job in sorted({record.job_id for record in records if record.submit >= since}):
            try:
                row = self.queue_row(job, allocation_id)
            except slurm_alloc.ForeignJob:
                continue  # active under another comment: someone else's job
            known = any(r.job_id == job and r.comment == exact for r in records)
            unlabelled = all(r.comment == "" for r in records if r.job_id == job)
            if row is not None or known or unlabelled:
                jobs.append(job)
        return sorted(set(jobs))

    def running_slots(self, job_id: str, allocation_id: str) -> dict[int, str]:
        """Each running slot of the allocation → its step id (``squeue --steps``)."""
        result = self._run(slurm_steps.squeue_steps_argv(job_id))
        return slurm_steps.parse_squeue_steps(
            result.rc, _text(result.stdout), job_id, allocation_id
        )

    def cancel(self, job_id: str, step_id: str | None = None) -> Literal["sent", "gone"]:
        """``scancel`` of the allocation, or of one step of it (``JOBID.STEP``)."""
        result = self._run(slurm_steps.scancel_argv(job_id, step_id))
        return slurm_steps.parse_scancel(result.rc, _text(result.stderr))

    def cancel_slot(
        self, job_id: str, allocation_id: str, slot: int
    ) -> Literal["sent", "gone", "not_running"]:
        """Cancel one slot's step, found by its name; ``not_running`` when the slot has no
        live step (the allocation is queued, or the slot has not started or has ended):
        nothing was sent, and the caller decides."""
        step = self.running_slots(job_id, allocation_id).get(slot)
        if step is None:
            return "not_running"
        return self.cancel(job_id, step)

    def collect(
        self,
        allocation_work: str,
        log_prefix: str,
        slots: Sequence[int],
        log_bytes: int,
        checks: Mapping[int, tuple[int, int]] | None = None,
    ) -> bytes:
        """One tar of the ended ``slots`` (see ``_COLLECT``): their directories under
        ``allocation_work`` and the last ``log_bytes`` of each slot's ``<log_prefix><slot>
        .out`` and ``.err`` with its size and its 64 bytes from ``checks[slot]`` (the
        offsets for ``.out`` and ``.err``; 0 when not given), in one remote command
        (bounded by :data:`MAX_COLLECT_BYTES` and four command deadlines). A failed
        command raises :class:`~vq.dialects.slurm_alloc.ObservationError`."""
        words = [str(int(slot)) for slot in slots]
        triples: list[str] = []
        for slot in slots:
            out_at, err_at = (checks or {}).get(slot, (0, 0))
            triples += [str(int(slot)), str(max(0, int(out_at))), str(max(0, int(err_at)))]
        result = self.runner.run(
            ["sh", "-c", _COLLECT, "sh", allocation_work, log_prefix, str(log_bytes), *triples],
            deadline_s=COMMAND_DEADLINE_S * 4,
            max_output_bytes=MAX_COLLECT_BYTES,
        )
        if result.rc != 0:
            raise ObservationError(
                f"copying slots {' '.join(words)} back failed (exit status {result.rc})"
            )
        return result.stdout

    def tail(self, path: str, count: int) -> bytes | None:
        """The last ``count`` bytes of ``path`` (None: no such file), one bounded read."""
        result = self.runner.run(
            slurm_alloc.bounded(["sh", "-c", _TAIL, "sh", path, str(count)]),
            deadline_s=COMMAND_DEADLINE_S,
            max_output_bytes=max(count, 64 * 1024),  # tail never prints more than count
        )
        if result.rc == 3:
            return None
        if result.rc != 0:
            raise ObservationError(f"reading {path} failed (exit status {result.rc})")
        return result.stdout


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ObservationError("the scheduler's answer is not UTF-8") from None
