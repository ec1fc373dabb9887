"""``python -m vq.daemon``: run the daemon in the foreground (what ``vq daemon run`` execs).

Flags override the ``[daemon]`` config section. Exit codes follow ``vq.errors``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys

from vq._fs import open_log
from vq.config.multi_user import allow_root_from_env, multi_user_root
from vq.config.settings import Settings, load_settings
from vq.errors import VqError, storage_error_under
from vq.paths import MultiUserLayout, StatePaths
from vq.services.admin_token import admin_token_path
from vq.services.root_guard import start_mode
from vq.services.system_tree import admin_gid

from .compose import compose_daemon
from .multi_user import MultiUser
from .sidecar import DEFAULT_WEB_PORT, WebOptions


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vq daemon run")
    for flag in ("max-jobs", "max-cpus", "max-mem-mb", "default-job-mem-mb"):
        parser.add_argument(f"--{flag}", type=int, default=None)
    parser.add_argument("--tick-seconds", type=float, default=None)
    parser.add_argument("--auto-resume", action="store_true")
    parser.add_argument("--web", action="store_true", help="Also serve the web console.")
    parser.add_argument("--web-host", default="127.0.0.1")
    parser.add_argument("--web-port", type=int, default=DEFAULT_WEB_PORT)
    parser.add_argument("--web-allow-remote", action="store_true")
    parser.add_argument("--web-fleet", action="store_true", help="Serve the fleet console too.")
    parser.add_argument(
        "--allow-root", action="store_true", help="As root: a single-user daemon (CI, containers)."
    )
    return parser.parse_args(argv)


def _system_root(settings: Settings) -> tuple[StatePaths, MultiUser]:
    """The system root's layout and the multi-user parts (ConfigError: no admin group)."""
    policy = settings.multi_user
    runtime = MultiUser(
        policy=policy,
        quotas=settings.quotas.policy(),
        admin_gid=admin_gid(policy),
        token_path=admin_token_path(os.environ),
    )
    return MultiUserLayout(multi_user_root(os.environ)), runtime


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    auto_resume = bool(args.auto_resume)
    web = (
        WebOptions(args.web_host, args.web_port, bool(args.web_allow_remote), bool(args.web_fleet))
        if args.web
        else None
    )
    overrides = {
        key: value
        for key, value in vars(args).items()
        if value is not None
        and key not in {"auto_resume", "allow_root"}
        and not key.startswith("web")
    }
    paths = StatePaths.from_env()
    allow_root = bool(args.allow_root) or allow_root_from_env(os.environ)
    try:
        # First of all: a refused root start leaves no log, pidfile or state tree behind.
        mode = start_mode(
            os.geteuid(),
            allow_root,
            lambda: load_settings(overrides={"daemon": overrides} if overrides else None),
        )
        settings = mode.settings
        multi_user = None
        if mode.kind == "multi_user":
            paths, multi_user = _system_root(settings)
        paths.ensure()
        os.close(open_log(paths.daemon_log))  # created (or kept) never world-readable
    except VqError as exc:
        return _refused(exc)
    except OSError as exc:  # the state tree could not be made: a full disk is clear
        full = storage_error_under(exc, paths.root)
        if full is None:
            raise
        return _refused(full)
    handlers: list[logging.Handler] = [logging.FileHandler(paths.daemon_log)]
    if sys.stderr.isatty():
        handlers.append(logging.StreamHandler())
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
    )
    # A log line the disk refuses is dropped, never a traceback on stderr (a full disk
    # is reported where it matters: the storage hold).
    logging.raiseExceptions = False
    if mode.warning:
        logging.getLogger("vq.daemon").warning("%s", mode.warning)
    try:
        daemon = compose_daemon(
            paths,
            settings,
            auto_resume=auto_resume,
            web=web,
            overrides={"daemon": overrides} if overrides else None,
            multi_user=multi_user,
        )
        return daemon.run()
    except VqError as exc:
        logging.getLogger("vq.daemon").error("%s", exc.message)
        return _refused(exc)
    except OSError as exc:
        # A full disk at start (the capacity snapshot, the pid file, a recovery write):
        # the daemon does not start, and says why in one line.
        full = storage_error_under(exc, paths.root)
        if full is None:
            raise
        logging.getLogger("vq.daemon").error("%s: the daemon did not start", full.message)
        return _refused(full)


def _refused(exc: VqError) -> int:
    """Print ``exc`` as the CLI does and return its exit code (stderr may be daemon.log
    on a full disk: a line that cannot be written is dropped, the code stands)."""
    with contextlib.suppress(OSError):
        print(f"vq: error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        sys.stderr.flush()
    return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
