"""`vq runtime deploy` and jobs bound to a generation, against a real daemon."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import Vq


def runtime_source(tmp_path: Path) -> Path:
    source = tmp_path / "runtime-src"
    (source / "bin").mkdir(parents=True)
    tool = source / "bin" / "tool"
    tool.write_text("#!/bin/sh\necho hello from the runtime\n")
    tool.chmod(0o775)  # group writable in the source: the generation must not be
    return source


def deploy(vq: Vq, source: Path, root: Path) -> dict[str, object]:
    result: dict[str, object] = json.loads(
        vq.run("runtime", "deploy", str(source), "--root", str(root), "--json").stdout
    )
    return result


def test_deploy_makes_a_verified_generation_named_by_its_digest(vq: Vq, tmp_path: Path) -> None:
    source = runtime_source(tmp_path)
    root = tmp_path / "root"
    done = deploy(vq, source, root)
    digest = str(done["digest"])
    payload = root / "generations" / digest / "payload"
    assert done["created"] is True and Path(str(done["payload"])) == payload
    assert (payload / "bin" / "tool").read_text() == "#!/bin/sh\necho hello from the runtime\n"
    for path in (payload.parent, payload, payload / "bin", payload / "bin" / "tool"):
        assert os.lstat(path).st_mode & 0o022 == 0, path
    assert os.lstat(payload / "bin" / "tool").st_mode & 0o100  # still executable
    assert os.readlink(root / "current") == f"generations/{digest}"
    record = json.loads((payload.parent / "generation.json").read_text())
    assert record["schema_name"] == "vq.runtime-generation/1" and record["digest"] == digest
    assert deploy(vq, source, root)["created"] is False  # the same bytes: nothing new
    (source / "link").symlink_to("/etc/passwd")
    refused = vq.run("runtime", "deploy", str(source), "--root", str(root), check=False)
    assert refused.returncode == 4 and "symbolic link" in refused.stderr
    assert "Traceback" not in refused.stderr
    relative = vq.run("runtime", "deploy", str(source), "--root", "rel", check=False)
    assert relative.returncode == 4 and "absolute" in relative.stderr


def test_a_bound_job_runs_its_generation_and_an_unverified_one_is_refused(
    vq: Vq, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    digest = str(deploy(vq, runtime_source(tmp_path), root)["digest"])
    vq.start_daemon()
    bound = ["--runtime-root", str(root), "--runtime-artifact", digest]
    job = vq.submit(*bound, "--", "sh", "-c", '"$VQ_RUNTIME_PAYLOAD"/bin/tool')
    assert vq.wait_state(job, "COMPLETED", "FAILED") == "COMPLETED"
    assert (vq.root / "jobs" / job / "stdout.log").read_text() == "hello from the runtime\n"
    assert vq.status(job)["runtime_generation"] == {"root": str(root), "digest": digest}
    # refused at submit: not deployed, group writable, half a binding
    missing = vq.run(
        "submit",
        "--runtime-root",
        str(root),
        "--runtime-artifact",
        "a" * 64,
        "--",
        "true",
        check=False,
    )
    assert missing.returncode == 4 and "not deployed" in missing.stderr
    tool = root / "generations" / digest / "payload" / "bin" / "tool"
    tool.chmod(0o775)
    writable = vq.run("submit", *bound, "--", "true", check=False)
    assert writable.returncode == 4 and "group or world writable" in writable.stderr
    tool.chmod(0o755)
    half = vq.run("submit", "--runtime-root", str(root), "--", "true", check=False)
    lines = half.stderr.splitlines()
    assert half.returncode == 2 and lines[0] == "vq: error: --runtime-root needs --runtime-artifact"
    assert lines[1].startswith("hint: name the generation too: --runtime-artifact DIGEST")
    assert str(root / "generations") in lines[1] and "params:" not in half.stderr
    other = vq.run("submit", "--runtime-artifact", digest, "--", "true", check=False)
    assert other.returncode == 2
    assert other.stderr.startswith("vq: error: --runtime-artifact needs --runtime-root\nhint: ")
    assert len(vq.json("list")["jobs"]) == 1  # nothing refused was queued


def test_a_generation_altered_before_dispatch_fails_the_job_without_running_it(
    vq: Vq, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    digest = str(deploy(vq, runtime_source(tmp_path), root)["digest"])
    marker = tmp_path / "ran"
    job = vq.submit(
        "--runtime-root", str(root), "--runtime-artifact", digest, "--", "touch", str(marker)
    )  # no daemon yet: the job waits, verified at submit
    tool = root / "generations" / digest / "payload" / "bin" / "tool"
    tool.chmod(0o755 | 0o200)
    tool.write_text("#!/bin/sh\necho altered\n")
    vq.start_daemon()
    assert vq.wait_state(job, "COMPLETED", "FAILED") == "FAILED"
    reason = vq.spec(job)["failure_reason"]
    assert "unavailable" in reason and "altered" in reason and "command not started" in reason
    assert not marker.exists()
