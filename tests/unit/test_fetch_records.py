"""Records of fetches in progress: written only where they belong, acted on only when
their process is gone and they are this user's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from vq._proc_stat import read_stat
from vq.fetch.records import interrupted_fetches, recorded_fetch


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _record(fetches: Path, dest: Path, pid: int, ticks: int | None = None) -> Path:
    fetches.mkdir(exist_ok=True)
    path = fetches / f"{pid}.json"
    path.write_text(json.dumps({"dest": str(dest), "pid": pid, "start_ticks": ticks}))
    return path


def test_a_record_lives_exactly_as_long_as_the_fetch(tmp_path: Path) -> None:
    fetches = tmp_path / "fetches"
    with recorded_fetch(fetches, tmp_path / "snap"):
        (record,) = fetches.glob("*.json")
        assert json.loads(record.read_text())["dest"] == str(tmp_path / "snap")
        assert interrupted_fetches(fetches, execute=True) == []  # its process runs: ours
    assert list(fetches.glob("*.json")) == []


def test_a_linked_records_directory_is_never_written_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "fetches").symlink_to(elsewhere)
    with recorded_fetch(tmp_path / "fetches", tmp_path / "snap"):
        pass  # the fetch goes on unrecorded
    assert list(elsewhere.iterdir()) == []


def test_a_dead_fetchs_staging_is_reported_then_removed(tmp_path: Path) -> None:
    fetches, area = tmp_path / "fetches", tmp_path / "area"
    area.mkdir()
    staged = area / ".snap.vq-fetch-ab12"
    staged.mkdir()
    (staged / "file").write_text("x")
    other = area / ".other.vq-fetch-cd34"  # another DEST's: not this record's business
    other.mkdir()
    record = _record(fetches, area / "snap", _dead_pid())
    dry = interrupted_fetches(fetches, execute=False)
    assert [(item.path, action) for item, action in dry] == [(staged, "would remove")]
    assert staged.exists() and record.exists()
    done = interrupted_fetches(fetches, execute=True)
    assert [(item.path, action) for item, action in done] == [(staged, "removed")]
    assert not staged.exists() and other.exists() and not record.exists()


def test_a_staging_link_is_removed_itself_never_followed(tmp_path: Path) -> None:
    fetches, area, target = tmp_path / "fetches", tmp_path / "area", tmp_path / "keep"
    area.mkdir()
    target.mkdir()
    (target / "precious").write_text("x")
    (area / ".snap.vq-fetch-ef56").symlink_to(target)
    _record(fetches, area / "snap", _dead_pid())
    interrupted_fetches(fetches, execute=True)
    assert not os.path.lexists(area / ".snap.vq-fetch-ef56")
    assert (target / "precious").read_text() == "x"


def test_a_live_process_or_another_users_record_is_left_alone(tmp_path: Path) -> None:
    fetches, area = tmp_path / "fetches", tmp_path / "area"
    area.mkdir()
    staged = area / ".snap.vq-fetch-0001"
    staged.mkdir()
    own = read_stat(os.getpid())
    assert own is not None
    live = _record(fetches, area / "snap", os.getpid(), own.start_ticks)
    assert interrupted_fetches(fetches, execute=True) == []
    live.unlink()
    foreign = _record(fetches, area / "snap", _dead_pid())
    if os.geteuid() == 0:
        os.chown(foreign, 65534, 65534)  # nobody's record: root never acts on it
        assert interrupted_fetches(fetches, execute=True) == []
        assert staged.exists() and foreign.exists()
