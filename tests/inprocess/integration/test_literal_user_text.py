"""User text prints as it is: a job name or command holding what rich would read as
markup (``[red]``) or an emoji code (``:smile:``) is shown literally on a colour terminal
and piped, in every human table."""

from __future__ import annotations

import re

import pytest

from tests.conftest import Vq

ANSI = re.compile(r"\x1b\[[0-9;]*m")
NAME = "scan[red]1:smile:"
ARG = "[bold]x[/bold]"


@pytest.mark.parametrize("colour", [True, False], ids=["colour-terminal", "piped"])
def test_names_and_commands_with_markup_print_literally(vq: Vq, colour: bool) -> None:
    job = vq.submit("--job-name", NAME, "--", "echo", ARG)
    if colour:
        vq.env.update(FORCE_COLOR="1", COLUMNS="200")
    listing = ANSI.sub("", vq.run("list").stdout)
    status = ANSI.sub("", vq.run("status", job).stdout)
    for text in (listing, status):
        assert NAME in text, text
        assert ARG in text, text
    if colour:  # the colour is there, so rich did render these
        assert "\x1b[" in vq.run("list").stdout


def test_campaign_cleanup_failures_print_literally(capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    from vq.campaign.cleanup import CleanupItem, CleanupReport
    from vq.cli.campaign_render import print_cleanup

    report = CleanupReport(applied=True)
    report.items.append(CleanupItem(Path("/d/[red]x"), 10, "why [b]", error="[bold]denied"))
    print_cleanup(report)
    text = capsys.readouterr().out
    assert "failed ([bold]denied)  /d/[red]x  10 B  why [b]" in text, text
