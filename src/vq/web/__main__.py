"""``python -m vq.web``: serve the console (what the daemon's ``--web`` sidecar runs).

Options: ``--host`` (loopback unless ``--allow-remote``), ``--port``, ``--mode``
(``standalone`` or ``sidecar``), ``--fleet`` (also on with ``[web] fleet = true``) and
``--parent-pid``: when given, the process stops
itself (SIGTERM, a clean uvicorn shutdown) as soon as that parent is gone, so a console
never outlives the daemon that owns it. Exit code 2 for a refused bind address.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from vq.errors import VqError
from vq.web.binding import check_bind
from vq.web.hosts import configured_hosts, fleet_configured

__all__ = ["main"]

PARENT_POLL_SECONDS = 1.0


def _watch_parent(parent: int) -> None:
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="vq-web-parent", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vq.web")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8477)
    parser.add_argument("--mode", choices=("standalone", "sidecar"), default="standalone")
    parser.add_argument("--parent-pid", type=int, default=None)
    parser.add_argument("--allow-remote", action="store_true")
    parser.add_argument("--allowed-host", action="append", default=[])
    parser.add_argument("--fleet", action="store_true")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        names = configured_hosts(tuple(args.allowed_host))
        fleet = args.fleet or fleet_configured()
        warning = check_bind(args.host, args.port, args.allow_remote, names)
    except VqError as exc:
        print(f"vq: error: {exc.message}\nhint: {exc.hint}", file=sys.stderr)
        return exc.exit_code
    if warning:
        print(warning, file=sys.stderr)
    if args.parent_pid is not None:
        if os.getppid() != args.parent_pid:
            return 0  # the parent is already gone
        _watch_parent(args.parent_pid)
    from vq.web.serve import serve_forever

    serve_forever(args.host, args.port, mode=args.mode, allowed_hosts=names, fleet=fleet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
