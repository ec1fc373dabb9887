"""The ``vq`` Click application: one root group with lazily imported subcommands.

Error contract: every failure prints exactly ``vq: error: <message>`` and, when there is
one, ``hint: <hint>`` on stderr, and exits with the code from :mod:`vq.errors` (usage
errors exit 2). No traceback is shown unless ``--debug`` is given.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from vq.cli.output import print_error as _print_error
from vq.cli.output import storage_failure
from vq.errors import VqError

__all__ = ["cli", "run"]

#: name → "module:attribute"; modules are imported only when their command runs.
COMMANDS: dict[str, str] = {
    "submit": "vq.cli.submit:submit",
    "list": "vq.cli.inspect:list_jobs",
    "queue": "vq.cli.inspect:list_jobs",
    "status": "vq.cli.inspect:status",
    "events": "vq.cli.inspect:events",
    "logs": "vq.cli.logs:logs",
    "kill": "vq.cli.control:kill",
    "wait": "vq.cli.control:wait",
    "pause": "vq.cli.control:pause",
    "resume": "vq.cli.control:resume",
    "resubmit": "vq.cli.control:resubmit",
    "fetch": "vq.cli.fetch:fetch",
    "cleanup": "vq.cli.cleanup:cleanup",
    "daemon": "vq.cli.daemon_cmd:daemon",
    "top": "vq.cli.top:top",
    "overview": "vq.cli.reports:overview",
    "usage": "vq.cli.reports:usage",
    "doctor": "vq.cli.doctor:doctor",
    "profiles": "vq.cli.profiles:profiles",
    "programs": "vq.cli.programs:programs",
    "config": "vq.cli.config_cmd:config",
    "web": "vq.cli.web_cmd:web",
    "campaign": "vq.cli.campaign:campaign",
    "pack": "vq.cli.pack:pack",
    "publish": "vq.cli.publish_cmd:publish",
    "runtime": "vq.cli.runtime_cmd:runtime",
    "hosts": "vq.cli.hosts:hosts",
    "scheduler": "vq.cli.scheduler_cmd:scheduler",
    "admin": "vq.cli.admin:admin",
}

SHORT_HELP: dict[str, str] = {
    "submit": "Submit a job; prints its id.",
    "list": "List jobs (alias of queue).",
    "queue": "List jobs here, on HOST, or on every host (--all).",
    "status": "Everything known about one job.",
    "events": "The timeline of one job.",
    "logs": "Show or follow a job's stdout/stderr.",
    "kill": "Kill a pending or running job.",
    "wait": "Wait until jobs end; exit with the job's code.",
    "pause": "Pause running jobs (SIGSTOP).",
    "resume": "Resume paused jobs (SIGCONT).",
    "resubmit": "Run an ended job again as a new job.",
    "fetch": "Copy a job's workspace, workdir or one file out.",
    "cleanup": "Archive or sweep old ended jobs (dry run by default).",
    "daemon": "Start, stop and inspect the daemon.",
    "top": "Live view of running jobs and capacity.",
    "overview": "Queue counts, capacity and daemon health.",
    "usage": "Wall- and CPU-hours per tag, name, day, state or in total.",
    "doctor": "Check the installation and explain problems.",
    "profiles": "List the submit presets ([profile.NAME]).",
    "programs": "Probe the registered programs ([programs.NAME]).",
    "config": "Show the effective configuration, check a file, or audit its secrets.",
    "web": "Serve the web console and /api/v1; manage its credentials.",
    "campaign": "Campaigns: pinned job DAGs with verified artifacts.",
    "pack": "Packed Slurm sweeps: profiles, rosters and plans.",
    "publish": "Publish a directory atomically (absent or complete).",
    "runtime": "Deploy verified runtime generations (vq runtime deploy).",
    "hosts": "Configured remote hosts and their health (--probe).",
    "scheduler": "Scheduler lanes: resolve a job whose submission is in doubt.",
    "admin": "Administer the multi-user system root (root only).",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use (fast ``vq submit``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Like Click's, but an unknown verb gets a did-you-mean (``vq stauts``)."""
        name = click.utils.make_str(args[0])
        if name not in COMMANDS and not name.startswith("-"):
            raise click.UsageError(f"no such command {name!r}", ctx) from None
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, SHORT_HELP[name]) for name in COMMANDS])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(package_name="vq", prog_name="vq")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """vq — a durable job queue for research computing.

    The state root is VQ_STATE_DIR (else $XDG_DATA_HOME/vq, else ~/.local/share/vq).
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def run(args: list[str]) -> None:
    """Run the Click application and map every failure to an exit code."""
    from vq.cli.remote_route import global_count, route

    debug = "--debug" in args[: global_count(args)] or os.environ.get("VQ_DEBUG") == "1"
    try:
        routed = route(args)
        if isinstance(routed, int):
            sys.exit(routed)
        rv: Any = cli.main(
            args=args if routed is None else routed, prog_name="vq", standalone_mode=False
        )
    except VqError as exc:
        if debug:
            raise
        _print_error(exc.message, exc.hint)
        sys.exit(exc.exit_code)
    except click.exceptions.NoSuchOption as exc:
        _print_error(exc.format_message(), _option_hint(exc, args))
        sys.exit(2)
    except click.UsageError as exc:
        _print_error(exc.format_message(), _usage_hint(exc, args))
        sys.exit(2)
    except click.exceptions.Abort:  # Click's form of Ctrl-C inside a command
        _print_error("interrupted", None)
        sys.exit(130)
    except click.ClickException as exc:
        _print_error(exc.format_message(), None)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _print_error("interrupted", None)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(141)
    except Exception as exc:
        if debug:
            raise
        full = storage_failure(exc)
        if full is not None:
            _print_error(full.message, full.hint)
            sys.exit(full.exit_code)
        _print_error(f"internal error: {type(exc).__name__}: {exc}", "rerun with --debug")
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


def _option_hint(exc: click.exceptions.NoSuchOption, args: list[str]) -> str:
    """For ``vq submit python3 -c …`` (no ``--``): the job's own options are not vq's."""
    ctx = exc.ctx
    if ctx is not None and ctx.info_name == "submit" and "--" not in args:
        return (
            "put the job's command after `--`, so its options are not read as vq's: "
            "vq submit [OPTIONS] -- COMMAND [ARGS...]"
        )
    return _help_hint(ctx)


def _usage_hint(exc: click.UsageError, args: list[str]) -> str:
    """A did-you-mean for an unknown verb, else the usual pointer to ``--help``."""
    import difflib

    message = exc.format_message()
    if message.startswith("no such command "):
        verb = next((a for a in args if not a.startswith("-")), "")
        close = difflib.get_close_matches(verb, COMMANDS, n=3, cutoff=0.7)
        if close:
            return "did you mean " + " or ".join(f"`vq {name}`" for name in close) + "?"
        return "`vq --help` lists the commands"
    return _help_hint(exc.ctx)


def _help_hint(ctx: click.Context | None) -> str:
    path = ctx.command_path if ctx is not None else "vq"
    return f"run `{path} --help` for usage"
