"""The pure --export/--env rules (vq.domain.environment)."""

from __future__ import annotations

import pytest

from vq.domain.environment import (
    BASE_DAEMON,
    BASE_SUBMITTER,
    BadEnvironment,
    CapturedEnvironment,
    capture,
    parse_export,
)

SHELL = {"MYBASIS": "def2-svp", "PATH": "/chem/bin:/usr/bin", "VQ_JOB_ID": "abc", "A-B": "x"}


def test_local_default_is_all_without_vq_or_odd_names() -> None:
    captured = capture(SHELL, None)
    assert captured.base == BASE_SUBMITTER
    assert captured.variables == {"MYBASIS": "def2-svp", "PATH": "/chem/bin:/usr/bin"}


def test_remote_default_is_none_and_forwards_only_what_is_named() -> None:
    assert capture(SHELL, None, remote=True).is_empty
    named = capture(SHELL, "MYBASIS", ["X=1"], remote=True)
    assert named.base == BASE_DAEMON and named.variables == {"MYBASIS": "def2-svp", "X": "1"}


def test_configured_default_and_explicit_export() -> None:
    assert capture(SHELL, None, configured="NONE").is_empty
    assert capture(SHELL, "all", configured="NONE").base == BASE_SUBMITTER
    assert capture(SHELL, "UNSET_NAME,K=v=w").variables == {"K": "v=w"}
    assert capture(SHELL, "NONE", ["K=1", "K=2"]).variables == {"K": "2"}


@pytest.mark.parametrize("text", ["", ",", "1A", "VQ_CPUS", "A-B", "X=a\x00b"])
def test_bad_export_texts(text: str) -> None:
    with pytest.raises(BadEnvironment):
        parse_export(text)


def test_repr_and_errors_never_show_values() -> None:
    captured = capture({"TOKEN": "hunter2"}, "ALL")
    assert "hunter2" not in repr(captured)
    with pytest.raises(BadEnvironment) as caught:
        capture({}, "NONE", ["TOKEN"])
    assert "TOKEN" in str(caught.value)


def test_round_trip_and_validation_of_stored_form() -> None:
    captured = capture(SHELL, "MYBASIS")
    assert CapturedEnvironment.from_json(captured.to_json()).to_json() == captured.to_json()
    with pytest.raises(BadEnvironment):
        CapturedEnvironment.from_json({"base": "elsewhere", "variables": {}})
    with pytest.raises(BadEnvironment):
        CapturedEnvironment.from_json({"base": "daemon", "variables": {"VQ_X": "1"}})


def test_remote_submit_options_default_to_none_and_forward_named_values() -> None:
    from vq.cli.submit_env import remote_environment_options
    from vq.errors import UsageError

    shell = {"MYBASIS": "def2-svp", "OTHER": "x", "PATH": "/chem/bin"}
    assert remote_environment_options(["--cpus", "2"], shell) == [
        "--cpus",
        "2",
        "--export",
        "NONE",
    ]
    forwarded = remote_environment_options(
        ["--export", "MYBASIS", "--env=K=v", "--tag", "t"], shell
    )
    assert forwarded == ["--tag", "t", "--export", "NONE", "--env=K=v", "--env=MYBASIS=def2-svp"]
    with pytest.raises(UsageError):
        remote_environment_options(["--export=ALL"], shell)
