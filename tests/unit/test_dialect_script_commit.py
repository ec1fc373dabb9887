"""A lane job whose runtime pin from the lane's registry is enforced: the batch script
checks on the node that the checkout is still at the pinned commit (real dash, real git,
real GNU time) and exits 126 before the command when it moved; the refusal of values
that cannot be rendered; and which pins ask for the check."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vq.dialects import SLURM, UnsafeSchedulerValue
from vq.domain.spec import JobSpec, ProgramRuntimePin
from vq.executors.scheduler.outcome import enforced_commit

from .dialect_requests import request
from .test_dialect_script_run import Run


@pytest.fixture
def root() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="vq-dialect-commit-") as name:
        yield Path(name)


def _checkout(path: Path) -> str:
    path.mkdir()
    git = ["git", "-C", str(path), "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    done = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    return done.stdout.strip()


def _run(root: Path, checkout: Path, commit: str) -> Run:
    return Run(
        root, SLURM, runtime_commit=(str(checkout), commit), command=("touch", str(root / "ran"))
    )


def test_the_pinned_commit_runs(root: Path) -> None:
    sha = _checkout(root / "src")
    for name, pinned in (("full", sha), ("prefix", sha[:12].upper())):
        (root / name).mkdir()
        job = _run(root / name, root / "src", pinned)
        assert job.run().returncode == 0, job.stderr()
        assert (root / name / "ran").exists()


def test_a_checkout_that_moved_exits_126_before_the_command(root: Path) -> None:
    sha = _checkout(root / "src")
    moved = "0" * 40 if not sha.startswith("0") else "1" * 40
    job = _run(root, root / "src", moved)
    done = job.run()
    assert done.returncode == 126
    assert f"runtime pin no longer holds: {root / 'src'} is at {sha}, not {moved}" in job.stderr()
    assert "command not started" in job.stderr()
    assert job.marker("exit-code").strip() == "126" and not (root / "ran").exists()


def test_a_checkout_that_is_gone_exits_126(root: Path) -> None:
    job = _run(root, root / "gone", "a" * 40)
    assert job.run().returncode == 126
    assert "is at unreadable" in job.stderr() and not (root / "ran").exists()


@pytest.mark.parametrize(
    ("commit", "git_dir"),
    [("abc", "/opt/src"), ("xyz1234", "/opt/src"), ("a" * 65, "/opt/src"), ("a" * 40, "src")],
)
def test_values_that_cannot_be_rendered_are_refused(commit: str, git_dir: str) -> None:
    with pytest.raises(UnsafeSchedulerValue):
        SLURM.render_script(replace(request(), runtime_commit=(git_dir, commit)))


def _spec(**pin: object) -> JobSpec:
    return JobSpec(
        id="a1b2c3d4e5f6",
        submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
        command=["true"],
        cwd="/ws",
        cpus=1,
        program="fit",
        scheduler_target="cluster",
        program_runtime_pin=ProgramRuntimePin(program="fit", **pin),  # type: ignore[arg-type]
    )


def test_only_an_enforced_registry_pin_is_checked_on_the_node() -> None:
    registry = {"target_source": "target_registry", "git_dir": "/opt/src", "git_sha": "ab" * 20}
    assert enforced_commit(_spec(**registry, enforce_git_sha=True)) == ("/opt/src", "ab" * 20)
    assert enforced_commit(_spec(**registry)) is None  # provenance only
    record = {**registry, "target_source": "deployment_record"}
    assert enforced_commit(_spec(**record, enforce_git_sha=True)) is None  # the digest rules
