"""`vq campaign pin FILE`: each node's sources.sha256 written from its directory, through
the real executable (exit codes, the file's bytes, what validate then says)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.campaign_support import raw
from tests.inprocess.integration.test_campaign_cli import Cli, cli, write_campaign

__all__ = ["cli"]  # the fixture, used by name


def _unpinned(tmp_path: Path, *, sha256: str | None = "unpinned", indent: int = 2) -> Path:
    (tmp_path / "validate").mkdir(exist_ok=True)
    (tmp_path / "validate" / "check_scf.py").write_text("print('converged')\n")
    data = raw()
    data["nodes"][1]["sources"] = {"path": "validate"}
    if sha256 is not None:
        data["nodes"][1]["sources"]["sha256"] = sha256
    return write_campaign(tmp_path, data, indent=indent)


def test_pin_writes_the_digests_validate_then_passes_and_a_rerun_changes_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    path = _unpinned(tmp_path)
    before = path.read_text()
    cli("validate", path, code=1)
    os.chmod(path, 0o640)
    shown = cli("pin", path).stdout
    report = cli.json("validate", path)
    assert report["valid"] is True
    digest = report["sources"][0]["actual_sha256"]
    assert f"validate  validate/  1 entries  pinned {digest}" in shown
    assert f"wrote {path}" in shown and f"campaign_sha256 {report['campaign_sha256']}" in shown
    after = path.read_text()
    assert after == before.replace('"unpinned"', f'"{digest}"')  # only the pin changed
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".campaign.json")]
    written = os.stat(path).st_mtime_ns
    again = cli.json("pin", path)
    assert again["written"] is False and again["sources"][0]["changed"] is False
    assert again["campaign_sha256"] == report["campaign_sha256"]
    assert "unchanged" in cli("pin", path).stdout
    assert path.read_text() == after and os.stat(path).st_mtime_ns == written
    (tmp_path / "validate" / "check_scf.py").write_text("print('edited')\n")
    repinned = cli.json("pin", path)
    assert repinned["written"] is True
    assert repinned["sources"][0]["previous_sha256"] == digest
    assert repinned["sources"][0]["sha256"] != digest
    assert cli.json("validate", path)["valid"] is True


def test_a_missing_pin_is_added_in_the_files_layout(cli: Cli, tmp_path: Path) -> None:
    path = _unpinned(tmp_path, sha256=None, indent=4)
    result = cli.json("pin", path)
    assert result["sources"][0]["previous_sha256"] is None and result["written"] is True
    text = path.read_text()
    assert cli.json("validate", path)["valid"] is True
    assert '\n    "schema_name"' in text  # still indented by four
    assert json.loads(text)["nodes"][1]["sources"] == {
        "path": "validate",
        "sha256": result["sources"][0]["sha256"],
    }


def test_hostile_sources_are_refused_and_nothing_is_written(cli: Cli, tmp_path: Path) -> None:
    """What validate refuses, pin refuses (the same exit code), writing nothing."""
    path = _unpinned(tmp_path)
    before = path.read_bytes()
    (tmp_path / "validate" / "lib.py").symlink_to("/etc/hostname")  # a link inside
    proc = cli("pin", path, code=1)
    assert "nothing was pinned" in proc.stderr and "hint: " in proc.stderr
    assert path.read_bytes() == before
    (tmp_path / "validate" / "lib.py").unlink()
    data = json.loads(before)
    (tmp_path / "linked").symlink_to(tmp_path / "validate")  # a linked component
    data["nodes"][1]["sources"]["path"] = "linked"
    linked = write_campaign(tmp_path, data)
    cli("validate", linked, code=1)
    assert "nothing was pinned" in cli("pin", linked, code=1).stderr
    data["nodes"][1]["sources"]["path"] = "../outside"  # out of the campaign's directory
    escaping = write_campaign(tmp_path, data)
    escaping_before = escaping.read_bytes()
    cli("validate", escaping, code=4)
    assert "is refused" in cli("pin", escaping, code=4).stderr
    assert escaping.read_bytes() == escaping_before
    link = tmp_path / "link.json"
    link.symlink_to(escaping.name)
    assert "symbolic link" in cli("pin", link, code=4).stderr
    assert link.is_symlink()
