"""A FIFO or odd bytes in every file vq reads: no reader blocks, nothing crashes, the
daemon keeps dispatching, and the planted file is left where it was (never followed,
never deleted).

One real daemon on a temp state root serves the whole module; each case plants one
hostile file, runs the read verbs and a submit as real CLI subprocesses (each with a
deadline: a blocked reader fails the case instead of hanging it), checks that a job
still runs to the end, and puts the original file back.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT_ENV, VQ_BIN, Vq, processes_with_env, wait_until
from vq._proc_stat import is_alive

#: Every CLI call must answer within this (a FIFO opened for reading would block forever).
DEADLINE = 30
#: Odd bytes: not UTF-8, a NUL, half a JSON document.
ODD = b"\xff\xfe\x00\x1b[2J not json {\n"
#: Valid UTF-8, deeper than the JSON parser's recursion limit.
DEEP = b"[" * 50_000


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Vq, dict[str, str]]]:
    """A daemon with one failed job (output, receipt, events), a keyed submit, a throttle
    and a console token, so every file below exists before a case replaces it."""
    base = tmp_path_factory.mktemp("hostile")
    root = base / "state"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("VQ_") and key != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(VQ_STATE_DIR=str(root), VQ_CONFIG_DIR=str(base / "config"), **ROOT_ENV)
    vq = Vq(root, env)
    (base / "config").mkdir()
    (base / "config" / "config.toml").write_text("[daemon]\nmax_jobs = 4\n")
    vq.start_daemon()
    job = vq.submit("--", "sh", "-c", "echo out; echo err >&2; exit 3")
    vq.wait_state(job, "FAILED")
    wait_until(lambda: (root / "jobs" / job / "_vq" / "resource-usage.json").exists())
    vq.run("submit", "--idempotency-key", "key-1", "--", "true")
    vq.run("daemon", "throttle", "--max-jobs", "4", "--for", "1h")
    vq.run("web", "token", "create", "reader", "--scope", "read")
    claim = next((root / "idempotency").glob("*.json"))
    names = {"job": job, "claim": claim.name}
    try:
        yield vq, names
    finally:
        vq.stop_daemon()
        for pid in processes_with_env(f"VQ_STATE_DIR={root}"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


#: (where, path template) of the files vq reads; {job} and {claim} are filled in.
FILES = [
    ("state", "queue/{job}.json"),
    ("state", "idempotency/{claim}"),
    ("state", "throttle.json"),
    ("state", "daemon_capacity.json"),
    ("state", "client.log"),
    ("state", "rpc-audit.jsonl"),
    ("state", "jobs/{job}/stdout.log"),
    ("state", "jobs/{job}/stderr.log"),
    ("state", "jobs/{job}/_vq/events.jsonl"),
    ("state", "jobs/{job}/_vq/exit-code"),
    ("state", "jobs/{job}/_vq/resource-usage.json"),
    ("state", "jobs/{job}/_vq/samples.jsonl"),
    ("state", "jobs/{job}/_vq/collector.pid"),
    ("state", "jobs/{job}/_vq/environment"),
    ("config", "config.toml"),
    ("config", "web-tokens.json"),
]
#: A FIFO and odd bytes run in the bounded suite; the other shapes with `make soak`.
KINDS = [
    "fifo",
    "odd-bytes",
    pytest.param("deep-json", marks=pytest.mark.slow),
    pytest.param("directory", marks=pytest.mark.slow),
]


def _plant(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(ODD if kind == "odd-bytes" else DEEP)


def _run(vq: Vq, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VQ_BIN, *args],
        env=vq.env,
        capture_output=True,
        text=True,
        errors="replace",  # `vq logs` prints the planted bytes as they are
        timeout=DEADLINE,
    )


def _clean(result: subprocess.CompletedProcess[str]) -> None:
    """Success, or one `vq: error:` line: never a traceback or an internal error."""
    where = (result.args, result.returncode, result.stderr[-600:])
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, where
    if result.args[1] == "doctor" and result.returncode == 1 and not result.stderr:
        json.loads(result.stdout)  # doctor's own "a check failed": the report is complete
        return
    assert result.returncode == 0 or result.stderr.startswith("vq: error: "), where


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("where", "template"), FILES, ids=[t for _, t in FILES])
def test_a_hostile_file_blocks_nothing_and_is_left_in_place(
    world: tuple[Vq, dict[str, str]], where: str, template: str, kind: str
) -> None:
    vq, names = world
    base = vq.root if where == "state" else Path(vq.env["VQ_CONFIG_DIR"])
    path = base / template.format(**names)
    saved = path.with_name(path.name + ".saved")
    config = template == "config.toml"
    logged = (vq.root / "daemon.log").stat().st_size
    pid = vq.daemon_pid()
    os.rename(path, saved)
    try:
        _plant(path, kind)
        job = names["job"]
        for args in (
            ("list",),
            ("list", "--json"),
            ("status", job),
            ("status", job, "--json"),
            ("logs", job),
            ("logs", job, "--stderr"),
            ("events", job),
            ("daemon", "admin-status", "--json"),
            ("web", "token", "list"),
            ("doctor", "--json"),
        ):
            _clean(_run(vq, *args))
        if template.startswith("idempotency/"):  # the claim of key-1 is the planted file
            _clean(_run(vq, "submit", "--idempotency-key", "key-1", "--", "true"))
        submitted = _run(vq, "submit", "--", "true")
        _clean(submitted)
        if config:
            # Every verb refuses an unreadable config in one line (exit 9); the daemon
            # notices it, names it in its log, holds dispatch and lives on.
            assert submitted.returncode in (0, 9), submitted.stderr  # 0: held, not run
            wait_until(lambda: "config.toml" in _log_since(vq, logged), timeout=DEADLINE)
            assert pid is not None and is_alive(pid)
        else:
            assert _run(vq, "daemon", "ping").returncode == 0  # the daemon lives...
            vq.wait_state(submitted.stdout.strip(), "COMPLETED", timeout=DEADLINE)  # and runs
        planted = os.lstat(path).st_mode  # never deleted, never replaced
        assert stat.S_ISFIFO(planted) if kind == "fifo" else True
        assert stat.S_ISDIR(planted) if kind == "directory" else True
    finally:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif os.path.lexists(path):
            path.unlink()
        os.rename(saved, path)
    if config:  # fixed: dispatch resumes, and a job accepted meanwhile runs
        after = vq.submit("--", "true")
        vq.wait_state(after, "COMPLETED", timeout=DEADLINE)
        if submitted.returncode == 0:
            vq.wait_state(submitted.stdout.strip(), "COMPLETED", timeout=DEADLINE)


def _log_since(vq: Vq, offset: int) -> str:
    with open(vq.root / "daemon.log", "rb") as handle:
        handle.seek(offset)
        return handle.read().decode(errors="replace")
