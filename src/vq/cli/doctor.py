"""``vq doctor [--json]``: check and explain; exit 1 when any check fails."""

from __future__ import annotations

import click

from vq.cli.common import client, echo_json, paths

__all__ = ["doctor"]

_MARKS = {"ok": ("✓", "green"), "warn": ("!", "yellow"), "fail": ("✗", "bold red")}


@click.command()
@click.option("--json", "as_json", is_flag=True, help='Print {"ok": bool, "checks": [...]}.')
def doctor(as_json: bool) -> None:
    """Check the state root, daemon, config, cgroup mode, programs, specs, disk and clock."""
    from vq.config.settings import load_settings
    from vq.domain.spec import utcnow
    from vq.services.doctor import run_checks

    checks = run_checks(paths(), client().ping(), load_settings, utcnow())
    failed = any(check.status == "fail" for check in checks)
    if as_json:
        echo_json({"ok": not failed, "checks": [check.as_dict() for check in checks]})
    else:
        from rich.text import Text

        from vq.cli.rich_console import human_console

        console = human_console()
        for check in checks:
            mark, style = _MARKS[check.status]
            line = Text(f"{mark} ", style=style)
            line.append(f"{check.name}: ", style="bold")
            line.append(check.message)
            console.print(line)
            if check.hint and check.status != "ok":
                console.print(Text(f"    hint: {check.hint}", style="dim"))
    raise SystemExit(1 if failed else 0)
