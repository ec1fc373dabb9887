"""A lane job naming a managed-runtime (``venv``) program is pinned to its target, never
to the driver's checkout (§3.4): with no target identity the submit is refused before any
spec exists; bound to a runtime generation (explicitly, by an immutable wrapper in argv,
or by the lane's last verified deployment record) it records the lane, the digest, and
the record's version and commit; an unreachable lane registry refuses. The real CLI
(in-process), no daemon (the submit writes the spec itself)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Vq

DIGEST = "ab" * 32
#: The driver's checkout does not exist: a submit that probed it would report that.
CONFIG = """[hosts.cluster]
ssh = "login.example"
scheduler_dialect = "slurm"
scratch_root = "/scratch/me"

[programs.fit]
kind = "venv"
python = "/usr/bin/python3"
git_dir = "/nonexistent/fit-checkout"
"""


def _configure(vq: Vq) -> None:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(CONFIG)


def _queue(vq: Vq) -> list[str]:
    queue = vq.root / "queue"
    return sorted(p.name for p in queue.glob("*.json")) if queue.is_dir() else []


def test_an_unresolvable_target_runtime_refuses_the_submit_and_writes_nothing(vq: Vq) -> None:
    _configure(vq)
    proc = vq.run("submit", "cluster", "--program", "fit", "--", "true", check=False)
    assert proc.returncode == 4, proc
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("vq: error: program 'fit' is a managed runtime"), lines
    assert "scheduler lane 'cluster' cannot be resolved" in lines[0]
    hint = [line for line in lines if line.startswith("hint:")]
    assert hint and "--runtime-artifact" in hint[0] and "scheduler_programs.fit" in hint[0]
    assert "--lane cluster --program fit" in hint[0]
    assert "Traceback" not in proc.stderr and "nonexistent" not in proc.stderr
    assert _queue(vq) == []


def test_expected_sha_cannot_be_checked_against_a_runtime_without_a_commit(vq: Vq) -> None:
    _configure(vq)
    bound = ["--runtime-root", "/opt/fit-runtime", "--runtime-artifact", DIGEST]
    argv = ["submit", "cluster", "--program", "fit", *bound, "--expected-sha", "a" * 40]
    proc = vq.run(*argv, "--", "true", check=False)
    assert proc.returncode == 4, proc
    assert "--expected-sha cannot be checked for scheduler lane 'cluster'" in proc.stderr
    assert _queue(vq) == []


def test_a_bound_generation_is_the_pin_recorded_with_its_lane(vq: Vq) -> None:
    _configure(vq)
    bound = ["--runtime-root", "/opt/fit-runtime", "--runtime-artifact", DIGEST]
    job = vq.submit("cluster", "--program", "fit", *bound, "--", "true")
    pin = vq.spec(job)["program_runtime_pin"]
    assert pin["program"] == "fit" and pin["kind"] == "venv"
    assert (pin["scheduler_host"], pin["artifact_identity"]) == ("cluster", DIGEST)
    assert pin["git_sha"] is None and pin["python"] is None  # nothing of the driver's
    assert pin["target_source"] == "bound"


def test_an_immutable_wrapper_in_argv_binds_the_job_to_its_generation(vq: Vq) -> None:
    _configure(vq)
    python = f"/cluster/rt/generations/{DIGEST}/payload/bin/python"
    job = vq.submit("cluster", "--program", "fit", "--", python, "run.py")
    spec = vq.spec(job)
    pin = spec["program_runtime_pin"]
    assert (pin["scheduler_host"], pin["artifact_identity"]) == ("cluster", DIGEST)
    assert (pin["target_source"], pin["executable"]) == ("argv_wrapper", python)
    assert spec["runtime_generation"] == {"root": "/cluster/rt", "digest": DIGEST}


def _record(vq: Vq, **changes: object) -> Path:
    """The lane's deployment record, as `vq runtime deploy --lane` writes it."""
    record = {
        "schema_name": "vq.runtime-deployment/1",
        "lane": "cluster",
        "program": "fit",
        "root": "/shared/fit-rt",
        "digest": DIGEST,
        "version": "2.1.0",
        "git_sha": "1f" * 20,
        "deployed_at": "2026-12-04T01:00:00+00:00",
        "verified_at": "2026-12-04T01:00:00+00:00",
        **changes,
    }
    path = vq.root / "runtime-deployments" / "cluster" / "fit.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def test_the_lanes_last_verified_deployment_pins_and_binds_the_job(vq: Vq) -> None:
    _configure(vq)
    _record(vq)
    job = vq.submit("cluster", "--program", "fit", "--expected-sha", "1f1f", "--", "true")
    spec = vq.spec(job)
    pin = spec["program_runtime_pin"]
    assert pin["target_source"] == "deployment_record" and pin["enforce_git_sha"] is True
    assert (pin["scheduler_host"], pin["artifact_identity"]) == ("cluster", DIGEST)
    assert (pin["version"], pin["git_sha"]) == ("2.1.0", "1f" * 20)
    assert spec["runtime_generation"] == {"root": "/shared/fit-rt", "digest": DIGEST}


def test_an_unusable_deployment_record_refuses(vq: Vq) -> None:
    _configure(vq)
    _record(vq, lane="elsewhere")
    proc = vq.run("submit", "cluster", "--program", "fit", "--", "true", check=False)
    assert proc.returncode == 4, proc
    assert "its deployment record is unusable" in proc.stderr
    assert "hint: deploy it again: `vq runtime deploy" in proc.stderr
    assert _queue(vq) == []


def test_an_unreachable_lane_registry_refuses_before_any_spec(vq: Vq) -> None:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    registry = '[hosts.cluster.scheduler_programs.fit]\npython = "/opt/fit/bin/python"\n'
    registry += 'git_dir = "/opt/fit/src"\n'
    lane = CONFIG.replace('ssh = "login.example"', 'ssh = "vq-no-such-host.invalid"')
    (config / "config.toml").write_text(lane + "\n" + registry)
    _record(vq)  # the registry decides: its failure is never papered over by the record
    proc = vq.run("submit", "cluster", "--program", "fit", "--", "true", check=False)
    assert proc.returncode == 4, proc
    first = proc.stderr.splitlines()[0]
    assert first.startswith("vq: error: program 'fit' cannot be resolved on scheduler lane")
    assert "lane cluster could not be reached" in first
    assert "hint: fix [hosts.cluster.scheduler_programs.fit]" in proc.stderr
    assert "Traceback" not in proc.stderr and _queue(vq) == []


def test_a_local_submit_of_the_same_program_still_probes_the_checkout(vq: Vq) -> None:
    _configure(vq)
    proc = vq.run("submit", "--program", "fit", "--", "true", check=False)
    assert proc.returncode != 0
    assert "unavailable" in proc.stderr and _queue(vq) == []


def test_deploying_to_a_lane_refuses_what_it_cannot_do_and_records_nothing(
    vq: Vq, tmp_path: Path
) -> None:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(CONFIG.replace("login.example", "vq-no-such-host.invalid"))
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / "VERSION").write_text("1\n")
    deploy = ["runtime", "deploy", str(runtime), "--root", "/shared/fit-rt"]
    cases = [
        ([*deploy, "--lane", "cluster"], 2, "--lane and --program go together"),
        ([*deploy, "--lane", "elsewhere", "--program", "fit"], 3, "not a scheduler lane"),
        ([*deploy, "--lane", "cluster", "--program", "fit"], 4, "could not be reached"),
    ]
    for argv, code, words in cases:
        proc = vq.run(*argv, check=False)
        assert proc.returncode == code, proc
        assert proc.stderr.startswith("vq: error: ") and words in proc.stderr, proc.stderr
        assert "\nhint: " in proc.stderr and "Traceback" not in proc.stderr
    assert not (vq.root / "runtime-deployments" / "cluster").exists()
