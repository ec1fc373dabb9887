"""Every value a user can give any CLI option ends in a documented exit code, never a
traceback or an "internal error" (in-process, against an empty temp state root).

The Click tree is walked so a new command or option is fuzzed without touching this
file. Commands that serve, wait, follow or start processes are skipped (they block by
design), as are the interactive account commands.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click
import click.testing
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from vq.cli.app import cli
from vq.cli.main import main
from vq.errors import EXIT_CODES

#: The documented exit codes (docs/cli.md): the error table, success, and Ctrl-C.
DOCUMENTED = {0, 130, *EXIT_CODES.values()}
#: Commands that block by design (serve, follow, wait, live views, daemons) or prompt.
SKIPPED = {
    ("daemon", "start"),
    ("daemon", "run"),
    ("daemon", "stop"),
    ("daemon", "restart"),
    ("web", "serve"),
    ("web", "user"),
    ("wait",),
    ("top",),
    ("logs",),
}
JOB_ID = "0123456789ab"


def _commands(
    group: click.Group, ctx: click.Context, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None:
            continue
        here = (*path, name)
        if any(here[: len(skip)] == skip for skip in SKIPPED):
            continue
        if isinstance(command, click.Group):
            yield from _commands(command, ctx, here)
        else:
            yield here, command


def _valued_options() -> list[tuple[tuple[str, ...], str, list[str]]]:
    """(command path, option flag, required positional arguments) for each option with a value."""
    with click.Context(cli) as ctx:
        found = []
        for path, command in _commands(cli, ctx, ()):
            required = [
                JOB_ID for p in command.params if isinstance(p, click.Argument) and p.required
            ]
            for param in command.params:
                if isinstance(param, click.Option) and not param.is_flag and param.opts:
                    found.append((path, max(param.opts, key=len), required))
    return found


OPTIONS = _valued_options()
VALUES = st.one_of(
    st.text(max_size=30),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.sampled_from(
        [
            "",
            " ",
            "0",
            "-1",
            "1e9",
            "nan",
            "inf",
            "١",
            "²",
            "99999999999999999999d",
            "0001-01-01",
            "9999-12-31T23:59:59",
            "10",
            "1-",
            "\x1b[2J",
            "../../x",
            "a" * 300,
            "/dev/zero",
            "-",
            "--",
            "2G",
            "1:2:3:4",
            "1,1",
            "0-99999999",
        ]
    ),
)


@pytest.fixture(scope="module")
def roots() -> Iterator[dict[str, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        yield {
            "VQ_STATE_DIR": str(Path(tmp) / "state"),
            "VQ_CONFIG_DIR": str(Path(tmp) / "config"),
            "VQ_ARCHIVE_DIR": str(Path(tmp) / "archive"),
        }


def run_in_process(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run `vq ARGS` in this process, in a fresh working directory (verbs that write
    relative to it, like `vq publish DEST`, start clean each time); (exit code, stderr)."""
    runner = click.testing.CliRunner()
    with (
        tempfile.TemporaryDirectory() as cwd,
        contextlib.chdir(cwd),
        runner.isolation(input="", env=env) as (_, err, _),
    ):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        stderr = err.getvalue().decode(errors="replace")
    return code, stderr


@pytest.mark.parametrize(
    ("path", "flag", "required"),
    OPTIONS,
    ids=lambda v: "-".join(v) if isinstance(v, tuple) else str(v),
)
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=VALUES)
@example(value="a\x00b")  # no shell can pass a NUL; an in-process caller can
@example(value="/tmp/\x00")
def test_every_option_value_ends_in_a_documented_code(
    roots: dict[str, str], path: tuple[str, ...], flag: str, required: list[str], value: str
) -> None:
    args = [*path, *required, f"{flag}={value}"]
    if path == ("submit",):
        args += ["--", "true"]
    code, stderr = run_in_process(args, roots)
    assert code in DOCUMENTED, (args, code, stderr)
    assert "internal error" not in stderr and "Traceback" not in stderr, (args, stderr)
    if code != 0:
        assert stderr.startswith("vq: error: "), (args, stderr)


def test_a_nul_byte_in_an_argument_is_a_usage_error_with_a_hint(roots: dict[str, str]) -> None:
    code, stderr = run_in_process(["submit", "--array-from=a\x00b", "--", "true"], roots)
    assert code == 2, stderr
    assert stderr.startswith("vq: error: argument 2 ('--array-from=a\\x00b') contains a NUL byte")
    assert "\nhint: " in stderr and "internal error" not in stderr


def test_the_walk_finds_the_commands_that_take_values() -> None:
    found = {(path, flag) for path, flag, _ in OPTIONS}
    for expected in (
        (("submit",), "--wall-time"),
        (("list",), "--since"),
        (("cleanup",), "--older-than"),
    ):
        assert expected in found
    assert len(found) > 40
