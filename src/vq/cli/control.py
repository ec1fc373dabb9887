"""Control verbs: ``vq kill`` and ``vq wait``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from vq.cli.common import daemon_answers, echo_json, gateway, owner_option
from vq.cli.job_ids import GROUP_ID, JOB_ID
from vq.cli.types import AsciiIntRange
from vq.domain.durations import format_duration, parse_duration
from vq.errors import WaitTimeout
from vq.protocol.submit_fields import SUBMIT_FIELDS

if TYPE_CHECKING:
    from vq.gateway import Gateway
    from vq.protocol.answers import FinalState, JobRefusal, PauseAnswer

__all__ = ["job_exit_status", "kill", "pause", "resubmit", "resume", "wait"]


def _group_members(group: str, nonterminal_only: bool) -> list[str]:
    from vq.cli.inspect import list_rows

    rows = list_rows({"group": group})["jobs"]
    if not rows:
        from vq.errors import NotFound

        raise NotFound(f"no jobs in group {group}", hint="`vq list` shows group ids")
    from vq.domain.states import TERMINAL

    ended = {state.value for state in TERMINAL}
    return [r["id"] for r in rows if not (nonterminal_only and r["state"] in ended)]


def group_members_in_order(group: str) -> list[tuple[int, str]]:
    """Every element of an array or chain group as (index, job id), in index order
    (NotFound when the group has none)."""
    from vq.cli.inspect import list_rows

    rows = list_rows({"group": group})["jobs"]
    if not rows:
        from vq.errors import NotFound

        raise NotFound(f"no jobs in group {group}", hint="`vq list` shows group ids")
    indexed = []
    for row in rows:
        index = row.get("array_index")
        if index is None:
            index = row.get("chain_index")
        indexed.append((index if isinstance(index, int) else 0, row["id"]))
    return sorted(indexed)


@click.command()
@click.argument("job_ids", nargs=-1, metavar="ID...", type=JOB_ID)
@click.option(
    "--group", type=GROUP_ID, help="Kill every unfinished element of this array or chain group."
)
@click.option("--json", "as_json", is_flag=True, help="Print one result object per job.")
@owner_option
def kill(
    job_ids: tuple[str, ...], group: str | None, as_json: bool, uid: int | None = None
) -> None:
    """Kill jobs: PENDING ends at once; RUNNING gets SIGTERM, a 10 s grace, then SIGKILL."""
    if group is not None:
        job_ids = (*job_ids, *_group_members(group, nonterminal_only=True))
    elif not job_ids:
        from vq.errors import UsageError

        raise UsageError("no jobs given", hint="vq kill ID... or vq kill --group G")
    results = []
    for job_id in job_ids:
        result = gateway(uid).kill(job_id)
        results.append(result)
        if not as_json:
            if result["already_killed"]:
                click.echo(f"{job_id} was already KILLED")
            elif result["previous_state"] in ("RUNNING", "SUSPENDED") and not result["signaled"]:
                # Nothing of it could be signalled from here (gone, or root's processes in
                # multi-user mode): KILLED is durable and the daemon stops what remains.
                click.echo(
                    f"{job_id} {result['previous_state']} → KILLED "
                    "(kill requested; the daemon stops it)"
                )
            else:
                click.echo(f"{job_id} {result['previous_state']} → KILLED")
    if as_json:
        echo_json(results)


def job_exit_status(state: str, exit_code: int | None) -> int:
    """``vq wait``'s exit code for one ended job (documented in docs/cli.md)."""
    if state == "COMPLETED":
        return 0
    if exit_code is not None and 0 < exit_code < 256:
        return exit_code
    return 1


def _timed_out(access: Gateway, remaining: list[str], timeout: str) -> WaitTimeout:
    """The timeout error, saying what each unfinished job is doing ("pending, no daemon"
    when nothing will ever start it, rather than "still running")."""
    states = {job_id: access.spec(job_id).state.value for job_id in remaining}
    no_daemon = "PENDING" in states.values() and not daemon_answers()
    described = ", ".join(
        f"{job_id} (pending, no daemon)"
        if state == "PENDING" and no_daemon
        else f"{job_id} ({state.lower()})"
        for job_id, state in states.items()
    )
    verb = "has" if len(remaining) == 1 else "have"
    return WaitTimeout(
        f"{len(remaining)} job(s) {verb} not ended after {timeout}: {described}",
        hint="start a daemon (`vq daemon start`), then wait again"
        if no_daemon
        else "wait again, or raise --timeout",
    )


#: How often a wait on a PENDING job checks that a daemon runs (it says so once if not).
_DAEMON_CHECK_SECONDS = 5.0


def _tell_if_nothing_will_start(access: Gateway, remaining: list[str]) -> bool:
    """Say once on stderr that a PENDING job waits for a daemon none runs (no silent
    hang); True when said."""
    pending = [j for j in remaining if access.spec(j).state.value == "PENDING"]
    if not pending or daemon_answers():
        return False
    from vq.cli.output import NO_DAEMON, note

    which = f"job {pending[0]} is" if len(pending) == 1 else f"{len(pending)} jobs are"
    note(f"{which} PENDING and {NO_DAEMON}; waiting (Ctrl-C stops)")
    return True


@click.command()
@click.argument("job_ids", nargs=-1, metavar="ID...", type=JOB_ID)
@click.option("--group", type=GROUP_ID, help="Wait for every element of this array or chain group.")
@click.option("--timeout", help="Give up after this long (e.g. 30s, 5m); exit 124.")
@click.option("--json", "as_json", is_flag=True, help="Print the final state of each job.")
@owner_option
def wait(
    job_ids: tuple[str, ...],
    group: str | None,
    timeout: str | None,
    as_json: bool,
    uid: int | None = None,
) -> None:
    """Block until every job has ended. Exit code: the first job's nonzero code, else 0."""
    if group is not None:
        job_ids = (*job_ids, *_group_members(group, nonterminal_only=False))
    elif not job_ids:
        from vq.errors import UsageError

        raise UsageError("no jobs given", hint="vq wait ID... or vq wait --group G")

    access = gateway(uid)
    limit = None if timeout is None else parse_duration(timeout)
    deadline = None if limit is None else time.monotonic() + limit
    for job_id in job_ids:
        access.spec(job_id)  # fail fast on unknown or corrupt ids
    remaining = list(job_ids)
    final: dict[str, FinalState] = {}
    delay = 0.02
    next_daemon_check, told = time.monotonic() + 0.5, False
    while remaining:
        for job_id in list(remaining):
            ended = access.final_state(job_id)
            if ended is not None:
                final[job_id] = ended
                remaining.remove(job_id)
        if not remaining:
            break
        if not told and time.monotonic() >= next_daemon_check:
            next_daemon_check = time.monotonic() + _DAEMON_CHECK_SECONDS
            told = _tell_if_nothing_will_start(access, remaining)
        if deadline is not None and time.monotonic() >= deadline:
            raise _timed_out(access, remaining, format_duration(limit))
        time.sleep(delay)
        delay = min(0.5, delay * 1.5)
    ordered = [final[job_id] for job_id in job_ids]
    if as_json:
        echo_json(ordered)
    else:
        for item in ordered:
            if item["state"] != "COMPLETED":
                reason = f": {item['failure_reason']}" if item["failure_reason"] else ""
                click.echo(f"{item['id']} {item['state']}{reason}", err=True)
    codes = [job_exit_status(item["state"], item["exit_code"]) for item in ordered]
    raise SystemExit(next((code for code in codes if code), 0))


def _select(
    job_ids: tuple[str, ...], tags: tuple[str, ...], every: bool, state: str, uid: int | None
) -> list[str]:
    if job_ids and (tags or every):
        from vq.errors import UsageError

        raise UsageError("give job ids, or --tag/--all, not both")
    if job_ids:
        return list(job_ids)
    if not tags and not every:
        from vq.errors import UsageError

        raise UsageError("no jobs selected", hint="give job ids, --tag TAG or --all")
    return gateway(uid).job_ids([state], list(tags))


def _pause_or_resume(
    verb: str, job_ids: list[str], as_json: bool, uid: int | None, bulk: bool
) -> None:
    """Pause or resume each job. A bulk sweep (``--tag``/``--all``) reports a job the
    ownership helper refuses as an error row, saying nothing else of it, and goes on;
    the command then exits with that refusal's code (15)."""
    from vq.errors import PermissionDenied

    access = gateway(uid)
    results: list[PauseAnswer | JobRefusal] = []
    refused: PermissionDenied | None = None
    for job_id in job_ids:
        try:
            result = access.pause(job_id) if verb == "pause" else access.resume(job_id)
        except PermissionDenied as exc:
            if not bulk:
                raise
            refused = exc
            results.append({"id": job_id, "error": exc.to_payload()})
            if not as_json:
                click.echo(f"{job_id} error: {exc.message}", err=True)
            continue
        results.append(result)
        if not as_json:
            note = "" if result["changed"] else " (unchanged)"
            if verb == "pause" and result["state"] == "RUNNING" and not result["changed"]:
                note = " (not paused: it could not be signalled yet; try again in a moment)"
            click.echo(f"{job_id} {result['state']}{note}")
    if as_json:
        echo_json(results)
    if refused is not None:
        raise SystemExit(refused.exit_code)


@click.command()
@click.argument("job_ids", nargs=-1, metavar="[ID...]", type=JOB_ID)
@click.option("--tag", "tags", multiple=True, help="Every RUNNING job with this tag.")
@click.option("--all", "every", is_flag=True, help="Every RUNNING job.")
@click.option("--json", "as_json", is_flag=True)
@owner_option
def pause(
    job_ids: tuple[str, ...],
    tags: tuple[str, ...],
    every: bool,
    as_json: bool,
    uid: int | None = None,
) -> None:
    """Pause running jobs (SIGSTOP to the group); they keep their reservation."""
    selected = _select(job_ids, tags, every, "RUNNING", uid)
    _pause_or_resume("pause", selected, as_json, uid, bulk=not job_ids)


@click.command()
@click.argument("job_ids", nargs=-1, metavar="[ID...]", type=JOB_ID)
@click.option("--tag", "tags", multiple=True, help="Every SUSPENDED job with this tag.")
@click.option("--all", "every", is_flag=True, help="Every SUSPENDED job.")
@click.option("--json", "as_json", is_flag=True)
@owner_option
def resume(
    job_ids: tuple[str, ...],
    tags: tuple[str, ...],
    every: bool,
    as_json: bool,
    uid: int | None = None,
) -> None:
    """Resume paused jobs (SIGCONT to the group)."""
    selected = _select(job_ids, tags, every, "SUSPENDED", uid)
    _pause_or_resume("resume", selected, as_json, uid, bulk=not job_ids)


#: The submit fields a resubmit may change (declared ``override=True``).
_OVERRIDES = tuple(f for f in SUBMIT_FIELDS if f.override)


def _override_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """One option per overridable submit field, spelt and bounded as ``vq submit`` does."""
    for f in reversed(_OVERRIDES):
        if f.cli == "int":
            kind: Any = AsciiIntRange(f.minimum, f.maximum)
            fn = click.option(f.flag, f.dest, type=kind, help=f"New value: {f.help}")(fn)
        else:
            fn = click.option(f.flag, f.dest, help=f"New value: {f.help}")(fn)
    return fn


@click.command()
@click.argument("job_id", type=JOB_ID)
@_override_options
@click.option("--json", "as_json", is_flag=True, help="Print the new spec.")
@owner_option
def resubmit(job_id: str, as_json: bool, uid: int | None = None, **values: Any) -> None:
    """Run an ended job again as a new job (fresh id, copied workspace, no old results)."""
    overrides: dict[str, Any] = {}
    for f in _OVERRIDES:
        value = values[f.dest]
        if value is None:
            continue
        # an int field given as text on the command line is a duration (e.g. 2h)
        duration = f.kind == "int" and f.cli == "str"
        overrides[f.name] = parse_duration(value, bare_seconds=False) if duration else value
    spec = gateway(uid).resubmit(job_id, overrides)
    if as_json:
        echo_json(spec)
    else:
        click.echo(spec["id"])
