"""The SpecStore contract (§2.3) against real files under tmp_path: no mocks.

Covers create/read/update semantics, error types, quarantine on scan, atomic writes
(no temp files, no torn reads) and the per-spec flock serializing read-modify-write
across threads and across processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vq._fs import atomic_write_bytes
from vq.domain.spec import JobSpec, load_spec
from vq.domain.states import JobState
from vq.errors import Conflict, CorruptSpec, InvalidInput, NotFound, UnsupportedSpecVersion
from vq.paths import StatePaths
from vq.store.specs import MAX_SPEC_BYTES, SpecStore, encode_spec

T0 = datetime(2025, 1, 1, tzinfo=UTC)
SRC = Path(__file__).resolve().parents[2] / "src"


def make_spec(job_id: str = "0123456789ab", **fields: object) -> JobSpec:
    return JobSpec.model_validate(
        {"id": job_id, "submitted_at": T0, "command": ["echo", "hi"], "cpus": 1, **fields}
    )


@pytest.fixture
def store(tmp_path: Path) -> SpecStore:
    paths = StatePaths(tmp_path / "state")
    paths.ensure()
    return SpecStore(paths)


def snapshot(path: Path) -> tuple[bytes, int, int]:
    st = path.stat()
    return path.read_bytes(), st.st_ino, st.st_mtime_ns


def temp_files(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.startswith(".") and n.endswith(".tmp"))


# --- create / read / update -------------------------------------------------------------
def test_create_read_round_trip(store: SpecStore) -> None:
    spec = make_spec(job_name="first", tags=["t"], mem_mb=100)
    store.create(spec)
    path = store.paths.queue_dir / "0123456789ab.json"
    assert path.is_file()
    assert store.path("0123456789ab") == path
    assert path.read_bytes() == encode_spec(spec)
    assert store.read("0123456789ab") == spec
    assert store.exists("0123456789ab")
    assert store.list_ids() == ["0123456789ab"]


def test_create_refuses_existing_id(store: SpecStore) -> None:
    store.create(make_spec(job_name="original"))
    path = store.path("0123456789ab")
    before = snapshot(path)
    with pytest.raises(Conflict) as info:
        store.create(make_spec(job_name="impostor"))
    assert info.value.exit_code == 6
    assert "0123456789ab" in info.value.message
    assert snapshot(path) == before
    assert store.read("0123456789ab").job_name == "original"


def test_concurrent_creates_of_one_id_admit_exactly_one(store: SpecStore) -> None:
    barrier = threading.Barrier(8)
    outcomes: list[str] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        barrier.wait()
        try:
            store.create(make_spec(job_name=f"w{n}"))
            result = "ok"
        except Conflict:
            result = "conflict"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == ["conflict"] * 7 + ["ok"]


def test_update_writes_and_returns_on_disk_spec(store: SpecStore) -> None:
    store.create(make_spec())

    def mutate(spec: JobSpec) -> JobSpec:
        spec.state = JobState.RUNNING
        spec.pid = 4321
        return spec

    result = store.update("0123456789ab", mutate)
    returned = result.spec
    on_disk = store.read("0123456789ab")
    assert result.changed
    assert result.before is JobState.PENDING
    assert returned == on_disk
    assert on_disk.state is JobState.RUNNING
    assert on_disk.pid == 4321
    assert store.path("0123456789ab").read_bytes() == encode_spec(returned)


def test_update_returning_none_writes_nothing(store: SpecStore) -> None:
    store.create(make_spec(retry_count=3))
    path = store.path("0123456789ab")
    before = snapshot(path)
    time.sleep(0.01)  # a rewrite would get a new mtime and a new inode

    def mutate(spec: JobSpec) -> JobSpec | None:
        spec.retry_count = 99  # a private copy: must not leak anywhere
        return None  # "no change"

    result = store.update("0123456789ab", mutate)
    returned = result.spec
    assert snapshot(path) == before
    assert not result.changed
    assert result.before is JobState.PENDING
    assert returned.retry_count == 3
    assert returned == store.read("0123456789ab")
    assert temp_files(store.paths.queue_dir) == []


def test_update_exception_in_mutate_leaves_file_unchanged(store: SpecStore) -> None:
    store.create(make_spec())
    path = store.path("0123456789ab")
    before = snapshot(path)

    class Boom(Exception):
        pass

    def mutate(spec: JobSpec) -> JobSpec:
        spec.state = JobState.KILLED
        raise Boom("mutate failed")

    with pytest.raises(Boom):
        store.update("0123456789ab", mutate)
    assert snapshot(path) == before
    assert store.read("0123456789ab").state is JobState.PENDING
    assert temp_files(store.paths.queue_dir) == []
    # The lock was released: a later update goes through.
    store.update("0123456789ab", lambda s: s.model_copy(update={"retry_count": 1}))
    assert store.read("0123456789ab").retry_count == 1


def test_update_unknown_id_is_not_found_and_creates_no_spec(store: SpecStore) -> None:
    with pytest.raises(NotFound):
        store.update("0123456789ab", lambda s: s)
    assert not store.path("0123456789ab").exists()
    assert store.list_ids() == []
    assert sorted(os.listdir(store.paths.queue_dir)) == []  # no stray lock file either


def test_update_unknown_id_without_a_queue_directory_is_not_found(tmp_path: Path) -> None:
    store = SpecStore(StatePaths(tmp_path / "never-made"))
    with pytest.raises(NotFound):
        store.update("0123456789ab", lambda s: s)
    assert not (tmp_path / "never-made").exists()


def test_read_unknown_id_is_not_found_with_hint(store: SpecStore) -> None:
    with pytest.raises(NotFound) as info:
        store.read("abcdefabcdef")
    err = info.value
    assert err.exit_code == 3
    assert "abcdefabcdef" in err.message
    assert err.hint
    assert "vq list" in err.hint


@pytest.mark.parametrize(
    "bad_id",
    ["", "xyz", "0123456789AB", "0123456789a", "0123456789abc", "../../etc/pa", "0123456789a/"],
)
def test_invalid_id_is_invalid_input(store: SpecStore, bad_id: str) -> None:
    for call in (
        lambda: store.read(bad_id),
        lambda: store.path(bad_id),
        lambda: store.exists(bad_id),
        lambda: store.update(bad_id, lambda s: s),
    ):
        with pytest.raises(InvalidInput) as info:
            call()
        assert info.value.exit_code == 4
        assert info.value.hint
    with pytest.raises(InvalidInput), store.locked(bad_id):
        pass
    assert os.listdir(store.paths.queue_dir) == []  # no stray lock or spec files


def test_id_with_trailing_newline_is_invalid_input(store: SpecStore) -> None:
    with pytest.raises(InvalidInput):
        store.path("0123456789ab\n")


def test_read_refuses_file_holding_another_id(store: SpecStore) -> None:
    path = store.paths.spec("0123456789ab")
    path.write_bytes(encode_spec(make_spec("bbbbbbbbbbbb")))
    with pytest.raises(CorruptSpec, match="bbbbbbbbbbbb"):
        store.read("0123456789ab")


def test_read_of_v1_file_loads(store: SpecStore) -> None:
    raw = {"id": "0123456789ab", "submitted_at": "2023-01-01T00:00:00", "command": ["x"]}
    raw |= {"cpus": 1, "state": "running"}
    path = store.paths.spec("0123456789ab")
    path.write_text(json.dumps(raw))
    before = snapshot(path)
    spec = store.read("0123456789ab")
    assert spec.state is JobState.RUNNING
    assert spec.spec_version == 2
    assert snapshot(path) == before  # reading never rewrites


# --- scan and quarantine ----------------------------------------------------------------
BAD_FILES: dict[str, tuple[bytes, str]] = {
    "aaaaaaaaaaa1": (encode_spec(make_spec("aaaaaaaaaaa1"))[:40], "corrupt-spec"),  # truncated
    "aaaaaaaaaaa2": (b"\x00\x01garbage\xff\xfe", "corrupt-spec"),
    "aaaaaaaaaaa3": (
        json.dumps(
            {**json.loads(encode_spec(make_spec("aaaaaaaaaaa3"))), "spec_version": 3}
        ).encode(),
        "unsupported-spec-version",
    ),
    "aaaaaaaaaaa4": (b"", "corrupt-spec"),  # empty
    "aaaaaaaaaaa5": (b"[1, 2, 3]", "corrupt-spec"),  # not an object
    "aaaaaaaaaaa6": (encode_spec(make_spec("cccccccccccc")), "corrupt-spec"),  # wrong id
    "aaaaaaaaaaa7": (
        encode_spec(make_spec("aaaaaaaaaaa7")).replace(b'"cpus": 1', b'"cpus": 0'),
        "corrupt-spec",
    ),
}


def test_scan_quarantines_bad_files_without_touching_them(store: SpecStore) -> None:
    good = {
        job_id: make_spec(job_id, job_name=job_id) for job_id in ("111111111111", "222222222222")
    }
    for spec in good.values():
        store.create(spec)
    queue = store.paths.queue_dir
    for job_id, (data, _) in BAD_FILES.items():
        (queue / f"{job_id}.json").write_bytes(data)
    oversized = "bbbbbbbbbbbb"
    (queue / f"{oversized}.json").write_bytes(b" " * (MAX_SPEC_BYTES + 1))
    # Files scan must ignore entirely.
    (queue / "not-a-job.json").write_text("{}")
    (queue / "README").write_text("hello")
    (queue / ".vq-daemon.lock").write_text("")

    listing_before = sorted(os.listdir(queue))
    snaps = {name: snapshot(queue / name) for name in listing_before}

    result = store.scan()

    assert result.specs == good
    expected_bad = set(BAD_FILES) | {oversized}
    assert set(result.quarantined) == expected_bad
    for job_id, item in result.quarantined.items():
        assert item.name == job_id
        assert item.path == str(queue / f"{job_id}.json")
        assert item.reason
        expected_ref = BAD_FILES[job_id][1] if job_id in BAD_FILES else "corrupt-spec"
        assert item.reference == expected_ref, job_id
        assert item.as_dict() == {
            "name": job_id,
            "path": item.path,
            "reason": item.reason,
            "reference": item.reference,
        }
    assert "spec_version 3" in result.quarantined["aaaaaaaaaaa3"].reason
    assert "larger than" in result.quarantined[oversized].reason

    # Never modified, deleted or renamed; nothing added.
    assert sorted(os.listdir(queue)) == listing_before
    for name, snap in snaps.items():
        assert snapshot(queue / name) == snap, name

    # A second scan gives the same answer (quarantine is not a one-shot move).
    again = store.scan()
    assert set(again.quarantined) == expected_bad
    assert again.specs == good


def test_read_of_quarantined_file_raises_the_same_error(store: SpecStore) -> None:
    data, _ = BAD_FILES["aaaaaaaaaaa3"]
    store.paths.spec("aaaaaaaaaaa3").write_bytes(data)
    with pytest.raises(UnsupportedSpecVersion):
        store.read("aaaaaaaaaaa3")
    with pytest.raises(CorruptSpec):
        store.update("aaaaaaaaaaa3", lambda s: s)
    assert store.paths.spec("aaaaaaaaaaa3").read_bytes() == data


def test_scan_selected_ids_skips_missing(store: SpecStore) -> None:
    store.create(make_spec("111111111111"))
    store.create(make_spec("222222222222"))
    result = store.scan(["222222222222", "333333333333"])
    assert set(result.specs) == {"222222222222"}
    assert result.quarantined == {}


def test_scan_of_missing_queue_dir_is_empty(tmp_path: Path) -> None:
    store = SpecStore(StatePaths(tmp_path / "nowhere"))
    assert store.list_ids() == []
    result = store.scan()
    assert result.specs == {}
    assert result.quarantined == {}


def test_scan_quarantines_a_directory_named_like_a_spec(store: SpecStore) -> None:
    store.create(make_spec("111111111111"))
    (store.paths.queue_dir / "222222222222.json").mkdir()
    result = store.scan()
    assert set(result.specs) == {"111111111111"}
    assert set(result.quarantined) == {"222222222222"}


def test_scan_quarantines_deeply_nested_json(store: SpecStore) -> None:
    store.create(make_spec("111111111111"))
    store.paths.spec("222222222222").write_bytes(b"[" * 100_000)
    result = store.scan()
    assert set(result.specs) == {"111111111111"}
    assert set(result.quarantined) == {"222222222222"}


# --- atomic writes ----------------------------------------------------------------------
def test_writes_leave_no_temp_files(store: SpecStore) -> None:
    for n in range(5):
        store.create(make_spec(f"{n:012x}"))
    for n in range(5):
        for k in range(4):
            store.update(f"{n:012x}", lambda s, k=k: s.model_copy(update={"retry_count": k}))
    names = os.listdir(store.paths.queue_dir)
    assert temp_files(store.paths.queue_dir) == []
    assert not [n for n in names if n.endswith(".tmp")]
    assert sorted(n for n in names if n.endswith(".json")) == [f"{n:012x}.json" for n in range(5)]


def test_failed_atomic_write_removes_its_temp_file(tmp_path: Path) -> None:
    # os.replace onto a non-empty directory fails after the temp file was written.
    target = tmp_path / "target.json"
    target.mkdir()
    (target / "keep").write_text("x")
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"{}")
    assert temp_files(tmp_path) == []
    assert sorted(os.listdir(tmp_path)) == ["target.json"]
    assert (target / "keep").read_text() == "x"


def test_atomic_write_replaces_and_sets_mode(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(b"old")
    atomic_write_bytes(path, b"new", mode=0o600)
    assert path.read_bytes() == b"new"
    assert path.stat().st_mode & 0o777 == 0o600
    assert temp_files(tmp_path) == []


def test_spec_file_is_never_observed_torn(store: SpecStore) -> None:
    job_id = "0123456789ab"
    store.create(make_spec(job_id, job_name="v0"))
    path = store.path(job_id)
    writes = 300
    done = threading.Event()
    errors: list[str] = []

    def writer() -> None:
        try:
            for i in range(1, writes + 1):
                # Vary the size a lot so a torn read could not parse by luck.
                name = "x" * ((i * 37) % 3000) + f"v{i}"

                def mutate(spec: JobSpec, i: int = i, name: str = name) -> JobSpec:
                    spec.job_name = name
                    spec.retry_count = i
                    return spec

                store.update(job_id, mutate)
        except Exception as exc:  # surfaced below
            errors.append(f"writer: {exc!r}")
        finally:
            done.set()

    reads = 0
    seen_versions: set[int] = set()
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while not done.is_set() or reads < 300:
            data = path.read_bytes()
            spec = load_spec(data)  # raises on a torn or empty file
            assert spec.job_name is not None
            assert spec.job_name.endswith(f"v{spec.retry_count}")  # one coherent version
            seen_versions.add(spec.retry_count)
            reads += 1
            time.sleep(0)  # yield the GIL so the writer is not starved
    finally:
        thread.join(60)
    assert errors == []
    assert reads >= 300
    assert store.read(job_id).retry_count == writes
    assert len(seen_versions) > 1  # the reader really overlapped the writer
    assert temp_files(store.paths.queue_dir) == []


# --- the flock serializes read-modify-write ---------------------------------------------
def _increment(spec: JobSpec) -> JobSpec:
    spec.retry_count += 1
    return spec


def test_threads_do_not_lose_updates(store: SpecStore) -> None:
    job_id = "0123456789ab"
    store.create(make_spec(job_id))
    threads_n, per_thread = 8, 50
    barrier = threading.Barrier(threads_n)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            for _ in range(per_thread):
                store.update(job_id, _increment)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert store.read(job_id).retry_count == threads_n * per_thread == 400
    assert temp_files(store.paths.queue_dir) == []


_CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from vq.paths import StatePaths
    from vq.store.specs import SpecStore

    root, job_id, go, count = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    store = SpecStore(StatePaths(Path(root)))
    deadline = time.monotonic() + 30
    while not go.exists():
        if time.monotonic() > deadline:
            sys.exit("start signal never came")
        time.sleep(0.005)

    def mutate(spec):
        spec.retry_count += 1
        return spec

    for _ in range(count):
        store.update(job_id, mutate)
    """
)


def test_processes_do_not_lose_updates(store: SpecStore, tmp_path: Path) -> None:
    job_id = "0123456789ab"
    store.create(make_spec(job_id))
    go = tmp_path / "go"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(store.paths.root), job_id, str(go), "25"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(4)
    ]
    try:
        time.sleep(0.2)  # let the children import; they spin on the start file
        go.touch()
        results = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err.decode(errors="replace")
    assert store.read(job_id).retry_count == 100
    assert temp_files(store.paths.queue_dir) == []


def test_scan_quarantines_special_files_and_links_without_blocking(
    store: SpecStore, tmp_path: Path
) -> None:
    """A FIFO (no writer), a directory or a symlink named like a spec is quarantined at
    once: never waited on, never followed, never removed."""
    queue = store.paths.queue_dir
    os.mkfifo(queue / "aaaaaaaaaaa7.json")
    (queue / "aaaaaaaaaaa8.json").mkdir()
    target = tmp_path / "elsewhere.json"
    target.write_bytes(encode_spec(make_spec("aaaaaaaaaaa9")))
    (queue / "aaaaaaaaaaa9.json").symlink_to(target)
    store.create(make_spec("111111111111"))
    started = time.monotonic()
    result = store.scan()
    assert time.monotonic() - started < 5
    assert set(result.specs) == {"111111111111"}
    assert set(result.quarantined) == {"aaaaaaaaaaa7", "aaaaaaaaaaa8", "aaaaaaaaaaa9"}
    assert "FIFO" in result.quarantined["aaaaaaaaaaa7"].reason
    assert "directory" in result.quarantined["aaaaaaaaaaa8"].reason
    assert (queue / "aaaaaaaaaaa7.json").exists() and (queue / "aaaaaaaaaaa9.json").is_symlink()
