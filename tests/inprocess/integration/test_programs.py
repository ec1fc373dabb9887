"""The program registry end to end (§3.4): real executables, a real venv, a real checkout.

Nothing is mocked: the binary is a script written here, the venv is made with
``python -m venv`` and imports a package from a git checkout made with ``git init``
(through a ``.pth`` file, as an editable install does), and every probe runs the real
``git`` and interpreter through the daemon or the CLI.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq

GIT = [
    "git",
    "-c",
    "user.name=vq test",
    "-c",
    "user.email=vq@test.invalid",
    "-c",
    "init.defaultBranch=main",
    "-c",
    "commit.gpgsign=false",
]


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        [*GIT, "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


@dataclass
class World:
    tmp: Path
    tool: Path  # an executable script
    repo: Path  # a git checkout holding the package ``mypkg`` (version 1.2.3)
    python: Path  # a venv interpreter that imports mypkg from the checkout

    def head(self) -> str:
        return _git(self.repo, "rev-parse", "HEAD")

    def commit(self, text: str) -> str:
        with open(self.repo / "CHANGES", "a") as handle:
            handle.write(text + "\n")
        _git(self.repo, "add", "CHANGES")
        _git(self.repo, "commit", "-q", "-m", text)
        return self.head()


@pytest.fixture
def world(tmp_path: Path) -> World:
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir()
    tool.write_text('#!/bin/sh\necho "tool ran $*"\n')
    tool.chmod(0o755)
    repo = tmp_path / "checkout"
    (repo / "mypkg").mkdir(parents=True)
    (repo / "mypkg" / "__init__.py").write_text('__version__ = "1.2.3"\n')
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "first")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "checkout.pth").write_text(f"{repo}\n")
    return World(tmp_path, tool, repo, python)


def _config(vq: Vq, text: str) -> None:
    config_dir = Path(vq.env["VQ_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(text)


def _venv(w: World, name: str, **extra: str) -> str:
    lines = [
        f"[programs.{name}]",
        'kind = "venv"',
        f'python = "{w.python}"',
        f'git_dir = "{w.repo}"',
        'import_check = "mypkg"',
    ]
    lines += [f'{key} = "{value}"' for key, value in extra.items()]
    return "\n".join(lines) + "\n\n"


def _binary(name: str, path: Path | str) -> str:
    return f'[programs.{name}]\nkind = "binary"\npath = "{path}"\n\n'


def _import(name: str, python: str, module: str, symbols: list[str]) -> str:
    return (
        f'[programs.{name}]\nkind = "import"\npython = "{python}"\n'
        f"module = {json.dumps(module)}\nsymbols = {json.dumps(symbols)}\n\n"
    )


def _spec_files(vq: Vq) -> list[Path]:
    queue = vq.root / "queue"
    return sorted(queue.glob("*.json")) if queue.exists() else []


def test_programs_probes_every_kind_and_doctor_warns(vq: Vq, world: World) -> None:
    plain = world.tmp / "plain"  # a directory that is no checkout
    plain.mkdir()
    _config(
        vq,
        _binary("tool", world.tool)
        + _binary("ghost", world.tmp / "no-such-tool")
        + _binary("shell", "sh")
        + _venv(world, "code", branch="main")
        + _venv(world, "nogit").replace(str(world.repo), str(plain))
        + _venv(world, "badpin", expected_git_sha="0000000")
        + _import("json", sys.executable, "json", ["dumps", "loads"])
        + _import("nosym", sys.executable, "json", ["no_such_symbol"])
        + _import("nopython", "/nonexistent/python3", "json", []),
    )
    listed = vq.json("programs")
    status: dict[str, dict[str, Any]] = {entry["name"]: entry for entry in listed}
    assert [entry["name"] for entry in listed] == sorted(status)
    available = {name for name, entry in status.items() if entry["available"]}
    assert available == {"tool", "shell", "code", "json"}
    assert status["tool"]["executable"] == str(world.tool)
    assert status["shell"]["executable"].endswith("/sh")
    assert "does not exist" in status["ghost"]["reason"]
    head = world.head()
    code = status["code"]
    assert (code["kind"], code["git_sha"], code["import_version"]) == ("venv", head, "1.2.3")
    assert (code["python"], code["git_dir"], code["branch"]) == (
        str(world.python),
        str(world.repo),
        "main",
    )
    assert "git SHA of" in status["nogit"]["reason"]
    assert "cannot be read" in status["nogit"]["reason"]
    assert status["nogit"]["git_sha"] is None
    assert "pin mismatch" in status["badpin"]["reason"]
    assert head in status["badpin"]["reason"] and "0000000" in status["badpin"]["reason"]
    assert "lacks no_such_symbol" in status["nosym"]["reason"]
    assert "/nonexistent/python3 does not exist" in status["nopython"]["reason"]

    table = vq.run("programs").stdout
    for name in status:
        assert name in table
    assert "unavailable" in table and "available" in table

    doctor = json.loads(vq.run("doctor", "--json", check=False).stdout)
    warned = [c["message"] for c in doctor["checks"] if c["name"] == "programs"]
    assert len(warned) == 5
    assert all(c["status"] == "warn" for c in doctor["checks"] if c["name"] == "programs")
    for name in ("ghost", "nogit", "badpin", "nosym", "nopython"):
        assert any(f"program {name!r}" in message for message in warned), name


def test_jobs_see_their_program_and_a_missing_binary_fails_at_dispatch(
    vq: Vq, world: World
) -> None:
    _config(
        vq,
        _binary("tool", world.tool)
        + _binary("ghost", world.tmp / "no-such-tool")
        + _venv(world, "code", branch="main")
        + _import("json", sys.executable, "json", ["dumps"]),
    )
    vq.start_daemon("--max-cpus", "8")
    tool = vq.submit(
        "--program",
        "tool",
        "--",
        "sh",
        "-c",
        'echo "$VQ_PROGRAM|$VQ_PROGRAM_EXE|${VQ_PROGRAM_PYTHON-unset}"; "$VQ_PROGRAM_EXE" hi',
    )
    code = vq.submit(
        "--program",
        "code",
        "--",
        "sh",
        "-c",
        'echo "$VQ_PROGRAM|$VQ_PROGRAM_BIN|$VQ_PROGRAM_PYTHON|$VQ_PROGRAM_GIT_DIR"; '
        'echo "$VQ_PROGRAM_BRANCH|$VQ_PROGRAM_GIT_SHA|${VQ_PROGRAM_EXE-unset}"; '
        '"$VQ_PROGRAM_BIN/python" -c "import mypkg; print(mypkg.__version__)"',
    )
    imp = vq.submit(
        "--program",
        "json",
        "--",
        "sh",
        "-c",
        'echo "$VQ_PROGRAM|$VQ_PROGRAM_PYTHON|${VQ_PROGRAM_GIT_SHA-unset}"',
    )
    ghost = vq.submit("--program", "ghost", "--", "true")  # availability is no submit gate
    for job in (tool, code, imp):
        assert vq.wait_state(job, "COMPLETED", "FAILED") == "COMPLETED", vq.spec(job)
    head = world.head()
    assert vq.run("logs", tool).stdout.splitlines() == [f"tool|{world.tool}|unset", "tool ran hi"]
    assert vq.run("logs", code).stdout.splitlines() == [
        f"code|{world.python.parent}|{world.python}|{world.repo}",
        f"main|{head}|unset",
        "1.2.3",
    ]
    assert vq.run("logs", imp).stdout.splitlines() == [f"json|{sys.executable}|unset"]

    spec = vq.spec(code)
    pin = spec["program_runtime_pin"]
    assert spec["program"] == "code"
    assert pin["program"] == "code" and pin["kind"] == "venv"
    assert (pin["git_sha"], pin["resolved_git_sha"], pin["enforce_git_sha"]) == (head, head, False)
    assert (pin["import_version"], pin["branch"]) == ("1.2.3", "main")
    assert (pin["python"], pin["git_dir"]) == (str(world.python), str(world.repo))
    tool_pin = vq.spec(tool)["program_runtime_pin"]
    assert (tool_pin["kind"], tool_pin["executable"]) == ("binary", str(world.tool))
    assert vq.spec(imp)["program_runtime_pin"]["python"] == sys.executable

    assert vq.wait_state(ghost, "COMPLETED", "FAILED") == "FAILED"
    failed = vq.spec(ghost)
    assert failed["failure_reason"].startswith("program 'ghost' is unavailable at dispatch: ")
    assert "does not exist" in failed["failure_reason"]
    assert failed["started_at"] is None and failed["pid"] is None


def test_unknown_program_is_refused_and_nothing_is_written(vq: Vq, world: World) -> None:
    _config(vq, _binary("tool", world.tool) + '[profile.tooled]\nprogram = "tool"\n')
    offline = vq.run("submit", "--program", "nope", "--", "true", check=False)
    assert offline.returncode == 3
    assert "unknown program 'nope'" in offline.stderr and "(tool)" in offline.stderr
    vq.start_daemon()
    online = vq.run("submit", "--program", "nope", "--json", "--", "true", check=False)
    assert online.returncode == 3 and "unknown program 'nope'" in online.stderr
    assert _spec_files(vq) == []
    jobs = vq.root / "jobs"
    assert not jobs.exists() or list(jobs.iterdir()) == []

    preset = vq.submit("--profile", "tooled", "--", "true")  # a profile may name a program
    assert vq.spec(preset)["program"] == "tool"
    _config(vq, _binary("tool", world.tool) + _binary("nope", world.tool))
    reload = json.loads(vq.run("daemon", "reload", "--json").stdout)
    assert "programs.nope" in reload["changed"]
    late = vq.submit("--program", "nope", "--", "sh", "-c", 'echo "$VQ_PROGRAM"')
    assert vq.wait_state(late, "COMPLETED", "FAILED") == "COMPLETED"
    assert vq.run("logs", late).stdout == "nope\n"


def test_pins_are_enforced_at_submit(vq: Vq, world: World) -> None:
    head = world.head()
    _config(
        vq,
        _venv(world, "good", expected_git_sha=head[:10].upper(), expected_import_version="1.2.3")
        + _venv(world, "badsha", expected_git_sha="0000000000")
        + _venv(world, "badversion", expected_import_version="9.9"),
    )
    vq.start_daemon()
    payload = json.loads(vq.run("submit", "--program", "good", "--json", "--", "true").stdout)
    pin = payload["program_runtime_pin"]
    assert (pin["git_sha"], pin["enforce_git_sha"], pin["expected_import_version"]) == (
        head,
        True,
        "1.2.3",
    )
    bad_sha = vq.run("submit", "--program", "badsha", "--", "true", check=False)
    assert bad_sha.returncode == 4
    assert f"git SHA is {head}, expected_git_sha is 0000000000" in bad_sha.stderr
    bad_version = vq.run("submit", "--program", "badversion", "--", "true", check=False)
    assert bad_version.returncode == 4
    assert "import version is 1.2.3, expected_import_version is 9.9" in bad_version.stderr
    assert [p.stem for p in _spec_files(vq)] == [payload["id"]]
    vq.wait_state(payload["id"], "COMPLETED")


def test_an_explicit_expected_sha_is_enforced_at_submit_and_dispatch(vq: Vq, world: World) -> None:
    first = world.head()
    _config(vq, _venv(world, "code") + _binary("tool", world.tool))
    vq.start_daemon()
    vq.run("daemon", "drain")
    wrong = vq.run(
        "submit", "--program", "code", "--expected-sha", "0000000", "--", "true", check=False
    )
    assert wrong.returncode == 4
    assert f"git SHA is {first}, --expected-sha is 0000000" in wrong.stderr
    binary = vq.run(
        "submit", "--program", "tool", "--expected-sha", first[:8], "--", "true", check=False
    )
    assert binary.returncode == 4 and "venv programs only" in binary.stderr
    alone = vq.run("submit", "--expected-sha", first[:8], "--", "true", check=False)
    assert alone.returncode == 4 and "--expected-sha needs --program" in alone.stderr
    assert _spec_files(vq) == []  # nothing refused was written

    pinned = vq.submit("--program", "code", "--expected-sha", first[:12].upper(), "--", "true")
    unpinned = vq.submit("--program", "code", "--", "true")
    pin = vq.spec(pinned)["program_runtime_pin"]
    assert (pin["git_sha"], pin["enforce_git_sha"]) == (first, True)
    assert vq.spec(unpinned)["program_runtime_pin"]["enforce_git_sha"] is False
    second = world.commit("moved")
    vq.run("daemon", "undrain")
    assert vq.wait_state(pinned, "COMPLETED", "FAILED") == "FAILED"
    reason = vq.spec(pinned)["failure_reason"]
    assert "runtime pin no longer holds" in reason and second in reason
    assert vq.wait_state(unpinned, "COMPLETED", "FAILED") == "COMPLETED"


def test_checkout_moving_before_dispatch(vq: Vq, world: World) -> None:
    first = world.head()
    _config(vq, _venv(world, "pinned", expected_git_sha=first) + _venv(world, "follow"))
    vq.start_daemon()
    vq.run("daemon", "drain")
    show = 'echo "$VQ_PROGRAM_GIT_SHA"'
    pinned = vq.submit("--program", "pinned", "--", "sh", "-c", show)
    follow = vq.submit("--program", "follow", "--", "sh", "-c", show)
    assert vq.spec(follow)["program_runtime_pin"]["git_sha"] == first
    second = world.commit("second")
    assert second != first
    vq.run("daemon", "undrain")

    assert vq.wait_state(pinned, "COMPLETED", "FAILED") == "FAILED"
    failed = vq.spec(pinned)
    assert "runtime pin no longer holds" in failed["failure_reason"]
    assert first in failed["failure_reason"] and second in failed["failure_reason"]
    assert failed["started_at"] is None
    assert failed["program_runtime_pin"]["resolved_git_sha"] is None

    assert vq.wait_state(follow, "COMPLETED", "FAILED") == "COMPLETED"
    pin = vq.spec(follow)["program_runtime_pin"]
    assert (pin["git_sha"], pin["resolved_git_sha"], pin["enforce_git_sha"]) == (
        first,
        second,
        False,
    )
    assert vq.run("logs", follow).stdout == f"{second}\n"


def test_a_venv_whose_sha_cannot_be_read_is_refused(vq: Vq, world: World) -> None:
    _config(vq, _venv(world, "code"))
    vq.start_daemon()
    vq.run("daemon", "drain")
    queued = vq.submit("--program", "code", "--", "true")
    shutil.rmtree(world.repo / ".git")  # the checkout loses its identity
    refused = vq.run("submit", "--program", "code", "--", "true", check=False)
    assert refused.returncode == 4 and "cannot be read" in refused.stderr
    vq.run("daemon", "undrain")
    assert vq.wait_state(queued, "COMPLETED", "FAILED") == "FAILED"
    reason = vq.spec(queued)["failure_reason"]
    assert reason.startswith("program 'code' is unavailable at dispatch: git SHA of")
    assert "cannot be read" in reason
    assert [p.stem for p in _spec_files(vq)] == [queued]
