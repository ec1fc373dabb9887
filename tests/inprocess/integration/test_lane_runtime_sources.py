"""The lane-side sources of a managed runtime, end to end through real ``sh``, ``git``,
``tar`` and Python, with the lane's login host played by the local runner: the lane's
program registry resolved at submit (:mod:`vq.services.lane_runtime_probe`), and ``vq
runtime deploy --lane`` shipping, verifying and recording a generation
(:mod:`vq.services.runtime_deployments`), which later submits pin and bind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vq.config.hosts import HostSettings, LaneSettings
from vq.domain.admission import Caps
from vq.errors import InvalidInput
from vq.paths import StatePaths
from vq.protocol.messages import SubmitParams
from vq.services.context import ServiceContext
from vq.services.runtime_deployments import read_record
from vq.services.runtime_generations import generation_problem
from vq.services.submit import submit
from vq.transport.local import LocalRunner

PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def _checkout(path: Path) -> str:
    """A git checkout with one commit; its SHA."""
    path.mkdir(parents=True)
    git = ["git", "-C", str(path), "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "VERSION").write_text("2.4.1\n")
    subprocess.run([*git, "add", "VERSION"], check=True)
    subprocess.run([*git, "commit", "-qm", "runtime"], check=True)
    done = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    return done.stdout.strip()


def _lane(tmp_path: Path, **programs: dict[str, str]) -> LaneSettings:
    lane = HostSettings.model_validate(
        {
            "ssh": "login.example",
            "scheduler_dialect": "slurm",
            "scratch_root": str(tmp_path / "scratch"),
            "scheduler_programs": programs,
        }
    ).lane("cluster")
    assert lane is not None
    return lane


def _ctx(tmp_path: Path, lane: LaneSettings) -> ServiceContext:
    ctx = ServiceContext(StatePaths(tmp_path / "state"), Caps())
    ctx.lanes = {"cluster": lane}
    ctx.lane_runner = lambda _lane: LocalRunner()
    return ctx


def _params(**fields: object) -> SubmitParams:
    return SubmitParams.model_validate(
        {"command": ["true"], "scheduler_target": "cluster", "program": "fit", **fields}
    )


def test_the_lane_registry_is_resolved_at_submit_to_its_commit_and_version(
    tmp_path: Path,
) -> None:
    sha = _checkout(tmp_path / "fit-src")
    entry = {"python": PYTHON, "git_dir": str(tmp_path / "fit-src"), "import_check": "json"}
    ctx = _ctx(tmp_path, _lane(tmp_path, fit=entry))
    spec = submit(ctx, _params()).spec
    pin = spec.program_runtime_pin
    assert pin is not None and pin.target_source == "target_registry"
    assert (pin.scheduler_host, pin.executable, pin.git_sha) == ("cluster", PYTHON, sha)
    import json

    assert pin.version == json.__version__ and spec.runtime_generation is None
    assert ctx.store.read(spec.id).program_runtime_pin == pin  # durable as answered


def test_an_unresolvable_registry_entry_refuses_and_writes_nothing(tmp_path: Path) -> None:
    entry = {"python": PYTHON, "git_dir": str(tmp_path / "no-checkout")}
    ctx = _ctx(tmp_path, _lane(tmp_path, fit=entry))
    with pytest.raises(InvalidInput, match=r"its checkout .*no-checkout is not a directory"):
        submit(ctx, _params())
    assert ctx.store.list_ids() == []
    (tmp_path / "plain").mkdir()  # a directory, but no checkout
    entry = {"python": PYTHON, "git_dir": str(tmp_path / "plain")}
    with pytest.raises(InvalidInput, match=r"the commit of .*plain cannot be read there"):
        submit(_ctx(tmp_path, _lane(tmp_path, fit=entry)), _params())
    assert ctx.store.list_ids() == []


def _deploy(tmp_path: Path, source: Path, root: Path, lane: LaneSettings) -> dict[str, object]:
    from vq.services.runtime_deployments import deploy_to_lane

    return deploy_to_lane(
        source,
        str(root),
        lane,
        "fit",
        runner=LocalRunner(),
        local=LocalRunner(),
        paths=StatePaths(tmp_path / "state"),
        now="2026-12-04T01:00:00+00:00",
        version="2.4.1",
    )


def test_a_deployment_to_the_lane_is_shipped_verified_recorded_and_then_used(
    tmp_path: Path,
) -> None:
    sha = _checkout(tmp_path / "runtime")
    lane = _lane(tmp_path)
    root = tmp_path / "cluster-rt"
    done = _deploy(tmp_path, tmp_path / "runtime", root, lane)
    digest = str(done["digest"])
    assert generation_problem(root, digest) is None  # it verifies where it landed
    assert (root / "current").resolve() == (root / "generations" / digest).resolve()
    assert not list((root / "generations").glob(".incoming.*"))
    record = read_record(StatePaths(tmp_path / "state"), "cluster", "fit")
    assert record is not None and (record.digest, record.root) == (digest, str(root))
    assert (record.version, record.git_sha) == ("2.4.1", sha)
    # a venv program on the driver whose checkout does not exist: never probed for the lane
    ctx = _ctx(tmp_path, lane)
    ctx.programs = {"fit": _venv()}
    spec = submit(ctx, _params()).spec
    pin = spec.program_runtime_pin
    assert pin is not None and pin.target_source == "deployment_record"
    assert (pin.artifact_identity, pin.version, pin.git_sha) == (digest, "2.4.1", sha)
    assert spec.runtime_generation is not None and spec.runtime_generation.digest == digest


def test_a_deployment_that_does_not_verify_there_records_nothing(tmp_path: Path) -> None:
    _checkout(tmp_path / "runtime")
    lane = _lane(tmp_path)
    root = tmp_path / "cluster-rt"
    first = _deploy(tmp_path, tmp_path / "runtime", root, lane)
    recorded = StatePaths(tmp_path / "state").runtime_deployment("cluster", "fit").read_bytes()
    (tmp_path / "runtime" / "VERSION").write_text("2.4.2\n")
    second = tmp_path / "runtime-2"
    subprocess.run(["cp", "-a", str(tmp_path / "runtime"), str(second)], check=True)
    # what is on the cluster under the new digest is altered: deploy must not trust it
    digest = _local_digest(second)
    planted = root / "generations" / digest
    subprocess.run(["cp", "-a", str(root / "generations" / str(first["digest"])), str(planted)])
    with pytest.raises(InvalidInput) as caught:
        _deploy(tmp_path, second, root, lane)
    assert "does not verify there" in caught.value.message
    assert "earlier deployment stays in force" in (caught.value.hint or "")
    assert (
        StatePaths(tmp_path / "state").runtime_deployment("cluster", "fit").read_bytes() == recorded
    )
    assert (root / "current").resolve().name == first["digest"]


def test_a_root_that_cannot_be_written_is_refused_before_anything_is_recorded(
    tmp_path: Path,
) -> None:
    _checkout(tmp_path / "runtime")
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the root's directory should be")
    with pytest.raises(InvalidInput, match="could not be put in place on lane cluster"):
        _deploy(tmp_path, tmp_path / "runtime", blocked, _lane(tmp_path))
    assert read_record(StatePaths(tmp_path / "state"), "cluster", "fit") is None


def _venv() -> object:
    from vq.config.programs import VenvProgram

    return VenvProgram(kind="venv", python=PYTHON, git_dir="/nonexistent/fit-checkout")


def _local_digest(source: Path) -> str:
    from vq.services.runtime_generations import tree_digest

    return tree_digest(source, "runtime")[0]


def test_a_deployment_records_the_commit_of_its_own_checkout_only(tmp_path: Path) -> None:
    from vq.services.runtime_deployments import source_git_sha

    sha = _checkout(tmp_path / "repo")
    assert source_git_sha(tmp_path / "repo", LocalRunner()) == sha
    (tmp_path / "repo" / "runtime").mkdir()  # inside the repository, not its top
    assert source_git_sha(tmp_path / "repo" / "runtime", LocalRunner()) is None
    (tmp_path / "plain").mkdir()
    assert source_git_sha(tmp_path / "plain", LocalRunner()) is None
