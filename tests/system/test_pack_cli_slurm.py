"""`vq pack` on the testbed's real Slurm 22.05 over real sshd: submit, inspect, reconcile.

The profile's target is ``[hosts.cluster]`` (a Slurm lane, user ``vqtest``). Every verb
is the real ``vq`` CLI in a subprocess; Slurm's own view is read with ``sacct`` on the same
host. The testbed node has 2 CPUs, so allocations hold at most 2 one-CPU tasks. Needs root
(the testbed); skipped on a developer machine without it and FAILS under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VQ_BIN, Vq, wait_until
from tests.system.slurm_lane import (
    pack_profile_tables,
    sacct_ids,
    slurm_testbed,  # noqa: F401 - the fixture
    toml_table,
    write_config,
)
from tests.system.slurm_lane import ssh_local as _ssh
from tests.testbed import SshTestbed

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def private_runtime() -> Iterator[str]:
    """A short XDG_RUNTIME_DIR of the test's own: its ssh control sockets are not shared."""
    path = tempfile.mkdtemp(prefix="vqr", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _configure(vq: Vq, testbed: SshTestbed, root: str, *, gated: bool = False) -> None:
    options = ["-F", str(testbed.ssh_config)]
    if gated:  # a host that never answers: sbatch is never reached
        options += ["-o", "ProxyCommand=sleep 600"]
    cluster = {
        "ssh": "vq-local",
        "ssh_options": options,
        "scheduler_dialect": "slurm",
        "scratch_root": f"{root}/scratch",
    }
    tables = [toml_table("hosts.cluster", cluster), pack_profile_tables(root)]
    write_config(vq, 'default_packing = "tb"\n', *tables)


def _tasks(path: Path, tasks: list[tuple[str, list[str]]]) -> Path:
    path.write_text(
        "".join(
            json.dumps({"key": key, "args": args, "stdin_file": None}) + "\n" for key, args in tasks
        )
    )
    return path


def _pack(vq: Vq, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((vq.root / "packs" / name / "pack.json").read_text())
    return data


def _inspect_until_quiescent(vq: Vq, name: str, timeout: float = 150) -> dict[str, Any]:
    def quiescent() -> dict[str, Any] | None:
        view: dict[str, Any] = vq.json("pack", "inspect", name)
        return view if view["quiescent"] else None

    result: dict[str, Any] = wait_until(quiescent, timeout, interval=2.0)
    return result


def _jobs_named(testbed: SshTestbed, alloc: str) -> list[str]:
    return sacct_ids(testbed, f"vqp-{alloc}")


def test_submit_inspect_retry_log_record(
    vq: Vq,
    tmp_path: Path,
    slurm_testbed: SshTestbed,  # noqa: F811 - the fixture
    remote_root: str,
) -> None:
    _configure(vq, slurm_testbed, remote_root)
    tasks = _tasks(
        tmp_path / "tasks.jsonl",
        [
            ("a", ["sh", "-c", "echo out-a"]),
            ("b", ["sh", "-c", "echo out-b; exit 3"]),
            ("c", ["true"]),
        ],
    )
    vq.run("pack", "open", "sweep", str(tasks))
    vq.run("pack", "seal", "sweep")
    plan = vq.json("pack", "plan", "sweep", "--output", str(tmp_path / "plan.json"))
    assert [a["tasks"] for a in plan["allocations"]] == [2, 1]
    shapes = vq.json("pack", "validate", "sweep", str(tmp_path / "plan.json"))["shapes"]
    assert len(shapes) == 2 and all(s["partition"] == "debug" for s in shapes)
    assert _pack(vq, "sweep")["attempts"] == []  # validate changes nothing

    sent = vq.json("pack", "submit", "sweep", str(tmp_path / "plan.json"))["allocations"]
    assert [item["action"] for item in sent] == ["submitted", "submitted"]
    # submitted twice: the receipts are reported, nothing is sent again
    again = vq.json("pack", "submit", "sweep", str(tmp_path / "plan.json"))["allocations"]
    assert [item["action"] for item in again] == ["already", "already"]
    assert [a["job_id"] for a in again] == [a["job_id"] for a in sent]

    view = _inspect_until_quiescent(vq, "sweep")
    states = {task["key"]: (task["state"], task["exit_code"]) for task in view["tasks"]}
    assert states == {"a": ("SUCCEEDED", 0), "b": ("FAILED", 3), "c": ("SUCCEEDED", 0)}
    assert [a["state"] for a in view["attempts"]] == ["FAILED", "SUCCEEDED"]
    assert view["results_ready"] is False
    for item in sent:
        assert _jobs_named(slurm_testbed, item["allocation_id"]) == [item["job_id"]]

    first = sent[0]["allocation_id"]
    log = vq.run("pack", "log", "sweep", first, "--task", "b", "--bytes", "1048576")
    assert log.stdout == "out-b\n"
    one = vq.json("pack", "log", "sweep", first, "--task", "b", "--bytes", "1")
    assert (one["bytes"], one["truncated"], one["data_base64"]) == (1, True, "Cg==")
    bad = vq.run("pack", "log", "sweep", first, "--bytes", "0", check=False)
    assert bad.returncode == 4 and "hint:" in bad.stderr
    other = vq.run("pack", "log", "sweep", first, "--task", "c", check=False)
    assert other.returncode == 3, other.stderr  # c ran in the other allocation
    _ssh(slurm_testbed, "rm", f"{remote_root}/logs/{first}-{sent[0]['job_id']}-0.out")
    gone = vq.run("pack", "log", "sweep", first, "--task", "a", check=False)
    assert gone.returncode == 3 and "does not exist" in gone.stderr

    record = json.loads(vq.run("pack", "record", "sweep").stdout)
    assert record["schema"] == "vq.pack-record/1"
    text = json.dumps(record)
    assert "out-b" not in text and "--partition" not in text and remote_root not in text, text
    assert [a["job_id"] for a in record["attempts"]] == [a["job_id"] for a in sent]

    # b failed: it is planned only with --retry, in a new allocation, and then completes
    held = vq.json("pack", "plan", "sweep", "--output", str(tmp_path / "held.json"))
    assert held["selection"]["selected"] == []
    assert {w["key"] for w in held["selection"]["withheld"]} == {"b"}
    retry = vq.json(
        "pack", "plan", "sweep", "--output", str(tmp_path / "retry.json"), "--retry", "b"
    )
    assert retry["selection"]["selected"] == ["b"]
    assert sorted(retry["selection"]["skipped"]) == ["a", "c"]
    vq.run("pack", "submit", "sweep", str(tmp_path / "retry.json"))
    view = _inspect_until_quiescent(vq, "sweep")
    assert {t["key"]: t["state"] for t in view["tasks"]}["b"] == "FAILED"  # still exits 3
    assert len(view["attempts"]) == 3


def _submit_and_kill_after_intent(vq: Vq, name: str, plan: Path) -> dict[str, Any]:
    errors = plan.parent / "submit.err"
    with open(errors, "wb") as stderr:
        proc = subprocess.Popen(
            [VQ_BIN, "pack", "submit", name, str(plan)],
            env=vq.env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:

        def intent() -> bool:
            assert proc.poll() is None, errors.read_text()  # still waiting for sbatch
            return bool(_pack(vq, name)["attempts"])

        wait_until(intent, timeout=60, interval=0.1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    (attempt,) = _pack(vq, name)["attempts"]
    return attempt


def _script(vq: Vq, name: str, tmp_path: Path) -> bytes:
    """The allocation's complete script, as `plan --show-scripts` prints it."""
    out = vq.run(
        "pack", "plan", name, "--output", str(tmp_path / "again.json"), "--show-scripts"
    ).stdout
    body = out.split("### allocation ", 1)[1].split("\n", 1)[1]
    return body.split("plan ", 1)[0].encode()


def test_many_allocations_are_sent_in_windows_each_exactly_once(
    vq: Vq,
    tmp_path: Path,
    slurm_testbed: SshTestbed,  # noqa: F811 - the fixture
    remote_root: str,
    private_runtime: str,
) -> None:
    """Eight one-task allocations (the profile's most per submit): the first alone, then
    windows of concurrent sbatch calls over one fresh SSH connection; every allocation
    gets one job and its receipt."""
    vq.env["XDG_RUNTIME_DIR"] = private_runtime  # its own master, made by the first call
    _configure(vq, slurm_testbed, remote_root)
    keys = [f"k{n}" for n in range(8)]
    vq.run("pack", "open", "wide", str(_tasks(tmp_path / "t.jsonl", [(k, ["true"]) for k in keys])))
    plan_path = str(tmp_path / "plan.json")
    vq.run("pack", "plan", "wide", "--output", plan_path, "--tasks-per-allocation", "1")
    sent = vq.json("pack", "submit", "wide", plan_path)["allocations"]
    plan = json.loads(Path(plan_path).read_text())
    assert [item["allocation_id"] for item in sent] == [
        a["allocation_id"] for a in plan["allocations"]
    ]
    assert {item["action"] for item in sent} == {"submitted"}
    assert len({item["job_id"] for item in sent}) == 8
    recorded = [
        (a["allocation_id"], a["outcome"], a["job_id"]) for a in _pack(vq, "wide")["attempts"]
    ]
    assert recorded == [(i["allocation_id"], "accepted", i["job_id"]) for i in sent]
    view = _inspect_until_quiescent(vq, "wide")
    assert [t["state"] for t in view["tasks"]] == ["SUCCEEDED"] * 8
    for item in sent:  # Slurm has exactly the one job of each allocation
        assert _jobs_named(slurm_testbed, item["allocation_id"]) == [item["job_id"]]


def test_kill_between_intent_and_receipt(
    vq: Vq,
    tmp_path: Path,
    slurm_testbed: SshTestbed,  # noqa: F811 - the fixture
    remote_root: str,
    private_runtime: str,
) -> None:
    """A submit killed after its intent: unknown, never resubmitted; reconcile adopts the
    one job Slurm has of that identity, never a same-name job under another comment."""
    vq.env["XDG_RUNTIME_DIR"] = private_runtime  # no shared ssh master
    _configure(vq, slurm_testbed, remote_root, gated=True)
    tasks = _tasks(tmp_path / "tasks.jsonl", [("x", ["true"]), ("y", ["true"])])
    vq.run("pack", "open", "chaos", str(tasks))
    vq.run("pack", "plan", "chaos", "--output", str(tmp_path / "plan.json"))
    script = _script(vq, "chaos", tmp_path)
    attempt = _submit_and_kill_after_intent(vq, "chaos", tmp_path / "plan.json")
    alloc = attempt["allocation_id"]
    assert attempt["outcome"] == "intent" and attempt["job_id"] is None
    assert attempt["intent"]["sbatch_command"][3:5] == ["sbatch", "--parsable"]

    again = vq.run("pack", "submit", "chaos", str(tmp_path / "plan.json"), check=False)
    assert again.returncode == 12 and f"vq pack reconcile chaos {alloc}" in again.stderr
    withheld = vq.json("pack", "plan", "chaos", "--output", str(tmp_path / "w.json"))
    assert withheld["selection"]["selected"] == []

    _configure(vq, slurm_testbed, remote_root)  # the host answers again
    none = vq.run("pack", "reconcile", "chaos", alloc, check=False)
    assert none.returncode == 3 and "--not-submitted" in none.stderr
    # A same-name job under another comment is someone else's: nothing is adopted.
    # (This testbed's accounting stores no comments; the queue shows the foreign one.)
    _ssh(slurm_testbed, "mkdir", "-p", f"{remote_root}/logs", f"{remote_root}/work")
    foreign = _ssh(
        slurm_testbed,
        "sbatch",
        "--parsable",
        f"--job-name=vqp-{alloc}",
        "--comment=someone-else",
        "--partition=debug",
        "--output=/dev/null",
        "'--wrap=sleep 120'",  # one word for the remote shell
    ).strip()
    try:
        real = _reconcile_beside_foreign_job(vq, slurm_testbed, alloc, script)
        assert real != foreign
    finally:
        _ssh(slurm_testbed, "scancel", foreign)
    twice = vq.run("pack", "resolve", "chaos", alloc, "--not-submitted", check=False)
    assert twice.returncode == 6  # never both accepted and not submitted
    sent = vq.json("pack", "submit", "chaos", str(tmp_path / "plan.json"))["allocations"]
    assert sent == [{"allocation_id": alloc, "job_id": real, "action": "already"}]
    view = _inspect_until_quiescent(vq, "chaos")
    assert [t["state"] for t in view["tasks"]] == ["SUCCEEDED", "SUCCEEDED"]
    assert view["attempts"][0]["unattributed_jobs"] == [foreign]
    assert sorted(_jobs_named(slurm_testbed, alloc)) == sorted([foreign, real])


def _reconcile_beside_foreign_job(vq: Vq, testbed: SshTestbed, alloc: str, script: bytes) -> str:
    """Reconcile refuses the foreign job alone, then adopts the real script's job."""
    wait_until(lambda: _jobs_named(testbed, alloc), timeout=60)
    assert vq.run("pack", "reconcile", "chaos", alloc, check=False).returncode == 3
    # Slurm accepted the real script before the receipt was lost.
    done = subprocess.run(
        ["ssh", "-F", str(testbed.ssh_config), "vq-local", "--", "sbatch", "--parsable"],
        input=script,
        capture_output=True,
        timeout=60,
        check=True,
    )
    real = done.stdout.decode().strip()

    def adopted() -> str | None:
        answer = vq.run("pack", "reconcile", "chaos", alloc, "--json", check=False)
        return answer.stdout or None

    assert json.loads(wait_until(adopted, timeout=60, interval=1.0))["job_id"] == real
    return real


def test_kill_before_sbatch_then_not_submitted_and_replanned(
    vq: Vq,
    tmp_path: Path,
    slurm_testbed: SshTestbed,  # noqa: F811 - the fixture
    remote_root: str,
    private_runtime: str,
) -> None:
    vq.env["XDG_RUNTIME_DIR"] = private_runtime  # no shared ssh master
    _configure(vq, slurm_testbed, remote_root, gated=True)
    tasks = _tasks(tmp_path / "tasks.jsonl", [("x", ["true"])])
    vq.run("pack", "open", "lost", str(tasks))
    vq.run("pack", "plan", "lost", "--output", str(tmp_path / "plan.json"))
    alloc = _submit_and_kill_after_intent(vq, "lost", tmp_path / "plan.json")["allocation_id"]
    _configure(vq, slurm_testbed, remote_root)
    both = vq.run("pack", "resolve", "lost", alloc, "--not-submitted", "--job-id", "7", check=False)
    assert both.returncode == 4 and "hint:" in both.stderr
    vq.run("pack", "resolve", "lost", alloc, "--not-submitted")
    assert _pack(vq, "lost")["attempts"][0]["outcome"] == "not_submitted"
    assert vq.run("pack", "reconcile", "lost", alloc, check=False).returncode == 6
    replanned = vq.json("pack", "plan", "lost", "--output", str(tmp_path / "new.json"))
    assert replanned["selection"]["selected"] == ["x"]
    assert replanned["allocations"][0]["allocation_id"] != alloc
    vq.run("pack", "submit", "lost", str(tmp_path / "new.json"))
    view = _inspect_until_quiescent(vq, "lost")
    assert view["tasks"][0]["state"] == "SUCCEEDED"
    assert _jobs_named(slurm_testbed, alloc) == []


def test_append_while_executing(
    vq: Vq,
    tmp_path: Path,
    slurm_testbed: SshTestbed,  # noqa: F811 - the fixture
    remote_root: str,
) -> None:
    """An open pack grows while its first allocation runs: the old plan is stale, the new
    one holds only the new task (the running ones are withheld), and after the seal only
    the exact roster is accepted."""
    _configure(vq, slurm_testbed, remote_root)
    go = Path(remote_root) / "go"  # the first tasks run until the test has planned again
    hold = ["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.2; done"]
    first = [("r1", hold), ("r2", hold)]
    vq.run("pack", "open", "grow", str(_tasks(tmp_path / "v1.jsonl", first)))
    vq.run("pack", "plan", "grow", "--output", str(tmp_path / "v1.plan.json"))
    vq.run("pack", "submit", "grow", str(tmp_path / "v1.plan.json"))

    def running() -> bool:
        view = vq.json("pack", "inspect", "grow")
        return bool(view["attempts"][0]["state"] == "RUNNING")

    wait_until(running, timeout=60, interval=1.0)
    grown = _tasks(tmp_path / "v2.jsonl", [*first, ("n3", ["true"])])
    assert vq.json("pack", "open", "grow", str(grown))["action"] == "appended"
    stale = vq.run("pack", "submit", "grow", str(tmp_path / "v1.plan.json"), check=False)
    assert stale.returncode == 6 and "stale" in stale.stderr and "hint:" in stale.stderr
    plan = vq.json("pack", "plan", "grow", "--output", str(tmp_path / "v2.plan.json"))
    assert plan["selection"]["selected"] == ["n3"]
    assert {w["key"]: w["reason"].split(":")[0] for w in plan["selection"]["withheld"]} == {
        "r1": "active",
        "r2": "active",
    }
    go.touch()
    vq.run("pack", "submit", "grow", str(tmp_path / "v2.plan.json"))
    vq.run("pack", "seal", "grow")
    view = _inspect_until_quiescent(vq, "grow")
    assert [t["state"] for t in view["tasks"]] == ["SUCCEEDED"] * 3
    assert view["results_ready"] is True
    suffix = _tasks(tmp_path / "suffix.jsonl", [("n4", ["true"])])
    assert vq.run("pack", "open", "grow", str(suffix), check=False).returncode == 6
    more = _tasks(tmp_path / "v3.jsonl", [*first, ("n3", ["true"]), ("n4", ["true"])])
    refused = vq.run("pack", "open", "grow", str(more), check=False)
    assert refused.returncode == 6 and "sealed" in refused.stderr
