"""The Click-free fast path and the Click command parse `vq submit` identically."""

from __future__ import annotations

from typing import Any

import click
import pytest

from vq.cli.submit import submit
from vq.cli.submit_options import SUBMIT_OPTIONS, parse_fast

CASES = [
    ["--", "true"],
    ["--cpus", "2", "--mem-mb", "500", "--wall-time", "10m", "--", "python3", "-c", "print(1)"],
    ["--cpus=3", "--priority=-5", "--tag", "a", "--tag=b", "--json", "--", "x", "--cpus", "9"],
    ["inputs.tar.gz", "--job-name", "run 1", "--retry", "2", "--", "bash", "run.sh"],
    ["--not-before", "30m", "--cwd", "/tmp", "--", "sleep", "1"],
    ["--export", "A,B=1", "--env", "C=2", "--env=D=3", "--", "env"],
]


def _click_values(args: list[str]) -> tuple[list[str], dict[str, Any], list[str]]:
    ctx = submit.make_context("submit", list(args))
    values = dict(ctx.params)
    positional = list(values.pop("positional"))
    for option in SUBMIT_OPTIONS:
        if option.kind == "multi":
            values[option.dest] = list(values[option.dest])
    values["_given"] = {
        name
        for name in values
        if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)
    }
    return positional, values, ctx.meta["vq_command"]


@pytest.mark.parametrize("args", CASES)
def test_fast_parser_agrees_with_click(args: list[str]) -> None:
    assert parse_fast(args) == _click_values(args)


@pytest.mark.parametrize(
    "args",
    [
        ["--help", "--", "true"],
        ["--cpus", "0", "--", "true"],
        ["--cpus", "many", "--", "true"],
        ["--bogus", "--", "true"],
        ["--cpu", "2", "--", "true"],
        ["--json=yes", "--", "true"],
        ["--mem-mb"],
        ["-v", "--", "true"],
    ],
)
def test_fast_parser_defers_to_click_when_unsure(args: list[str]) -> None:
    assert parse_fast(args) is None
    if "--help" not in args:
        with pytest.raises(click.UsageError):
            submit.make_context("submit", list(args))
