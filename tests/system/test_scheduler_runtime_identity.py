"""A lane job's managed runtime resolved on the target (§3.4) and run on the testbed's
real Slurm 22.05 over real sshd: once through the lane's program registry (a checkout
on the cluster, resolved over SSH at submit to its commit and version), once through the
lane's last verified deployment record (`vq runtime deploy --lane` ships the runtime,
verifies it on the login host and records it; the job is bound to that generation,
which the compute node verifies again before the command starts). Each job runs and
its spec records the pin. Needs root (the testbed), like test_scheduler_slurm."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.conftest import Vq
from tests.system.slurm_lane import (
    scratch,  # noqa: F401 - the fixture
    slurm_lane_keys,
    slurm_testbed,  # noqa: F401 - the fixture
    ssh_local,
    ssh_on,
    toml_table,
    write_config,
)
from tests.system.test_scheduler_slurm import _terminal
from tests.testbed import SshTestbed

pytestmark = pytest.mark.timeout(420)

#: The driver's own registration of `fit`: a checkout that does not exist here, so a
#: submit that looked at the driver's side would be refused.
DRIVER_VENV = 'kind = "venv"\npython = "/usr/bin/python3"\ngit_dir = "/nonexistent/fit"\n'


def test_a_job_pinned_through_the_lane_registry_runs_and_records_its_pin(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811 - the fixture
    scratch: str,  # noqa: F811 - the fixture
) -> None:
    checkout = f"{scratch}/fit-src"
    git = ["git", "-C", checkout, "-c", "user.email=t@example.org", "-c", "user.name=t"]
    ssh_local(slurm_testbed, "mkdir", "-p", checkout)
    ssh_local(slurm_testbed, *git, "init", "-q")
    ssh_local(slurm_testbed, *git, "commit", "-q", "--allow-empty", "-m", "fit-1.0")
    # (ssh joins the words into one remote shell line: each is one word there)
    sha = ssh_local(slurm_testbed, *git, "rev-parse", "HEAD").strip()
    version = ssh_local(
        slurm_testbed, "/usr/bin/python3", "-c", shlex.quote("import json; print(json.__version__)")
    )
    registry = {"python": "/usr/bin/python3", "git_dir": checkout, "import_check": "json"}
    write_config(
        vq,
        toml_table("hosts.cluster", slurm_lane_keys(slurm_testbed, scratch)),
        toml_table("hosts.cluster.scheduler_programs.fit", registry),
    )
    vq.start_daemon()
    job = vq.submit("cluster", "--program", "fit", "--", "sh", "-c", 'echo "ran $VQ_PROGRAM"')
    done = _terminal(vq, job, timeout=240)
    assert (done["state"], done["exit_code"]) == ("COMPLETED", 0), done
    assert (vq.root / "jobs" / job / "stdout.log").read_text() == "ran fit\n"
    pin = done["program_runtime_pin"]
    assert pin["target_source"] == "target_registry"
    assert (pin["scheduler_host"], pin["executable"], pin["git_dir"]) == (
        "cluster",
        "/usr/bin/python3",
        checkout,
    )
    assert (pin["git_sha"], pin["version"]) == (sha, version.strip())


def test_a_job_pinned_through_the_lanes_deployment_record_runs_in_that_generation(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811 - the fixture
    scratch: str,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    write_config(
        vq,
        toml_table("hosts.cluster", slurm_lane_keys(slurm_testbed, scratch)),
        f"[programs.fit]\n{DRIVER_VENV}",
    )
    runtime = tmp_path / "fit-runtime"
    (runtime / "bin").mkdir(parents=True)
    (runtime / "VERSION").write_text("3.0.0\n")
    (runtime / "bin" / "fit").write_text("#!/bin/sh\necho fit-from-generation\n")
    (runtime / "bin" / "fit").chmod(0o755)
    root = f"{scratch}/fit-rt"
    argv = ["runtime", "deploy", str(runtime), "--root", root, "--lane", "cluster"]
    deployed = json.loads(vq.run(*argv, "--program", "fit", "--version", "3.0.0", "--json").stdout)
    digest = deployed["digest"]
    # it is on the cluster, selected, and the record names it
    assert (
        ssh_local(slurm_testbed, "readlink", f"{root}/current").strip() == f"generations/{digest}"
    )
    record = json.loads((vq.root / "runtime-deployments" / "cluster" / "fit.json").read_text())
    assert (record["digest"], record["root"], record["version"]) == (digest, root, "3.0.0")
    vq.start_daemon()
    command = 'cat "$VQ_RUNTIME_PAYLOAD/VERSION"; "$VQ_RUNTIME_PAYLOAD/bin/fit"'
    job = vq.submit("cluster", "--program", "fit", "--", "sh", "-c", command)
    done = _terminal(vq, job, timeout=240)
    assert (done["state"], done["exit_code"]) == ("COMPLETED", 0), done
    out = (vq.root / "jobs" / job / "stdout.log").read_text()
    assert out == "3.0.0\nfit-from-generation\n"
    pin = done["program_runtime_pin"]
    assert pin["target_source"] == "deployment_record"
    assert (pin["scheduler_host"], pin["artifact_identity"], pin["version"]) == (
        "cluster",
        digest,
        "3.0.0",
    )
    assert done["runtime_generation"] == {"root": root, "digest": digest}


def test_an_enforced_registry_pin_fails_on_the_node_when_the_checkout_moved(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811 - the fixture
    scratch: str,  # noqa: F811 - the fixture
) -> None:
    checkout = f"{scratch}/fit-src"
    git = ["git", "-C", checkout, "-c", "user.email=t@example.org", "-c", "user.name=t"]
    ssh_local(slurm_testbed, "mkdir", "-p", checkout)
    ssh_local(slurm_testbed, *git, "init", "-q")
    ssh_local(slurm_testbed, *git, "commit", "-q", "--allow-empty", "-m", "one")
    sha = ssh_local(slurm_testbed, *git, "rev-parse", "HEAD").strip()
    registry = {"python": "/usr/bin/python3", "git_dir": checkout, "expected_git_sha": sha}
    write_config(
        vq,
        toml_table("hosts.cluster", slurm_lane_keys(slurm_testbed, scratch)),
        toml_table("hosts.cluster.scheduler_programs.fit", registry),
    )
    vq.start_daemon()
    flag = f"{scratch}/go"
    first = vq.submit("cluster", "--", "sh", "-c", f"while [ ! -e {flag} ]; do sleep 0.2; done")
    ran = f"{scratch}/second-ran"
    second = vq.submit("cluster", "--program", "fit", "--after", first, "--", "touch", ran)
    pin = vq.spec(second)["program_runtime_pin"]
    assert (pin["enforce_git_sha"], pin["resolved_git_sha"]) == (True, sha)
    # the checkout moves while the second job waits for the first; then the first ends
    ssh_local(slurm_testbed, *git, "commit", "-q", "--allow-empty", "-m", "two")
    ssh_local(slurm_testbed, "touch", flag)
    assert _terminal(vq, first, timeout=240)["state"] == "COMPLETED"
    done = _terminal(vq, second, timeout=240)
    assert (done["state"], done["exit_code"]) == ("FAILED", 126), done
    stderr = (vq.root / "jobs" / second / "stderr.log").read_text()
    assert "runtime pin no longer holds" in stderr and "command not started" in stderr
    assert ssh_on(slurm_testbed, "vq-local", "test", "-e", ran).returncode == 1
