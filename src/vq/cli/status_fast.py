"""``vq status ID`` without Click: one full job id, asked of the local daemon.

The read a user (or a script polling a job) repeats most. Click and the gateway cost
more to import than the daemon takes to answer, so a plainly well-formed
``vq status ID [--json] [--raw]`` with a full 12-character id is answered here with the
stdlib client and printed exactly as the Click command prints it
(:func:`vq.cli.output.echo_json`, :func:`vq.cli.render.print_status`); piped output of
a plain table is built without rich (:func:`vq.cli.render_text.plain_status`).

Returns None (so Click takes over, and says whatever there is to say) for anything
else: multi-user mode (or a policy file it cannot read: the layout decides which daemon
answers), another option, an id prefix, configured ``[hosts.NAME]`` (the job may live on
another host: hostless discovery decides), no daemon socket, or any error from the
daemon (an unknown id, a daemon going away). ``status`` changes nothing, so asking
again on the Click path is harmless.
"""

from __future__ import annotations

import sys

from vq.cli.fast_daemon import local_daemon_socket
from vq.domain.ids import is_job_id

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time on this fast path
    from vq.protocol.answers import StatusView

__all__ = ["run_status_fast"]

_FLAGS = frozenset({"--json", "--raw"})


def run_status_fast(rest: list[str]) -> int | None:
    """Answer ``vq status`` + ``rest`` and return 0, or None to let Click handle it."""
    words = [word for word in rest if word not in _FLAGS]
    if len(words) != 1 or not is_job_id(words[0]) or len(set(rest)) != len(rest):
        return None
    socket_path = local_daemon_socket()
    if socket_path is None:
        return None
    from vq.errors import VqError

    try:
        from vq.client import Client

        view: StatusView = Client(socket_path).call("status", {"id": words[0]})
    except (VqError, OSError, ValueError):
        return None
    if not isinstance(view, dict):
        return None
    if "--json" in rest:
        from vq.cli.output import echo_json

        echo_json(view)
        return 0
    from vq.cli.render_text import plain_status

    text = plain_status(view, raw="--raw" in rest)
    if text is not None:  # piped and plain: the same text, without importing rich
        sys.stdout.write(text)
        return 0
    from vq.cli.render import print_status

    print_status(view, raw="--raw" in rest)
    return 0
