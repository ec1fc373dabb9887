"""Campaign nodes bound to a runtime generation, against a real daemon."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Vq
from tests.inprocess.integration.test_campaign_run import job_count, make_campaign, run
from tests.inprocess.integration.test_runtime_generations import deploy, runtime_source


def bind_render(path: Path, root: Path, digest: str) -> None:
    data = json.loads(path.read_text())
    render = next(n for n in data["nodes"] if n["id"] == "render")
    render["runtime_root"], render["runtime_digest"] = str(root), digest
    render["command"] = ["sh", "-c", '"$VQ_RUNTIME_PAYLOAD"/bin/tool > figure.png']
    path.write_text(json.dumps(data, indent=2))


def test_a_render_bound_to_a_generation_records_and_publishes_what_ran(
    vq: Vq, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    digest = str(deploy(vq, runtime_source(tmp_path), root)["digest"])
    vq.start_daemon()
    path = make_campaign(tmp_path, vq)
    bind_render(path, root, digest)
    run_dir = tmp_path / "run"
    result = run(vq, path, run_dir)
    assert result["status"] == "succeeded"
    figure = run_dir / "artifacts" / "render" / "1" / "figure"
    assert figure.read_text() == "hello from the runtime\n"
    journal = json.loads((run_dir / "journal.json").read_text())
    render = next(a for a in journal["attempts"] if a["node"] == "render")
    payload = f"{root}/generations/{digest}/payload"
    assert render["runtime"] == {"artifact_identity": digest, "runtime_root": payload}
    manifest = json.loads((figure.parent / "figure.manifest.json").read_text())
    assert manifest["runtime_digest"] == digest
    assert manifest["executed_runtime"]["artifact_identity"] == digest
    status = vq.run("campaign", "status", str(path), str(run_dir / "journal.json")).stdout
    assert "Ran with" in status and f"artifact_identity={digest}" in status


def test_a_generation_that_is_not_deployed_stops_the_run_before_anything_is_submitted(
    vq: Vq, tmp_path: Path
) -> None:
    vq.start_daemon()
    path = make_campaign(tmp_path, vq)
    bind_render(path, tmp_path / "root", "b" * 64)
    proc = vq.run("campaign", "run", str(path), str(tmp_path / "run"), check=False)
    assert proc.returncode == 4, proc.stderr
    assert "node 'render'" in proc.stderr and "not deployed" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (vq.root / "queue").exists() or job_count(vq) == 0
