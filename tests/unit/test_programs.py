"""The program registry's schema and its pure pin/dispatch/environment decisions (§3.4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vq.config.programs import BinaryProgram, ImportProgram, VenvProgram
from vq.config.settings import Settings, check_file
from vq.domain.programs import (
    ProgramStatus,
    dispatch_refusal,
    pin_mismatches,
    program_environment,
    resolved_pin,
    runtime_pin,
    with_pins,
)
from vq.errors import ConfigError

SHA_A = "a" * 40
SHA_B = "b" * 40


def _check(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return check_file(path)


def test_each_kind_parses(tmp_path: Path) -> None:
    parsed = _check(
        tmp_path,
        '[programs.a]\nkind = "binary"\npath = "sh"\n'
        '[programs.b]\nkind = "venv"\npython = "/v/bin/python"\ngit_dir = "/src"\n'
        'expected_git_sha = "ABCDEF1"\n'
        '[programs.c]\nkind = "import"\npython = "python3"\nmodule = "json"\n'
        'symbols = ["dumps"]\n',
    )
    programs = parsed.programs
    assert isinstance(programs["a"], BinaryProgram)
    assert isinstance(programs["b"], VenvProgram)
    assert isinstance(programs["c"], ImportProgram)


_X = "[programs.x]\n"
_VENV = _X + 'kind = "venv"\npython = "/p"\n'
ERRORS = [
    (_X + 'kind = "binary"\npath = "/t"\nbranch = "m"\n', ":4: programs.x.branch: unknown key"),
    (_X + 'path = "/t"\n', ":1: programs.x: needs kind = one of binary, venv, import"),
    (_X + 'kind = "conda"\n', "programs.x: kind must be one of binary, venv, import"),
    (_X + 'kind = "binary"\npath = "bin/t"\n', "programs.x.path: must be an abs"),
    (_VENV + 'git_dir = "src"\n', "programs.x.git_dir: must be an absolute path"),
    (_VENV + 'git_dir = "/s"\nexpected_git_sha = "abcdef12z"\n', "programs.x.expected_git_sha"),
    (_X + 'kind = "import"\npython = "/p"\nmodule = "a b"\n', "programs.x.module"),
    (_X + 'kind = "import"\npython = "/p"\nmodule = "m"\nsymbols = ["a-b"]\n', "symbols.0"),
    ('[programs."a b"]\nkind = "binary"\npath = "/t"\n', "program name 'a b'"),
]


@pytest.mark.parametrize(("text", "expected"), ERRORS)
def test_registry_errors_name_the_key(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _check(tmp_path, text)
    assert expected in caught.value.message


def test_pins_compare_prefixes_and_versions() -> None:
    assert pin_mismatches("AAAAAAA", None, SHA_A, None) == []
    assert pin_mismatches(None, None, None, None) == []
    assert pin_mismatches("bbbbbbb", "2.0", SHA_A, "1.0") == [
        f"git SHA is {SHA_A}, expected_git_sha is bbbbbbb",
        "import version is 1.0, expected_import_version is 2.0",
    ]
    assert pin_mismatches("bbbbbbb", "2.0", None, None) == [
        "git SHA is unreadable, expected_git_sha is bbbbbbb",
        "import version is unknown, expected_import_version is 2.0",
    ]
    venv = ProgramStatus("v", "venv", True, git_sha=SHA_A)
    assert with_pins(venv, "aaaaaaa", None) is venv
    judged = with_pins(venv, "bbbbbbb", None)
    assert not judged.available and judged.reason is not None
    assert judged.reason.startswith("pin mismatch: ")


def test_dispatch_refuses_only_what_the_snapshot_enforced() -> None:
    now = ProgramStatus("v", "venv", True, python="/v/bin/python", git_dir="/s", git_sha=SHA_B)
    observed = runtime_pin(ProgramStatus("v", "venv", True, git_sha=SHA_A), None, None)
    enforced = runtime_pin(ProgramStatus("v", "venv", True, git_sha=SHA_A), "aaaaaaa", None)
    assert dispatch_refusal("v", observed, now) is None  # crossing a rollout is allowed
    reason = dispatch_refusal("v", enforced, now)
    assert reason is not None and SHA_A in reason and SHA_B in reason
    assert dispatch_refusal("v", observed, None) is not None  # no longer registered
    gone = ProgramStatus("v", "venv", False, reason="boom")
    assert dispatch_refusal("v", observed, gone) == "program 'v' is unavailable at dispatch: boom"
    no_sha = ProgramStatus("v", "venv", True)
    assert "cannot be read" in str(dispatch_refusal("v", observed, no_sha))
    versioned = runtime_pin(ProgramStatus("v", "venv", True, import_version="1"), None, "1")
    assert dispatch_refusal("v", versioned, now) is not None  # now reports no version
    pin = resolved_pin(now, observed)
    assert (pin.git_sha, pin.resolved_git_sha) == (SHA_A, SHA_B)
    assert observed.resolved_git_sha is None  # the snapshot is not mutated


def test_environment_by_kind() -> None:
    binary = ProgramStatus("b", "binary", True, executable="/opt/b")
    assert program_environment("b", binary) == {"VQ_PROGRAM": "b", "VQ_PROGRAM_EXE": "/opt/b"}
    venv = ProgramStatus(
        "v", "venv", True, python="/v/bin/python", git_dir="/s", branch="main", git_sha=SHA_A
    )
    assert program_environment("v", venv) == {
        "VQ_PROGRAM": "v",
        "VQ_PROGRAM_BIN": "/v/bin",
        "VQ_PROGRAM_PYTHON": "/v/bin/python",
        "VQ_PROGRAM_GIT_DIR": "/s",
        "VQ_PROGRAM_BRANCH": "main",
        "VQ_PROGRAM_GIT_SHA": SHA_A,
    }
    imported = ProgramStatus("i", "import", True, python="/usr/bin/python3")
    assert program_environment("i", imported) == {
        "VQ_PROGRAM": "i",
        "VQ_PROGRAM_PYTHON": "/usr/bin/python3",
    }
