"""A lane job naming a managed-runtime (``venv``) program is pinned to its target, never
to the driver's checkout (§3.4): with no target identity the submit is refused before any
spec exists; bound to a runtime generation it records the lane and the digest. Real CLI
subprocesses, no daemon (the submit writes the spec itself)."""

from __future__ import annotations

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
    assert any(line.startswith("hint:") and "--runtime-artifact" in line for line in lines)
    assert "Traceback" not in proc.stderr and "nonexistent" not in proc.stderr
    assert _queue(vq) == []


def test_expected_sha_cannot_be_checked_on_a_lane(vq: Vq) -> None:
    _configure(vq)
    argv = ["submit", "cluster", "--program", "fit", "--expected-sha", "a" * 40, "--"]
    proc = vq.run(*argv, "true", check=False)
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


def test_a_local_submit_of_the_same_program_still_probes_the_checkout(vq: Vq) -> None:
    _configure(vq)
    proc = vq.run("submit", "--program", "fit", "--", "true", check=False)
    assert proc.returncode != 0
    assert "unavailable" in proc.stderr and _queue(vq) == []
