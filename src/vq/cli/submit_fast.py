"""``vq submit`` without Click: parse with the shared option table, call the daemon.

Returns None (so Click takes over) whenever the command line is not plainly well formed.
Semantics are identical to the Click command: both build params with
:func:`vq.cli.submit_options.build_params` and print with :func:`emit`.
"""

from __future__ import annotations

import os

from vq.cli.output import NO_DAEMON, echo_json, note, print_error, storage_failure, warn
from vq.cli.submit_options import build_params, parse_fast
from vq.config import multi_user_root, roots
from vq.errors import DaemonNotRunning, VqError

# typing is imported for the type checker only: this module is on the Click-free
# `vq submit` fast path, where importing typing costs milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from vq.protocol.answers import SubmitAnswer


__all__ = ["emit", "run_fast", "submit_params"]


def submit_params(params: dict[str, Any]) -> SubmitAnswer:
    """Submit through the daemon, or write the spec ourselves when none answers."""
    from vq.cli.submit_options import release_spool

    try:
        return _submit_params(params)
    finally:
        release_spool(params)


def _submit_params(params: dict[str, Any]) -> SubmitAnswer:
    """:meth:`vq.gateway.Gateway.submit`, with a cheaper import when a daemon answers.

    The daemon is asked with the stdlib client; only when none answers is the gateway
    (and with it pydantic, the configuration and the services) imported to write the
    spec on disk.
    """
    from vq.client import Client

    try:
        system_root = multi_user_root.multi_user_root(os.environ)
        multi_user = system_root is not None
    except multi_user_root.UnreadablePolicy:
        system_root, multi_user = None, True  # the layout below reports it (fail closed)
    if multi_user:
        # Multi-user mode: the job goes to the submitter's own tree, where the daemon finds
        # it: handed to the daemon's socket for this user when it answers, else written here.
        from vq.client import submit_to_owner_socket

        answered = submit_to_owner_socket(system_root, params, os.environ)
        if answered is not None:
            return answered
        from vq.cli.common import gateway

        return gateway().submit_on_disk(params)
    sock = roots.daemon_socket(os.environ)
    if os.path.exists(sock):
        try:
            answer: SubmitAnswer = Client(sock).call("submit", params)
            return answer
        except DaemonNotRunning:
            pass
    from vq.gateway import Gateway
    from vq.paths import StatePaths

    payload = Gateway(StatePaths.from_env()).submit_on_disk(params)
    count = (len(payload["jobs"]) if "jobs" in payload else 0) or 1
    note(f"{'the job is' if count == 1 else f'the {count} jobs are'} PENDING; {NO_DAEMON}")
    return payload


def emit(payload: SubmitAnswer, as_json: bool) -> None:
    from vq.cli.client_log import note_jobs

    if "jobs" in payload:
        created = [job["id"] for job in payload["jobs"]]
    else:
        created = [payload["id"]] if payload["id"] else []
    note_jobs(created)
    for message in payload.get("capacity_warnings", []):
        warn(message)
    if as_json:
        echo_json(payload)
    elif "jobs" in payload:  # an array or a chain: every id, in index order
        print("\n".join(job["id"] for job in payload["jobs"]), flush=True)
    else:
        print(payload["id"], flush=True)
    if "jobs" in payload:  # the group id on stderr (stdout stays the ids; --json has it)
        kind = "array" if "array_group_id" in payload else "chain"
        group = payload.get("array_group_id") or payload.get("chain_group_id")
        note(f"{kind} group {group}: {len(payload['jobs'])} jobs (`vq list --group {group}`)")


def run_fast(args: list[str]) -> int | None:
    parsed = parse_fast(args)
    if parsed is None:
        return None
    positional, values, command = parsed
    try:
        emit(submit_params(build_params(positional, values, command)), values["as_json"])
    except VqError as exc:
        if os.environ.get("VQ_DEBUG") == "1":
            raise
        print_error(exc.message, exc.hint)
        return exc.exit_code
    except Exception as exc:  # as the Click path does: one error line, never a traceback
        if os.environ.get("VQ_DEBUG") == "1":
            raise
        full = storage_failure(exc)
        if full is None:
            print_error(f"internal error: {type(exc).__name__}: {exc}", "rerun with --debug")
            return 1
        print_error(full.message, full.hint)
        return full.exit_code
    return 0
