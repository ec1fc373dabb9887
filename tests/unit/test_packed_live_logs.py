"""Live output of a packed element (:mod:`vq.executors.scheduler.live_logs` with a limit,
then :func:`vq.executors.scheduler.packed_copy.settled_log` at copy-back): the slot's log
is mirrored up to the copy-back's cap, and the copy-back continues that live prefix, so a
follower reading the local copy by offset sees every byte at most once, and a one-line
marker wherever bytes were not copied back.

The mirror and the copy-back run through the real local runner and ``sh`` against a
directory standing in for the cluster's ``log_root`` and ``work_root``."""

from __future__ import annotations

from pathlib import Path

from vq.executors.scheduler.live_logs import LiveLog, LiveLogs, read_start, within_limit
from vq.executors.scheduler.packed_copy import (
    SlotLog,
    omitted_marker,
    restore_slots,
    settled_log,
)
from vq.packing.cases.remote import PackRemote
from vq.transport.local import LocalRunner


# --- the pure part ---------------------------------------------------------------------------
def test_the_mirror_never_grows_a_copy_beyond_its_limit() -> None:
    assert within_limit(0, b"abcdef", None) == b"abcdef"
    assert within_limit(2, b"abcdef", 5) == b"abc"
    assert within_limit(5, b"abcdef", 5) == b""
    assert within_limit(9, b"abcdef", 5) == b""


def _copied(remote: bytes, cap: int, local: bytes) -> SlotLog:
    """What the copy-back brings of ``remote`` for a local copy ``local``."""
    start = read_start(len(local))
    return SlotLog(remote[max(0, len(remote) - cap) :], len(remote), remote[start : start + 64])


def test_a_log_within_the_cap_continues_the_live_copy_to_the_cluster_file() -> None:
    remote = b"first\n" + b"y" * 150 + b"second\n"
    for live in (b"", b"first\n", remote[:100], remote):
        assert settled_log(live, _copied(remote, 1000, live), read_start(len(live))) == remote


def test_a_tail_overlapping_the_live_copy_continues_it_without_repeating() -> None:
    remote = bytes(range(256)) * 2  # 512 bytes, the cap 400: the tail starts at 112
    live = remote[:300]
    assert settled_log(live, _copied(remote, 400, live), read_start(300)) == remote


def test_a_gap_between_the_live_copy_and_the_tail_is_one_marker_line() -> None:
    remote = b"".join(b"line %04d\n" % n for n in range(100))  # 1000 bytes
    live = remote[:205]  # mid-line: the marker still gets a line of its own
    settled = settled_log(live, _copied(remote, 300, live), read_start(205))
    marker = b"[vq: 495 bytes of this log were not copied back; its last 300 follow]\n"
    assert omitted_marker(495, 300) == marker
    assert settled == live + b"\n" + marker + remote[700:]


def test_without_a_live_copy_a_cut_log_starts_with_the_marker() -> None:
    remote = b"z" * 1000
    assert settled_log(b"", _copied(remote, 300, b""), 0) == omitted_marker(700, 300) + remote[700:]
    assert settled_log(b"", _copied(remote, 1000, b""), 0) == remote


def test_a_live_copy_that_is_not_a_prefix_is_replaced_by_the_cluster_file() -> None:
    remote = b"attempt two\n" * 10  # 120 bytes
    for live in (b"attempt one\n" * 3, b"x" * 500):  # other bytes; longer than the log
        assert settled_log(live, _copied(remote, 1000, live), read_start(len(live))) == remote
    # The check bytes were read for a local copy of another length: not trusted.
    live = remote[:100]
    cut = omitted_marker(60, 60) + remote[60:]
    assert settled_log(live, _copied(remote, 60, b""), 0) == cut
    # The kept tail differs from the live copy where the two overlap.
    assert settled_log(b"a" * 100, SlotLog(b"b" * 80, 120, b"a" * 64), 36) == (
        omitted_marker(40, 80) + b"b" * 80
    )


# --- the mirror and the copy-back together ---------------------------------------------------
class Slot:
    """A slot's log on the 'cluster' and its element's local ``stdout.log``, followed by
    offset as ``vq logs -f`` does."""

    def __init__(self, tmp_path: Path, cap: int) -> None:
        self.cap = cap
        self.root = tmp_path / "state"
        self.logs = tmp_path / "cluster" / "logs"
        self.work = tmp_path / "cluster" / "work" / "a1"
        self.local = self.root / "jobs" / "e1"
        for directory in (self.logs, self.work / "0", self.local):
            directory.mkdir(parents=True)
        self.mirror = LiveLogs(LocalRunner(), 10.0, lambda job_id: self.root)
        self.shown = b""

    @property
    def out(self) -> Path:
        return self.logs / "a1-77-0.out"

    def write(self, data: bytes) -> None:
        with self.out.open("ab") as handle:
            handle.write(data)

    def round(self) -> None:
        """One observation round: the mirror, then the follower reads."""
        self.mirror.mirror([LiveLog("e1", str(self.out), self.local / "stdout.log", self.cap)])
        self.follow()

    def follow(self) -> None:
        try:
            data = (self.local / "stdout.log").read_bytes()
        except FileNotFoundError:
            return
        assert data.startswith(self.shown)  # the follower's offset stays valid
        self.shown = data

    def copy_back(self) -> None:
        """What the packed copy-back does: one collect, the slot's log settled over the
        local copy (the check bytes read from where the local copy ends)."""
        local = (self.local / "stdout.log").read_bytes()
        checked = read_start(len(local))
        archive = PackRemote(LocalRunner()).collect(
            str(self.work), f"{self.logs}/a1-77-", [0], self.cap, {0: (checked, 0)}
        )
        copy = restore_slots(archive, {0: self.local / "workspace"})[0]
        assert not isinstance(copy, Exception) and copy.stdout is not None
        (self.local / "stdout.log").write_bytes(settled_log(local, copy.stdout, checked))
        self.follow()


def test_a_follower_sees_a_small_packed_log_live_then_whole_exactly_once(tmp_path: Path) -> None:
    slot = Slot(tmp_path, cap=1 << 20)
    slot.round()
    assert slot.shown == b""  # the slot has not started: nothing anywhere
    slot.write(b"first line\n")
    slot.round()
    assert slot.shown == b"first line\n"  # live, before any copy-back
    slot.write(b"second line\n")
    slot.copy_back()
    assert slot.shown == b"first line\nsecond line\n" == slot.out.read_bytes()


def test_a_log_beyond_the_cap_is_live_up_to_it_then_one_marker_then_its_tail(
    tmp_path: Path,
) -> None:
    slot = Slot(tmp_path, cap=200)
    slot.write(b"a" * 150)
    slot.round()
    assert slot.shown == b"a" * 150
    slot.write(b"b" * 150)
    slot.round()
    slot.round()
    assert slot.shown == b"a" * 150 + b"b" * 50  # mirrored up to the cap, then no further
    slot.write(b"c" * 500)
    slot.round()
    assert len(slot.shown) == 200
    slot.copy_back()
    marker = omitted_marker(400, 200)  # bytes 200..600 were not copied back
    assert slot.shown == b"a" * 150 + b"b" * 50 + b"\n" + marker + b"c" * 200


def test_a_log_just_over_the_cap_meets_the_live_copy_with_no_gap(tmp_path: Path) -> None:
    slot = Slot(tmp_path, cap=200)
    slot.write(b"x" * 120)
    slot.round()
    slot.write(b"y" * 150)  # 270 bytes: the tail (the last 200) starts at 70
    slot.copy_back()
    assert slot.shown == slot.out.read_bytes()
