"""A scheduler job bound to a runtime generation: the batch script verifies it on the
node (real dash, real GNU time, a generation made by the real deploy) and exits 126 with
the reason, the command never started, when it does not verify."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vq.dialects import SLURM
from vq.services.runtime_generations import deploy

from .test_dialect_script_run import Run


@pytest.fixture
def root() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="vq-dialect-gen-") as name:
        yield Path(name)


def generation(root: Path) -> tuple[Path, str]:
    source = root / "src"
    (source / "bin").mkdir(parents=True)
    (source / "bin" / "tool").write_text("#!/bin/sh\necho generation ran\n")
    (source / "bin" / "tool").chmod(0o755)
    (source / "share").mkdir()
    (source / "share" / "data.txt").write_text("data\n")
    deployed = root / "deploy"
    digest = str(deploy(source, deployed, datetime.now(UTC).isoformat())["digest"])
    return deployed, digest


def bound_run(root: Path, deployed: Path, digest: str) -> Run:
    marker = root / "ran"
    return Run(
        root,
        SLURM,
        runtime_generation=(str(deployed), digest),
        command=("sh", "-c", f'"$VQ_RUNTIME_PAYLOAD"/bin/tool; touch {marker}'),
    )


def test_a_verified_generation_runs_with_its_payload_exported(root: Path) -> None:
    deployed, digest = generation(root)
    job = bound_run(root, deployed, digest)
    done = job.run()
    assert done.returncode == 0, done.stderr
    assert job.stdout() == b"generation ran\n"
    assert job.marker("exit-code").strip() == "0"


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("group_writable", "its payload is group or world writable"),
        ("altered", "its payload was altered"),
        ("extra_file", "its payload was altered"),
        ("symlink", "it holds a symbolic link"),
        ("missing", "it is not deployed"),
    ],
)
def test_a_generation_that_does_not_verify_exits_126_without_running(
    root: Path, damage: str, reason: str
) -> None:
    deployed, digest = generation(root)
    payload = deployed / "generations" / digest / "payload"
    tool = payload / "bin" / "tool"
    if damage == "group_writable":
        tool.chmod(0o775)
    elif damage == "altered":
        tool.chmod(0o755)
        tool.write_text("#!/bin/sh\necho tampered\n")
    elif damage == "extra_file":
        payload.chmod(0o755)
        (payload / "extra").write_text("x")
    elif damage == "symlink":
        payload.chmod(0o755)
        (payload / "link").symlink_to("/etc/passwd")
    else:
        digest = "0" * 64
    job = bound_run(root, deployed, digest)
    done = job.run()
    assert done.returncode == 126
    assert reason in job.stderr() and "command not started" in job.stderr()
    assert job.marker("exit-code").strip() == "126"
    assert reason in str(job.receipt().get("message", "")) or job.receipt()["status"] == "error"
    assert not (root / "ran").exists()
    assert job.stdout() == b""
