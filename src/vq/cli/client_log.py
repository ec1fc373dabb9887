"""The CLI's ``client.log`` in the state root (§2.4): one line per mutating call.

Each line is JSON: ``{"ts", "verb", "jobs", "outcome", "exit_code", "pid"}`` — the UTC
time, the verb (``kill``, ``daemon drain``, ``web token create``…), the job ids it named
or created, ``ok`` or ``error``, and the exit code. Read verbs are not logged. When the
file reaches :data:`MAX_BYTES` it is renamed to ``client.log.1`` (replacing the previous
one) and a new file is started, so the pair never holds much more than twice the bound.

Best-effort by contract, like the event timeline: a state root that does not exist yet
is not created for it, and any failure to write is swallowed — logging never changes a
command's outcome. Stdlib only: it runs on ``vq submit``'s fast path.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time

__all__ = ["LOG_NAME", "MAX_BYTES", "MUTATING", "note_jobs", "record", "verb_of"]

LOG_NAME = "client.log"
MAX_BYTES = 1024 * 1024

#: Verbs that change state (a group's verbs as "group verb", a nested group's as
#: "group subgroup verb"). Reads (``list``, ``status``, ``web token list``…) are not here.
MUTATING = frozenset(
    {
        "submit",
        "kill",
        "pause",
        "resume",
        "resubmit",
        "cleanup",
        "fetch",
        "publish",
        "daemon start",
        "daemon stop",
        "daemon drain",
        "daemon undrain",
        "daemon throttle",
        "daemon reload",
        "daemon install-service",
        "web init-token",
        "web token create",
        "web token revoke",
        "web user add",
        "web user remove",
        "campaign run",
        "campaign retry",
        "campaign cleanup",
        "campaign artifact-publish",
        "runtime deploy",
        "pack open",
        "pack seal",
        "pack submit",
        "pack reconcile",
        "pack resolve",
        "scheduler resolve",
        "admin import-tree",
        "admin user add",
    }
)
#: Verbs that only report what they would do unless given their flag (dry runs change nothing).
DRY_UNLESS = {"cleanup": "--execute", "campaign cleanup": "--apply"}
_GROUPS = frozenset(
    {"daemon", "web", "config", "programs", "campaign", "runtime", "pack", "scheduler", "admin"}
)
#: Groups inside a group: their verb is the third word.
_NESTED = frozenset({"web token", "web user", "admin user"})
_JOB_ID = re.compile(r"[0-9a-f]{12}")

#: Job ids a verb created during this process (a submit's new ids).
_created: list[str] = []


def note_jobs(job_ids: list[str]) -> None:
    """Remember the ids a command created, for its log line."""
    _created.extend(job_ids)


def verb_of(args: list[str]) -> str | None:
    """The verb ``args`` invoke (``"kill"``, ``"daemon drain"``), None when there is none."""
    words = [arg for arg in args if not arg.startswith("-")]
    if not words:
        return None
    if words[0] not in _GROUPS or len(words) == 1:
        return words[0]
    group = f"{words[0]} {words[1]}"
    if group in _NESTED and len(words) > 2:
        return f"{group} {words[2]}"
    return group


def _named_jobs(args: list[str]) -> list[str]:
    words = args[: args.index("--")] if "--" in args else args
    return [word for word in words if _JOB_ID.fullmatch(word)]


def _rotate(path: str) -> None:
    try:
        if os.stat(path).st_size >= MAX_BYTES:
            os.replace(path, path + ".1")
    except OSError:
        pass


def record(args: list[str], exit_code: int, env: dict[str, str] | None = None) -> None:
    """Append the line for one finished CLI call when its verb mutates state (the ids
    :func:`note_jobs` noted are this call's: they are consumed either way)."""
    created = list(_created)
    _created.clear()
    try:
        verb = verb_of(args)
        if verb is None or verb not in MUTATING:
            return
        if verb in DRY_UNLESS and DRY_UNLESS[verb] not in args:
            return  # a dry run
        from vq.config.roots import state_root

        root = state_root(os.environ if env is None else env)
        if not os.path.isdir(root):
            return
        path = os.path.join(root, LOG_NAME)
        _rotate(path)
        line = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "+00:00",
            "verb": verb,
            "jobs": list(dict.fromkeys([*_named_jobs(args), *created])),
            "outcome": "ok" if exit_code == 0 else "error",
            "exit_code": exit_code,
            "pid": os.getpid(),
        }
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
        # Never blocks on a FIFO planted here, never follows a link; only a regular file
        # is written (the same rule as vq._fs.open_append_regular, without its imports).
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK
        fd = os.open(path, flags | os.O_NOFOLLOW, 0o600)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return
            os.write(fd, data)
        finally:
            os.close(fd)
    except Exception:  # best-effort: never change the command's outcome
        return
