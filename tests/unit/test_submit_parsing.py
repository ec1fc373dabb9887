"""The Click-free fast path and the Click command parse `vq submit` identically.

The agreement is a Hypothesis property over generated command lines: any subset of the
options (each spelt ``--flag value`` or ``--flag=value``, repeatable ones repeated),
values in range, an optional SOURCE and a command that may itself look like options.
"""

from __future__ import annotations

from typing import Any

import click
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from vq.cli.submit import submit
from vq.cli.submit_options import SUBMIT_OPTIONS, Option, parse_fast

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


_WORD = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789._/ :+", min_size=1, max_size=12
).filter(lambda text: not text.startswith("-"))


def _value(option: Option) -> st.SearchStrategy[str]:
    if option.kind == "int":
        low = option.minimum if option.minimum is not None else -(10**6)
        high = option.maximum if option.maximum is not None else 10**6
        return st.integers(low, high).map(str)
    return _WORD


@st.composite
def _spelt(draw: st.DrawFn, option: Option) -> list[str]:
    """One occurrence of ``option`` on a command line, in either spelling."""
    if option.kind == "flag":
        return [option.flag]
    value = draw(_value(option))
    return [f"{option.flag}={value}"] if draw(st.booleans()) else [option.flag, value]


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    chosen = draw(st.lists(st.sampled_from(SUBMIT_OPTIONS), unique_by=lambda o: o.flag))
    head: list[str] = []
    for option in chosen:
        times = draw(st.integers(1, 3)) if option.kind == "multi" else 1
        for _ in range(times):
            head += draw(_spelt(option))
    source = draw(st.lists(_WORD, max_size=1))
    command = draw(st.lists(st.one_of(_WORD, st.sampled_from(["--cpus", "-x", "--"]))))
    return [*source, *head, "--", *command]


@given(command_lines())
@settings(max_examples=150, deadline=None)
@example(CASES[0])
@example(CASES[1])
@example(CASES[2])
@example(CASES[3])
@example(CASES[4])
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
