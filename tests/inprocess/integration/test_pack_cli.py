"""``vq pack`` through the real CLI on a temp state root: open, append, refusals, seal."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.conftest import Vq


def _tasks(directory: Path, keys: list[str], *, name: str = "tasks.jsonl") -> Path:
    (directory / "in").mkdir(exist_ok=True)
    lines = []
    for key in keys:
        (directory / "in" / key).write_bytes(f"payload {key}\n".encode() + b"\x00\xff")
        lines.append(json.dumps({"key": key, "args": ["run", key], "stdin_file": f"in/{key}"}))
    path = directory / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _pack(vq: Vq, name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((vq.root / "packs" / name / "pack.json").read_bytes())
    return data


def test_open_append_noop_refusals_and_seal(vq: Vq, tmp_path: Path) -> None:
    first = _tasks(tmp_path, ["t0", "t1"])
    created = vq.json("pack", "open", "sweep", str(first))
    assert created == {
        "name": "sweep",
        "action": "created",
        "revision": 1,
        "tasks": 2,
        "added": 2,
        "sealed": False,
    }
    pack_file = vq.root / "packs" / "sweep" / "pack.json"
    assert stat.S_IMODE(pack_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(pack_file.parent.stat().st_mode) == 0o700
    stored = _pack(vq, "sweep")
    assert stored["schema"] == "vq.pack/1"
    before = pack_file.read_bytes()

    assert vq.json("pack", "open", "sweep", str(first))["action"] == "unchanged"
    assert pack_file.read_bytes() == before

    grown = _tasks(tmp_path, ["t0", "t1", "t2"], name="grown.jsonl")
    appended = vq.json("pack", "open", "sweep", str(grown))
    assert (appended["action"], appended["revision"], appended["added"]) == ("appended", 2, 1)

    after_append = pack_file.read_bytes()
    for keys in (["t2"], ["t1", "t0", "t2"], ["t0", "t1"], ["t0", "tX", "t2"]):
        bad = _tasks(tmp_path, keys, name="bad.jsonl")
        proc = vq.run("pack", "open", "sweep", str(bad), check=False)
        assert proc.returncode == 6, (keys, proc.stderr)
        assert proc.stderr.startswith("vq: error: ") and "\nhint: " in proc.stderr
        assert pack_file.read_bytes() == after_append

    # changed stdin bytes under the same key is a change, not the same roster
    (tmp_path / "in" / "t1").write_bytes(b"different")
    proc = vq.run("pack", "open", "sweep", str(grown), check=False)
    assert proc.returncode == 6
    (tmp_path / "in" / "t1").write_bytes(b"payload t1\n\x00\xff")

    sealed = vq.json("pack", "seal", "sweep")
    assert (sealed["changed"], sealed["revision"]) == (True, 3)
    again = vq.json("pack", "seal", "sweep")
    assert (again["changed"], again["revision"]) == (False, 3)
    assert vq.json("pack", "open", "sweep", str(grown))["action"] == "unchanged"
    more = _tasks(tmp_path, ["t0", "t1", "t2", "t3"], name="more.jsonl")
    assert vq.run("pack", "open", "sweep", str(more), check=False).returncode == 6
    shown = vq.json("pack", "show", "sweep")
    assert shown["tasks"] == ["t0", "t1", "t2"] and shown["sealed"] is True
    assert "payload" not in json.dumps(shown)


def test_bad_inputs_change_nothing(vq: Vq, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "a", "args": ["p"]}\n')
    proc = vq.run("pack", "open", "sweep", str(bad), check=False)
    assert proc.returncode == 4 and "line 1" in proc.stderr and "Traceback" not in proc.stderr
    assert not (vq.root / "packs" / "sweep" / "pack.json").exists()
    missing_stdin = tmp_path / "m.jsonl"
    missing_stdin.write_text('{"key": "a", "args": ["p"], "stdin_file": "nope"}\n')
    assert vq.run("pack", "open", "sweep", str(missing_stdin), check=False).returncode == 3
    assert vq.run("pack", "open", "../x", str(bad), check=False).returncode == 4
    assert vq.run("pack", "seal", "nosuch", check=False).returncode == 3
    (tmp_path / "target").write_text("secret")
    os.symlink(tmp_path / "target", tmp_path / "link")
    linked = tmp_path / "l.jsonl"
    linked.write_text('{"key": "a", "args": ["p"], "stdin_file": "link"}\n')
    assert vq.run("pack", "open", "sweep", str(linked), check=False).returncode == 4


def test_a_damaged_pack_file_is_refused_on_read(vq: Vq, tmp_path: Path) -> None:
    vq.run("pack", "open", "sweep", str(_tasks(tmp_path, ["t0"])))
    pack_file = vq.root / "packs" / "sweep" / "pack.json"
    data = json.loads(pack_file.read_bytes())
    data["tasks"][0]["args"] = ["changed"]
    data["tasks"][0]["stdin_sha256"] = "0" * 64
    pack_file.write_text(json.dumps(data))
    proc = vq.run("pack", "show", "sweep", check=False)
    assert proc.returncode == 7 and "not a valid pack file" in proc.stderr


@pytest.mark.parametrize("shape", ["symlink", "fifo"])
def test_a_planted_pack_file_is_refused_in_one_line_and_left_in_place(
    vq: Vq, tmp_path: Path, shape: str
) -> None:
    """A link or FIFO where pack.json belongs: every verb answers exit 7 in vq's words
    within its deadline (a FIFO is never waited on); nothing follows, replaces or removes it."""
    vq.run("pack", "open", "sweep", str(_tasks(tmp_path, ["t0"])))
    pack_file = vq.root / "packs" / "sweep" / "pack.json"
    kept = tmp_path / "kept.json"
    os.rename(pack_file, kept)
    if shape == "symlink":
        pack_file.symlink_to(kept)
    else:
        os.mkfifo(pack_file, 0o600)
    planted = pack_file.lstat()
    for args in (
        ("pack", "show", "sweep"),
        ("pack", "seal", "sweep"),
        ("pack", "open", "sweep", str(tmp_path / "tasks.jsonl")),
    ):
        proc = vq.run(*args, check=False, timeout=30)
        assert proc.returncode == 7, (args, proc.stderr)
        assert proc.stderr.startswith("vq: error: ") and "hint: " in proc.stderr, proc.stderr
        assert "cannot be read" in proc.stderr and "Traceback" not in proc.stderr
    now = pack_file.lstat()
    assert (now.st_ino, stat.S_IFMT(now.st_mode)) == (planted.st_ino, stat.S_IFMT(planted.st_mode))
    assert json.loads(kept.read_bytes())["name"] == "sweep"


PROFILE = """\
default_packing = "cpu"

[packing.cpu.target]
host = "cluster-a"
work_root = "/cluster/work/sweep"
log_root = "/cluster/logs/sweep"
partitions = ["normal"]
max_tasks_per_allocation = 4
max_cpus_per_allocation = 8
max_memory_mib_per_allocation = 8192
max_gpus_per_allocation = 0
max_time_limit = "04:00:00"
max_allocations_per_submit = 8
max_script_bytes = 65536

[packing.cpu.resources]
cpus_per_task = 1
memory_mib_per_task = 512
gpus_per_task = 0
time_limit = "00:10:30"
"""


def _configure(vq: Vq, text: str = PROFILE) -> None:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(text)


def test_plan_writes_an_owner_only_plan_that_reloads_byte_identical(vq: Vq, tmp_path: Path) -> None:
    from vq.packing.cases.plans import load_plan
    from vq.paths import StatePaths

    _configure(vq)
    vq.run("pack", "open", "sweep", str(_tasks(tmp_path, [f"t{n}" for n in range(10)])))
    plan_path = tmp_path / "plan.json"
    shown = vq.json("pack", "plan", "sweep", "--output", str(plan_path))
    assert stat.S_IMODE(plan_path.stat().st_mode) == 0o600
    assert [a["tasks"] for a in shown["allocations"]] == [4, 3, 3]
    data = plan_path.read_bytes()
    assert b'"run"' not in data and b"payload" not in data  # no args, no stdin
    assert json.loads(data)["plan_sha256"] == shown["plan_sha256"]

    paths = StatePaths(vq.root)
    assert load_plan(paths, plan_path).data == data
    again = tmp_path / "again.json"
    vq.run("pack", "plan", "sweep", "--output", str(again))
    assert again.read_bytes() == data  # two plans of one view are byte-identical

    proc = vq.run("pack", "plan", "sweep", "--output", str(plan_path), check=False)
    assert proc.returncode == 6 and plan_path.read_bytes() == data  # never over a path

    altered = tmp_path / "altered.json"
    altered.write_bytes(data.replace(b'"cpus": 4', b'"cpus": 3', 1))
    from vq.errors import Conflict, InvalidInput

    with pytest.raises(InvalidInput):
        load_plan(paths, altered)

    vq.run("pack", "seal", "sweep")
    with pytest.raises(Conflict, match="stale"):
        load_plan(paths, plan_path)


def test_plan_options_and_refusals(vq: Vq, tmp_path: Path) -> None:
    _configure(vq)
    vq.run("pack", "open", "sweep", str(_tasks(tmp_path, [f"t{n}" for n in range(6)])))
    small = vq.json(
        "pack",
        "plan",
        "sweep",
        "--output",
        str(tmp_path / "p2.json"),
        "--tasks-per-allocation",
        "2",
    )
    assert [a["tasks"] for a in small["allocations"]] == [2, 2, 2]
    proc = vq.run(
        "pack",
        "plan",
        "sweep",
        "--output",
        str(tmp_path / "p5.json"),
        "--tasks-per-allocation",
        "5",
        check=False,
    )
    assert proc.returncode == 4 and "above what one allocation" in proc.stderr
    assert not (tmp_path / "p5.json").exists()
    proc = vq.run(
        "pack",
        "plan",
        "sweep",
        "--output",
        str(tmp_path / "px.json"),
        "--profile",
        "gpu",
        check=False,
    )
    assert proc.returncode == 9 and "no such profile" in proc.stderr
    proc = vq.run(
        "pack",
        "plan",
        "sweep",
        "--output",
        str(tmp_path / "pr.json"),
        "--retry",
        "nope",
        check=False,
    )
    assert proc.returncode == 4
    scripts = vq.run(
        "pack", "plan", "sweep", "--output", str(tmp_path / "ps.json"), "--show-scripts"
    )
    assert "srun --exclusive --exact" in scripts.stdout and "'run' t0" not in scripts.stdout
    assert "run t0" in scripts.stdout
    assert "arguments and stdin" in scripts.stderr


def test_a_bad_profile_in_config_is_refused_with_its_line(vq: Vq, tmp_path: Path) -> None:
    _configure(
        vq, PROFILE.replace("max_tasks_per_allocation = 4", "max_tasks_per_allocation = true")
    )
    vq.run("pack", "open", "sweep", str(_tasks(tmp_path, ["t0"])))
    proc = vq.run("pack", "plan", "sweep", "--output", str(tmp_path / "p.json"), check=False)
    assert proc.returncode == 9
    assert "config.toml:8: packing.cpu.target.max_tasks_per_allocation" in proc.stderr
    assert "must be a whole number, not true or false" in proc.stderr


def test_tasks_piped_on_stdin_are_the_same_roster_as_the_file(vq: Vq, tmp_path: Path) -> None:
    """``-`` reads TASKS.jsonl from standard input, stdin_file relative to the working
    directory: the piped tasks register exactly what the file does (``unchanged``)."""
    import subprocess

    from tests.conftest import VQ_BIN

    tasks = _tasks(tmp_path, ["t0", "t1"])
    assert vq.json("pack", "open", "sweep", str(tasks))["action"] == "created"

    def piped(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [VQ_BIN, "pack", "open", "sweep", "-", *args],
            env=vq.env,
            cwd=tmp_path,
            input=tasks.read_text(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    again = piped("--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["action"] == "unchanged"

    (tmp_path / "in" / "t1").write_bytes(b"other bytes")  # read relative to the cwd
    changed = piped()
    assert changed.returncode == 6 and changed.stderr.startswith("vq: error: ")

    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    refused = vq.run("pack", "open", "sweep", str(fifo), check=False)
    assert refused.returncode == 4 and "pipe the tasks on stdin" in refused.stderr
