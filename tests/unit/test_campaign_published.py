"""Status checks every published artifact again, cheaply: one lstat per untouched file,
a full read of any file touched since it was sealed (:mod:`vq.campaign.published`)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.campaign_support import raw
from vq.campaign.files import LoadedCampaign, read_campaign
from vq.campaign.journal import Attempt, empty_journal
from vq.campaign.planner import plan
from vq.campaign.publish import publish_outputs
from vq.campaign.published import PublishedCopy, check_published
from vq.campaign.rundir import RunDir

BIG = 16 << 20


@pytest.fixture
def loaded(tmp_path: Path) -> LoadedCampaign:
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(raw()))
    return read_campaign(path)


class Published:
    """calculate attempt 1's ``result`` (a 16 MiB file among small ones), published."""

    def __init__(self, loaded: LoadedCampaign, tmp_path: Path) -> None:
        workspace = tmp_path / "incoming" / "calculate" / "1"
        (workspace / "out" / "deep").mkdir(parents=True)
        (workspace / "out" / "energy.txt").write_text("-76.02\n")
        (workspace / "out" / "deep" / "big.bin").write_bytes(b"\x5a" * BIG)
        node = loaded.campaign.node("calculate")
        assert node is not None
        self.loaded, self.run_dir = loaded, RunDir(tmp_path / "run")
        attempt = Attempt(
            node="calculate", attempt=1, state="succeeded", key="k" * 64, job_id="1" * 12
        )
        attempt.outputs = publish_outputs(loaded, self.run_dir, node, attempt, workspace, [])
        self.journal = empty_journal(loaded.campaign, loaded.digest)
        self.journal.attempts.append(attempt)
        self.copy = self.run_dir.artifact("calculate", 1, "result")

    def check(self) -> tuple[PublishedCopy, int]:
        """The verdict on ``result`` and how many bytes this process read for it."""
        before = _bytes_read()
        current = plan(self.loaded.campaign, self.loaded.digest, self.journal)
        (copy,) = check_published(self.loaded, self.run_dir, self.journal, current)
        return copy, _bytes_read() - before


def _bytes_read() -> int:
    """This process's ``rchar``: every byte its read calls returned (page cache included)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def test_an_untouched_artifact_is_verified_without_reading_its_bytes(
    loaded: LoadedCampaign, tmp_path: Path
) -> None:
    published = Published(loaded, tmp_path)
    assert sorted(os.listdir(published.copy.parent)) == [
        "result",
        "result.manifest.json",
        "result.seal.json",
    ]
    copy, read = published.check()
    assert (copy.status, copy.problem, copy.as_verified) == ("verified", None, True)
    assert read < BIG // 8, read  # the manifest and the seal, not the 16 MiB
    published.run_dir.seal("calculate", 1, "result").unlink()
    copy, read = published.check()  # no seal: every byte is read, the verdict is the same
    assert copy.status == "verified" and read >= BIG


def test_a_same_size_edit_with_its_old_mtime_put_back_is_tampered(
    loaded: LoadedCampaign, tmp_path: Path
) -> None:
    published = Published(loaded, tmp_path)
    big = published.copy / "deep" / "big.bin"
    before = os.stat(big)
    with big.open("r+b") as handle:
        handle.seek(BIG // 2)
        handle.write(b"\x5b")
    os.utime(big, ns=(before.st_atime_ns, before.st_mtime_ns))
    copy, _ = published.check()
    assert (copy.status, copy.as_verified) == ("tampered", False)
    assert copy.problem == "deep/big.bin: its bytes differ from the manifest (digest_mismatch)"
    assert "tampered" in copy.attention() and "artifact-verify" in copy.attention()


def test_a_file_touched_but_unchanged_stays_verified(
    loaded: LoadedCampaign, tmp_path: Path
) -> None:
    published = Published(loaded, tmp_path)
    (published.copy / "energy.txt").touch()
    copy, read = published.check()
    assert copy.status == "verified" and read < BIG // 8  # only energy.txt was read again


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda c: (c / "extra.txt").write_text("x"), "extra.txt: is not in the manifest"),
        (lambda c: (c / "energy.txt").unlink(), "energy.txt: the listed file is absent"),
        (lambda c: (c / "energy.txt").write_text("-7"), "energy.txt: has 2 of 7 bytes"),
    ],
)
def test_an_added_removed_or_cut_file_is_tampered(
    loaded: LoadedCampaign, tmp_path: Path, change: object, problem: str
) -> None:
    published = Published(loaded, tmp_path)
    change(published.copy)  # type: ignore[operator]
    copy, _ = published.check()
    assert copy.status == "tampered" and copy.problem is not None
    assert copy.problem.startswith(problem), copy.problem


def test_an_edited_manifest_is_tampered_and_a_removed_copy_missing(
    loaded: LoadedCampaign, tmp_path: Path
) -> None:
    published = Published(loaded, tmp_path)
    manifest = published.run_dir.manifest("calculate", 1, "result")
    original = manifest.read_text()
    manifest.write_text(original.replace('"attempt": 1', '"attempt": 2'))
    copy, _ = published.check()
    assert copy.status == "tampered" and "manifest" in (copy.problem or "")
    manifest.write_text(original)
    shutil.rmtree(published.copy)
    copy, _ = published.check()
    assert (copy.status, copy.as_verified) == ("missing", False)  # validate still needs it
