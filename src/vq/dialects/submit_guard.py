"""Submit at most once per attempt: the guard every ``sbatch``/``qsub`` runs under on a
login host, and the parser of what it says (pure: shell text and parsing, no I/O).

A scheduler submission is the one step that cannot be repeated safely: a slow ``sbatch``
(a controller at ``MaxJobCount`` retries for minutes) may still land after the daemon
that started it was killed or its SSH link was cut, since neither kills the remote
process. So every submission of one attempt (a lane job's claim, a packed allocation)
runs under one **records directory** on the login host, and the guard, not the driver,
decides whether the submit command may run:

* ``lock``: ``flock``'ed (non-blocking) by the guard for as long as its staging and its
  submit command run; the submit command inherits the descriptor, so the lock is free
  only once no process of any earlier call can still submit;
* ``started``: the token of the call that started the submit command, written (and
  synced) before it starts;
* ``out``, ``err``, ``rc``: the submit command's answer, ``rc`` written last (atomically):
  its presence means the answer is complete.

Under the lock the guard answers, in this order (one marker line on stdout, first):

=========================================  ===========================================
records                                    the guard prints (exit status)
=========================================  ===========================================
lock held by another call                  ``vq-submit-busy`` (95)
``started`` is the ``supersede`` token     runs the submit command anew (see below)
``rc`` present                             ``vq-submit-answer RC TOKEN recorded``, the
                                           recorded stdout (stderr on stderr)
``started`` without ``rc``                 ``vq-submit-in-doubt TOKEN`` (94)
nothing                                    stages (``vq-stage-failed``, 97, on failure),
                                           writes ``started``, runs the submit command,
                                           records it, then ``vq-submit-answer RC TOKEN
                                           fresh`` and its stdout
``flock`` unusable on that filesystem      ``vq-submit-nolock`` (93): nothing ran
=========================================  ===========================================

So an attempt's submit command runs at most once, whoever calls and however often,
unless the driver deliberately **supersedes** a call it proved never submitted (absent
from the scheduler and accounting while the lock was free): it passes that call's token,
and only that exact state lets the command run again. A second driver, an orphaned ssh
arriving late or a retry after a lost answer gets the recorded answer instead.

:func:`probe_argv` reads the same state without running anything (``vq-submit-none`` when
no call ever started the submit command). Text a login shell prints before the marker
(a banner) is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "BUSY",
    "IN_DOUBT",
    "NO_LOCK",
    "STAGE_FAILED",
    "GuardState",
    "guarded_submit_argv",
    "parse_guard",
    "probe_argv",
    "records_dir",
]

#: Exit statuses of the guard itself (the submit command's own status passes through).
NO_LOCK, IN_DOUBT, BUSY, STAGE_FAILED = 93, 94, 95, 97

#: The records directory's place below a lane's scratch root (``scratch_root``): outside
#: every job workspace, so staging, copy-back and workspace cleanup never touch it.
RECORDS_ROOT = ".vibeqc-cluster/submits"

#: Nothing ran: the records or the workspace could not be made (the reason on stderr).
_STAGE_FAILED = f"{{ echo vq-stage-failed; exit {STAGE_FAILED}; }}"

#: Takes the lock of the records directory ``$d`` on descriptor 9 (kept open: the submit
#: command inherits it) and reads ``started`` into ``$st``.
_LOCK = (
    'command exec 9>>"$d/lock" || ' + _STAGE_FAILED + "; "
    "flock -n -E 75 9; r=$?; "
    f"if [ $r -eq 75 ]; then echo vq-submit-busy; exit {BUSY}; fi; "
    f"if [ $r -ne 0 ]; then echo vq-submit-nolock; exit {NO_LOCK}; fi; "
    'st=; if [ -f "$d/started" ]; then st=$(cat -- "$d/started"); fi; '
)
#: ``show WORD``: prints the recorded answer (rc, token, WORD, stdout; stderr on stderr)
#: and exits with the submit command's status.
_SHOW = (
    'show() { rc=$(cat -- "$d/rc"); echo "vq-submit-answer $rc $st $1"; '
    'cat -- "$d/out" 2>/dev/null; cat -- "$d/err" >&2 2>/dev/null; exit "$rc"; }; '
)

#: ``$1`` records dir, ``$2`` this call's token, ``$3`` the token it may supersede (``-``:
#: none), ``$4`` the workspace to unpack stdin's tar into (``-``: no staging), then the
#: submit command's argv.
_GUARDED_SUBMIT = (
    'd=$1 tok=$2 sup=$3 ws=$4; shift 4; mkdir -p -- "$d" || '
    + _STAGE_FAILED
    + "; "
    + _LOCK
    + _SHOW
    + 'if [ -n "$st" ] && [ "$st" = "$sup" ]; then '
    'rm -f -- "$d/rc" "$d/out" "$d/err" "$d/started"; st=; '
    'elif [ -f "$d/rc" ]; then show recorded; '
    f'elif [ -n "$st" ]; then echo "vq-submit-in-doubt $st"; exit {IN_DOUBT}; fi; '
    'if [ "$ws" != - ]; then '
    'mkdir -p -- "$ws" && tar -xf - -C "$ws" --no-same-owner || ' + _STAGE_FAILED + "; fi; "
    'printf "%s\\n" "$tok" >"$d/started.tmp" && mv -f -- "$d/started.tmp" "$d/started" '
    "|| " + _STAGE_FAILED + "; "
    'sync -- "$d/started" 2>/dev/null; st=$tok; '
    '"$@" >"$d/out.tmp" 2>"$d/err.tmp" </dev/null; rc=$?; '
    'mv -f -- "$d/out.tmp" "$d/out"; mv -f -- "$d/err.tmp" "$d/err"; '
    'printf "%s\\n" "$rc" >"$d/rc.tmp" && mv -f -- "$d/rc.tmp" "$d/rc"; '
    'sync -- "$d/rc" 2>/dev/null; show fresh'
)

#: ``$1`` records dir: what :func:`parse_guard` reads, nothing run.
_PROBE = (
    'd=$1; if [ ! -d "$d" ]; then echo vq-submit-none; exit 0; fi; '
    + _LOCK
    + _SHOW
    + 'if [ -f "$d/rc" ]; then show recorded; fi; '
    'if [ -n "$st" ]; then echo "vq-submit-in-doubt $st"; exit 0; fi; echo vq-submit-none'
)

_TOKEN = re.compile(r"[0-9a-f]{8,64}")


def records_dir(scratch_root: str, name: str) -> str:
    """The records directory of one attempt: ``<scratch_root>/.vibeqc-cluster/submits/
    <name>``; ``name`` is ``<job-id>.<attempt>`` or ``vqp-<allocation>``."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", name) or ".." in name:
        raise ValueError(f"not a records name: {name!r}")
    return f"{scratch_root.rstrip('/')}/{RECORDS_ROOT}/{name}"


def guarded_submit_argv(
    records: str,
    token: str,
    submit: Sequence[str],
    *,
    workspace: str | None = None,
    supersede: str | None = None,
) -> list[str]:
    """The one remote argv that stages (the tar on stdin into ``workspace``, when given)
    and runs ``submit`` under the guard of ``records`` (see the module docstring).
    ``token`` names this call; ``supersede`` is the token of an earlier call proved never
    submitted, the only state in which the submit command runs a second time."""
    for value in (token, supersede):
        if value is not None and not _TOKEN.fullmatch(value):
            raise ValueError(f"not a call token: {value!r}")
    return [
        "sh",
        "-c",
        _GUARDED_SUBMIT,
        "sh",
        records,
        token,
        supersede or "-",
        workspace or "-",
        *submit,
    ]


def probe_argv(records: str) -> list[str]:
    """The remote argv that reports the guard's state of ``records`` (nothing run)."""
    return ["sh", "-c", _PROBE, "sh", records]


GuardKind = Literal["answer", "busy", "in_doubt", "none", "no_lock", "stage_failed", "unreadable"]


@dataclass(frozen=True)
class GuardState:
    """What the guard said.

    * ``answer``: the submit command ran (``fresh``) or had run (``recorded``); ``rc``,
      ``stdout`` and ``stderr`` are its own, ``token`` the call that ran it;
    * ``busy``: another call holds the lock: it may still submit (never evidence of
      absence);
    * ``in_doubt``: the call ``token`` started the submit command and ended without
      recording its answer: only the scheduler can tell whether it landed;
    * ``none`` (probe only): no call ever started the submit command;
    * ``no_lock``: the records' filesystem cannot lock (nothing ran);
    * ``stage_failed``: staging failed, the submit command never ran (``stderr`` says
      why);
    * ``unreadable``: no marker line: the call may or may not have run (ambiguous).
    """

    kind: GuardKind
    rc: int | None = None
    token: str | None = None
    stdout: str = ""
    stderr: str = ""
    recorded: bool = False


_MARKER = re.compile(
    r"^vq-(?:submit-(?P<kind>answer|busy|in-doubt|none|nolock)|(?P<stage>stage-failed))"
    r"(?: (?P<rest>.*))?$"
)


def parse_guard(stdout: str, stderr: str) -> GuardState:
    """The guard's (or the probe's) answer: the first marker line decides; lines before
    it (a login banner) are skipped; after ``vq-submit-answer`` the rest of stdout is the
    submit command's own."""
    lines = stdout.split("\n")
    for index, line in enumerate(lines):
        match = _MARKER.match(line.rstrip("\r"))
        if match is None:
            continue
        if match["stage"]:
            return GuardState("stage_failed", stderr=stderr)
        kind, words = match["kind"], (match["rest"] or "").split()
        if kind == "answer":
            if len(words) != 3 or not _is_status(words[0]) or not _TOKEN.fullmatch(words[1]):
                return GuardState("unreadable", stdout=stdout, stderr=stderr)
            return GuardState(
                "answer",
                rc=int(words[0]),
                token=words[1],
                stdout="\n".join(lines[index + 1 :]),
                stderr=stderr,
                recorded=words[2] == "recorded",
            )
        if kind == "in-doubt":
            token = words[0] if words and _TOKEN.fullmatch(words[0]) else None
            return GuardState("in_doubt", token=token)
        if kind == "nolock":
            return GuardState("no_lock", stderr=stderr)
        return GuardState("busy" if kind == "busy" else "none")
    return GuardState("unreadable", stdout=stdout, stderr=stderr)


def _is_status(word: str) -> bool:
    return word.isdigit() and int(word) < 256
