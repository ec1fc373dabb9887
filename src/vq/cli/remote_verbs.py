"""``vq VERB HOST …``: run a verb on a configured remote vq daemon host (§2.2).

The command line is first parsed by the local command itself (so a bad option fails
here, with the usual message, before anything is sent), then:

- ``submit``: packed and delegated (:mod:`vq.remote.submit`); prints the remote id.
- ``logs``: streamed; ``-f`` resumes by byte offset after a drop (:mod:`vq.remote.follow`).
- ``wait``: rides out partitions and exits with the remote job's code.
- ``fetch``: a tar stream extracted here (:mod:`vq.fetch.remote`).
- ``top``, ``overview``, ``usage``: one host's fleet view
  (:func:`vq.cli.remote_fleet.run_host_view`: an unreachable host is one row, exit 11).
- ``kill``, ``pause``, ``resume``: sent once; an answer lost after the call may have
  reached the host is :class:`~vq.errors.OutcomeUnknown` (exit 12), never resent.
- every other verb (``status``, ``events``, ``queue``, and the actions when answered):
  the remote verb's output (:mod:`vq.cli.remote_output`: a ``--json`` answer validated,
  text with control characters escaped) and exit status.

Every remote command line is built as the verb, its options, ``--``, then its ids
(:func:`remote_words`): ids are checked for their form when the line is parsed here, and
after ``--`` none can be read as an option there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from vq.cli.host_words import first_positional
from vq.cli.remote_fleet import HOST_VIEWS, run_host_view
from vq.errors import UsageError
from vq.remote.fleet import load_fleet
from vq.remote.host import RemoteHost

if TYPE_CHECKING:
    from vq.protocol.answers import SubmitAnswer

__all__ = ["remote_words", "run_remote"]

#: The Click command that parses each verb's command line (never invoked here).
_PARSERS = {
    "submit": "vq.cli.submit:submit",
    "status": "vq.cli.inspect:status",
    "events": "vq.cli.inspect:events",
    "logs": "vq.cli.logs:logs",
    "kill": "vq.cli.control:kill",
    "pause": "vq.cli.control:pause",
    "resume": "vq.cli.control:resume",
    "wait": "vq.cli.control:wait",
    "fetch": "vq.cli.fetch:fetch",
    "queue": "vq.cli.inspect:list_jobs",
    "list": "vq.cli.inspect:list_jobs",
    "top": "vq.cli.top:top",
    "overview": "vq.cli.reports:overview",
    "usage": "vq.cli.reports:usage",
}


def _command(verb: str) -> click.Command:
    import importlib

    module, attr = _PARSERS[verb].split(":")
    command: click.Command = getattr(importlib.import_module(module), attr)
    return command


def _parse(verb: str, rest: list[str]) -> click.Context:
    from vq.cli.job_ids import REMOTE_PARSE

    # obj REMOTE: id prefixes are the remote queue's to resolve (vq.cli.job_ids).
    return _command(verb).make_context(
        f"vq {verb} HOST", list(rest), resilient_parsing=False, obj=REMOTE_PARSE
    )


def remote_words(verb: str, rest: list[str]) -> list[str]:
    """``vq VERB REST…`` as the remote command line: ``[remote verb, *options, "--",
    *ids]``, the options and positional words told apart as the verb's own command
    parses them, each id checked (:func:`vq.remote.host.job_words`)."""
    from vq.remote.host import job_words

    takes_value: set[str] = set()
    for param in _command(verb).params:
        if isinstance(param, click.Option) and not param.is_flag and not param.count:
            takes_value.update(param.opts)
    options: list[str] = []
    ids: list[str] = []
    skip = after_dashes = False
    for word in rest:
        if after_dashes:
            ids.append(word)
        elif skip:
            options.append(word)
            skip = False
        elif word == "--":
            after_dashes = True
        elif word.startswith("-") and word != "-":
            options.append(word)
            skip = word in takes_value  # "--opt=value" carries its own value
        else:
            ids.append(word)
    return job_words(["list" if verb == "queue" else verb, *options], ids)


def run_remote(verb: str, host_name: str, rest: list[str]) -> int:
    """Run ``vq VERB …`` on ``host_name``; returns the exit status to use.

    When the host does not hold the job named (its not-found answer, exit 3), the other
    authorities are looked at (:mod:`vq.cli.found_elsewhere`) and a ``hint:`` names the
    command that reaches the job where it is."""
    from vq.cli.found_elsewhere import PER_JOB_VERBS
    from vq.errors import NotFound

    host = load_fleet().host(host_name)
    ctx = _parse(verb, rest)
    index = first_positional(verb, rest) if verb in PER_JOB_VERBS else None
    job_id = rest[index] if index is not None else None
    try:
        rc = _run_on(host, verb, rest, ctx)
    except NotFound as exc:
        if job_id is None:
            raise
        from vq.cli.found_elsewhere import with_elsewhere

        raise with_elsewhere(exc, verb, job_id, host.name) from None
    if rc == NotFound.exit_code and job_id is not None:
        from vq.cli.found_elsewhere import hint_elsewhere

        hint = hint_elsewhere(verb, job_id, host.name)
        if hint is not None:
            sys.stderr.write(f"hint: {hint}\n")
    return rc


def _run_on(host: RemoteHost, verb: str, rest: list[str], ctx: click.Context) -> int:
    if verb == "submit":
        return _submit(host, rest, ctx)
    if verb == "logs":
        from vq.remote.follow import follow_logs

        return follow_logs(
            host,
            ctx.params["job_id"],
            use_stderr=ctx.params["use_stderr"],
            tail=ctx.params["tail"],
            follow=ctx.params["follow"],
            out=sys.stdout.buffer,
        )
    if verb == "wait":
        return _wait(host, ctx)
    if verb == "fetch":
        from vq.fetch.remote import fetch_remote

        return fetch_remote(host, ctx.params, out=sys.stdout)
    if verb == "top" and ctx.params.get("watch"):
        raise UsageError(
            "vq top HOST --watch is not supported", hint="run `vq top HOST` (one snapshot)"
        )
    if verb in HOST_VIEWS:
        return run_host_view(host, verb, rest)
    from vq.cli.remote_output import print_remote

    words = remote_words(verb, rest)  # `list` is the older name of `queue`
    if verb in _ACTIONS:
        return _act(host, verb, words)
    return print_remote(host, verb, words, host.run(words, deadline_s=host.timeout))


#: Verbs that change a remote job: a lost answer is an unknown outcome, never retried.
_ACTIONS = frozenset({"kill", "pause", "resume"})


def _act(host: RemoteHost, verb: str, words: list[str]) -> int:
    """``vq kill|pause|resume`` on ``host`` (``words``: :func:`remote_words`), sent once;
    its answer printed (the exit status returned). When the call may have reached the
    host but its answer was lost, or is not a valid vq answer (the action ran, what it did
    cannot be read), the outcome is unknown (exit 12): the host's health records the
    failure, the job is not touched here, and nothing is resent."""
    from vq.cli.remote_output import print_remote
    from vq.errors import OutcomeUnknown, RemoteProtocolError, TransportError
    from vq.remote.host import may_have_run

    ids = " ".join(words[words.index("--") + 1 :]) if "--" in words else "ID"
    try:
        result = host.run(words, deadline_s=host.timeout)
        return print_remote(host, verb, words, result)
    except TransportError as exc:
        unread = isinstance(exc, RemoteProtocolError) and exc.reference == "remote-bad-answer"
        if not unread and not may_have_run(exc):
            raise
        raise OutcomeUnknown(
            f"no answer of host {host.name} could be read after `vq {verb}` was sent "
            f"({exc.message}); it may or may not have taken effect",
            hint=f"check `vq status {host.name} {ids}` once the host answers; {verb} is "
            "safe to repeat",
        ) from exc


def _submit(host: RemoteHost, rest: list[str], ctx: click.Context) -> int:
    from vq.cli.submit_env import remote_environment_options
    from vq.cli.submit_fast import emit
    from vq.remote.submit import delegate_submit

    cut = rest.index("--") if "--" in rest else len(rest)
    head, command = rest[:cut], rest[cut + 1 :]
    if not command:
        raise UsageError(
            "no command given", hint=f"put the command after `--`: vq submit {host.name} -- echo hi"
        )
    for refused in ("--array-from", "--source-tar"):
        if any(word == refused or word.startswith(refused + "=") for word in head):
            raise UsageError(
                f"{refused} is not supported with a remote HOST",
                hint="use --array with indices, or give the files as SOURCE",
            )
    index = first_positional("submit", head)
    source = None
    if index is not None:
        source = Path(head[index]).absolute()
        head = head[:index] + head[index + 1 :]
        if first_positional("submit", head) is not None:
            raise UsageError(
                "expected at most one SOURCE after HOST",
                hint=f"vq submit {host.name} [SOURCE] [options] -- COMMAND",
            )
    as_json = bool(ctx.params.get("as_json"))
    options = [word for word in head if word != "--json"]
    options = remote_environment_options(options, os.environ)  # remote default: NONE
    payload = delegate_submit(
        host, options, command, source, idempotency_key=ctx.params.get("idempotency_key")
    )
    # the remote vq's `submit --json` (validated by the remote-answer model): the local shape
    emit(cast("SubmitAnswer", payload), as_json)
    for notice in payload.get("host_notices", []):  # e.g. no daemon runs there (exit 0)
        sys.stderr.write(f"vq: on {host.name}: {notice}\n")
    for entry in payload.get("reconciled_outbox", []):
        sys.stderr.write(
            f"vq: the earlier submit kept in {entry} (outcome unknown) is job "
            f"{payload.get('id')}: its outbox entry was removed\n"
        )
    return 0


def _wait(host: RemoteHost, ctx: click.Context) -> int:
    from vq.domain.durations import parse_duration
    from vq.remote.follow import wait_remote

    job_ids = list(ctx.params["job_ids"])
    extra = ["--json"] if ctx.params.get("as_json") else []
    if ctx.params.get("group"):
        extra += ["--group", ctx.params["group"]]
    timeout = ctx.params.get("timeout")
    return wait_remote(
        host,
        job_ids,
        timeout_s=float(parse_duration(timeout)) if timeout else None,
        extra=extra,
        out=sys.stdout.buffer,
    )
