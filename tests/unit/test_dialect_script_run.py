"""The batch script body run by real dash (and bash) under the real GNU time.

The script runs in a temporary workspace as a scheduler would run it: the script's
process group gets the signals. GNU time must be at /usr/bin/time
(``scripts/install-test-deps.sh`` installs the ``time`` package).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vq.dialects import SLURM, TORQUE, ProgramHooks, SchedulerDialect
from vq.executors._collector_record import _record

from .dialect_requests import J, request

DASH = shutil.which("dash") or "/bin/sh"
SHELLS = [DASH, *([b] if (b := shutil.which("bash")) else [])]
GNU_TIME = "/usr/bin/time"

if not os.access(GNU_TIME, os.X_OK):  # pragma: no cover - the test deps install it
    raise RuntimeError("GNU time is missing: run scripts/install-test-deps.sh")


# --------------------------------------------------------------------------------------
# running the body
# --------------------------------------------------------------------------------------
class Run:
    """One rendered script in a fresh temporary workspace."""

    def __init__(
        self, root: Path, dialect: SchedulerDialect, *, shell: str = DASH, **changes: object
    ) -> None:
        self.root = root
        self.shell = shell
        self.ws = root / "ws"
        self.ws.mkdir()
        self.tmp = root / "tmp"
        self.tmp.mkdir()
        self.request = replace(
            request(workspace=str(self.ws), command=("true",), mem_mb=None, program=None),
            **changes,  # type: ignore[arg-type]
        )
        self.script = root / "job.sh"
        self.script.write_text(dialect.render_script(self.request), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VQ_", "SLURM", "PBS"))}
        env.update(PATH="/usr/bin:/bin", TMPDIR=str(self.tmp), SLURM_JOB_ID="4242")
        env.update(PBS_JOBID="11.torque-server", VQ_PROGRAM_EXE="/driver/bin/orca")
        env.update(VQ_WORKDIR="/driver/workdirs/x", VQ_MEM_MB="999")
        self.env = env

    def run(self) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [DASH, str(self.script)], env=self.env, capture_output=True, timeout=60
        )

    def start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [self.shell, str(self.script)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def marker(self, name: str) -> str:
        return (self.ws / "_vq" / name).read_text()

    def receipt(self) -> dict[str, object]:
        data: dict[str, object] = json.loads(self.marker("resource-usage.json"))
        return data

    def stdout(self) -> bytes:
        return (self.ws / "stdout.log").read_bytes()

    def stderr(self) -> str:
        return (self.ws / "stderr.log").read_text()


@pytest.fixture
def root() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="vq-dialect-") as name:
        yield Path(name)


def _wait_for(path: Path, deadline_s: float = 15.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {deadline_s} s")
        time.sleep(0.02)


PRINT_ARGV = 'if [ $# -gt 0 ]; then printf "%s\\000" "$@"; fi; exit "$0"'
HOSTILE_TEXT = [
    "",
    " ",
    "'",
    '"',
    "'\"'",
    "$HOME",
    "${PATH}",
    "`id`",
    "$(id)",
    "\\",
    "\\n",
    "\n",
    "a\nb\n",
    "-n",
    "--",
    "-o",
    "*",
    "~",
    "é",
    "日本語",
    "\t",
    "%s%d",
    "$'x'",
    "!",
    "#",
    "}",
    ";",
    "&",
    "|",
    "\r",
    "\u2028",
    "\U0001f600",
]
ARGS = st.lists(
    st.one_of(
        st.sampled_from(HOSTILE_TEXT),
        st.text(
            alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            max_size=16,
        ),
    ),
    max_size=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=ARGS, code=st.integers(0, 255))
def test_any_argv_arrives_byte_exact_and_the_marker_holds_its_rc(
    args: list[str], code: int
) -> None:
    with tempfile.TemporaryDirectory(prefix="vq-dialect-") as name:
        run = Run(Path(name), SLURM, command=("/bin/sh", "-c", PRINT_ARGV, str(code), *args))
        done = run.run()
        assert done.returncode == code, run.stderr()
        assert run.stdout() == b"".join(arg.encode() + b"\0" for arg in args)
        assert run.marker("exit-code") == f"{code}\n"
        assert run.receipt()["exit_code"] == code


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("dialect", [SLURM, TORQUE])
def test_markers_receipt_and_environment(root: Path, dialect: SchedulerDialect, shell: str) -> None:
    payload = (
        "cat _vq/scheduler-job-id; [ -e _vq/exit-code ] && echo early || echo no-marker; "
        'echo "$VQ_JOB_ID $VQ_CPUS ${VQ_MEM_MB-unset} ${VQ_PROGRAM-unset} $VQ_JOB_NAME"; '
        'echo "${VQ_PROGRAM_EXE-unset} ${VQ_WORKDIR-unset}"; exit 7'
    )
    run = Run(
        root,
        dialect,
        shell=shell,
        command=("/bin/sh", "-c", payload),
        environment={"VQ_JOB_NAME": "dimer"},
    )
    assert run.run().returncode == 7
    job_id = "4242" if dialect is SLURM else "11.torque-server"
    assert run.stdout().decode().splitlines() == [
        job_id,
        "no-marker",
        f"{J} 4 unset unset dimer",
        "unset unset",
    ]
    assert run.marker("scheduler-job-id") == f"{job_id}\n"
    assert run.marker("exit-code") == "7\n"
    receipt = run.receipt()
    assert receipt["status"] == "ok" and receipt["source"] == "gnu-time"
    assert receipt["exit_code"] == 7 and receipt["signal"] is None
    assert receipt["command_status"] == "exited"
    assert isinstance(receipt["max_rss_kb"], int) and receipt["max_rss_kb"] > 0
    assert isinstance(receipt["wall_seconds"], int | float)
    assert not (run.ws / "_vq" / "resource-usage.time").exists()
    assert sorted(os.listdir(run.ws / "_vq")) == [
        "exit-code",
        "resource-usage.json",
        "scheduler-job-id",
    ]


def test_torque_falls_back_to_slurms_job_id_under_the_wrappers(root: Path) -> None:
    """slurm-wlm-torque runs the script under Slurm, which sets no PBS_JOBID."""
    run = Run(root, TORQUE)
    del run.env["PBS_JOBID"]
    assert run.run().returncode == 0
    assert run.marker("scheduler-job-id") == "4242\n"


def test_receipt_has_the_local_collectors_field_names(root: Path) -> None:
    local_usage = root / "local.json"
    _record(
        {"usage_path": str(local_usage), "exit_code_path": str(root / "local-exit"), "job_id": J},
        time.time(),
        time.monotonic(),
        0,
        None,
    )
    run = Run(root, SLURM, mem_mb=64, program="orca")
    assert run.run().returncode == 0
    local = json.loads(local_usage.read_text())
    ours = run.receipt()
    assert set(ours) == set(local)
    assert ours["schema"] == local["schema"]
    assert isinstance(ours["semantics"], dict) and set(ours["semantics"]) == set(local["semantics"])


def test_payload_killed_by_a_signal(root: Path) -> None:
    run = Run(root, SLURM, command=("/bin/sh", "-c", "kill -KILL $$"))
    assert run.run().returncode == 137
    assert run.marker("exit-code") == "137\n"
    receipt = run.receipt()
    assert (receipt["exit_code"], receipt["signal"], receipt["command_status"]) == (
        137,
        9,
        "signaled",
    )


def test_command_not_found_and_not_executable(root: Path) -> None:
    (root / "a").mkdir()
    missing = Run(root / "a", SLURM, command=("/no/such",))
    assert missing.run().returncode == 127
    assert missing.marker("exit-code") == "127\n"
    plain = root / "plain.txt"
    plain.write_text("not a program\n")
    (root / "b").mkdir()
    denied = Run(root / "b", SLURM, command=(str(plain),))
    assert denied.run().returncode == 126
    assert denied.marker("exit-code") == "126\n"


def test_a_command_starting_with_a_dash_is_not_an_option_of_gnu_time(root: Path) -> None:
    run = Run(root, SLURM, command=("-o", str(root / "hijacked"), "true"))
    assert run.run().returncode == 127  # "-o" is the program, and there is none
    assert run.marker("exit-code") == "127\n"
    assert not (root / "hijacked").exists()


@pytest.mark.parametrize("kind", ["missing", "incompatible"])
def test_unusable_gnu_time_exits_125_before_the_payload(root: Path, kind: str) -> None:
    fake = root / "fake-time"
    fake.write_text("#!/bin/sh\nexit 0\n")  # runs nothing, writes no receipt
    fake.chmod(0o755)
    gnu_time = "/nonexistent/time" if kind == "missing" else str(fake)
    run = Run(
        root,
        SLURM,
        gnu_time_command=gnu_time,
        prologue=("touch site-prologue-ran",),
        command=("touch", "payload-ran"),
    )
    assert run.run().returncode == 125
    assert run.marker("exit-code") == "125\n"
    assert not (run.ws / "payload-ran").exists() and not (run.ws / "site-prologue-ran").exists()
    assert "unusable" in run.stderr() and gnu_time in run.stderr()
    receipt = run.receipt()
    assert (receipt["status"], receipt["command_status"], receipt["exit_code"]) == (
        "error",
        "not_run",
        125,
    )


def test_unusable_receipt_formatter_exits_125(root: Path) -> None:
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for tool in ("mkdir", "mv", "rm", "date", "cat", "touch"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    run = Run(root, SLURM, command=("touch", "payload-ran"))
    run.env["PATH"] = str(bin_dir)  # no awk
    assert run.run().returncode == 125
    assert run.marker("exit-code") == "125\n"
    assert not (run.ws / "payload-ran").exists()


def test_hooks_run_in_order_around_the_wrapped_command(root: Path) -> None:
    run = Run(
        root,
        TORQUE,
        prologue=("echo site-prologue", "export FROM_SITE=yes"),
        epilogue=("echo site-epilogue",),
        hooks=ProgramHooks(
            prologue=("echo program-prologue",),
            epilogue=("echo program-epilogue",),
            command_wrapper=("env", "WRAPPED=yes"),
        ),
        command=("/bin/sh", "-c", 'echo "payload $WRAPPED $FROM_SITE"; exit 3'),
    )
    assert run.run().returncode == 3
    assert run.stdout().decode().splitlines() == [
        "site-prologue",
        "program-prologue",
        "payload yes yes",
        "program-epilogue",
        "site-epilogue",
    ]
    assert run.marker("exit-code") == "3\n"


def test_node_scratch_seeds_runs_copies_back_and_cleans_up(root: Path) -> None:
    payload = "pwd; cat in.txt .hidden; echo result > out.txt; mkdir -p sub; echo x > sub/y"
    run = Run(root, SLURM, node_scratch_dir="$TMPDIR/nodes", command=("/bin/sh", "-c", payload))
    (run.ws / "in.txt").write_text("input\n")
    (run.ws / ".hidden").write_text("dot\n")
    (run.ws / "stdout.log").write_text("earlier attempt\n")
    assert run.run().returncode == 0
    lines = run.stdout().decode().splitlines()
    assert lines[0] == "earlier attempt"  # the live log was never replaced by a copy
    assert lines[1].startswith(str(run.tmp / "nodes" / f"vq-{J}."))
    assert lines[2:] == ["input", "dot"]
    assert (run.ws / "out.txt").read_text() == "result\n"
    assert (run.ws / "sub" / "y").read_text() == "x\n"
    assert run.marker("exit-code") == "0\n"
    assert os.listdir(run.tmp / "nodes") == []  # scratch removed after the marker
    assert sorted(os.listdir(run.ws / "_vq")) == [
        "exit-code",
        "resource-usage.json",
        "scheduler-job-id",
    ]


def test_node_scratch_that_cannot_be_created_exits_125(root: Path) -> None:
    run = Run(root, SLURM, node_scratch_dir="/proc/vq-cannot-exist", command=("touch", "ran"))
    assert run.run().returncode == 125
    assert run.marker("exit-code") == "125\n"
    assert "node scratch" in run.stderr()


@pytest.mark.parametrize(
    ("shell", "scratch"), [(DASH, None), (DASH, "$TMPDIR/nodes"), (SHELLS[-1], "$TMPDIR/nodes")]
)
def test_term_to_the_job_writes_143_and_skips_copy_back(
    root: Path, shell: str, scratch: str | None
) -> None:
    payload = 'echo partial > out.txt; touch "$FLAG_PATH"; exec sleep 60'
    flag = root / "started"
    run = Run(
        root, SLURM, shell=shell, node_scratch_dir=scratch, command=("/bin/sh", "-c", payload)
    )
    run.env["FLAG_PATH"] = str(flag)
    process = run.start()
    try:
        _wait_for(flag)
        os.killpg(process.pid, signal.SIGTERM)  # what scancel and qdel do
        assert process.wait(timeout=20) == 143
    finally:
        if process.poll() is None:  # pragma: no cover - only when the test fails
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert run.marker("exit-code") == "143\n"
    if scratch is None:
        assert (run.ws / "out.txt").read_text() == "partial\n"
    else:
        assert not (run.ws / "out.txt").exists()  # the trap bypasses copy-back...
        (left,) = os.listdir(run.tmp / "nodes")  # ...and scratch cleanup
        assert (run.tmp / "nodes" / left / "out.txt").exists()


def test_term_to_the_shell_alone_is_passed_on_and_written_at_once(root: Path) -> None:
    """Slurm's proctrack/cgroup sends the cancel's SIGTERM to the batch shell only (its
    direct child): the script must not wait for the command to notice, and the command
    must hear of it."""
    payload = (
        'trap "echo got TERM > \\"$FLAG_PATH.term\\"; exit 0" TERM; '
        'touch "$FLAG_PATH"; sleep 60 & wait'
    )
    flag = root / "started"
    run = Run(root, SLURM, command=("/bin/sh", "-c", payload))
    run.env["FLAG_PATH"] = str(flag)
    process = run.start()
    try:
        _wait_for(flag)
        os.kill(process.pid, signal.SIGTERM)
        assert process.wait(timeout=20) == 143
        assert run.marker("exit-code") == "143\n"
        _wait_for(Path(f"{flag}.term"))  # the command's own TERM trap ran
    finally:
        with contextlib.suppress(ProcessLookupError):  # the payload's sleep, if still there
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_hup_and_int_write_128_plus_the_signal(root: Path, sent: int, code: int) -> None:
    payload = 'touch "$FLAG_PATH"; exec sleep 60'
    flag = root / "started"
    run = Run(root, SLURM, command=("/bin/sh", "-c", payload))
    run.env["FLAG_PATH"] = str(flag)
    process = run.start()
    try:
        _wait_for(flag)
        os.kill(process.pid, sent)  # to the batch shell, as Slurm's proctrack/cgroup does
        assert process.wait(timeout=20) == code
        assert run.marker("exit-code") == f"{code}\n"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_a_failing_copy_back_is_suppressed_and_the_marker_keeps_the_commands_code(
    root: Path,
) -> None:
    # the workspace's file `sub` becomes a directory in scratch: cp cannot put it back
    payload = "rm sub && mkdir sub && echo x > sub/y && echo done > out.txt; exit 3"
    run = Run(root, SLURM, node_scratch_dir="$TMPDIR/nodes", command=("/bin/sh", "-c", payload))
    (run.ws / "sub").write_text("a file\n")
    assert run.run().returncode == 3
    assert (run.ws / "sub").read_text() == "a file\n"  # that copy failed...
    assert (run.ws / "out.txt").read_text() == "done\n"  # ...the others still came back
    assert run.marker("exit-code") == "3\n"
    assert os.listdir(run.tmp / "nodes") == []  # and scratch was removed after the marker
