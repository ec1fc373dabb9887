"""Pack submission and inspection against a scripted login host (an injected Runner).

The runner answers like Slurm would, from canned text, and records every call; it also
checks, at the moment ``sbatch`` runs, that the intent is already on disk. The real-Slurm
end-to-end runs are in tests/system/test_pack_cli_slurm.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.packing_support import profile
from vq.errors import CommandTimeout, Conflict, OutcomeUnknown, ProtocolError
from vq.packing.cases.inspection import inspect_pack
from vq.packing.cases.plans import make_plan, write_plan
from vq.packing.cases.resolve import resolve_attempt
from vq.packing.cases.rosters import open_pack
from vq.packing.cases.submit import MAX_IN_FLIGHT, submit_plan
from vq.packing.roster import Task
from vq.paths import StatePaths
from vq.transport.runner import Argv, RunResult

Answer = Callable[[list[str], bytes | None], RunResult]


class ScriptedHost:
    """A Runner whose answers come from ``answers[program]``; calls are recorded."""

    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def run(
        self,
        argv: Argv,
        *,
        stdin: bytes | None = None,
        deadline_s: float = 30.0,
        max_output_bytes: int = 1 << 20,
    ) -> RunResult:
        words = [w if isinstance(w, str) else w.decode() for w in argv]
        self.calls.append(words)
        assert words[:3] == ["env", "LC_ALL=C", "TZ=UTC"]
        program = words[3]
        if program == "sh":  # the fixed scripts: submit (mkdir + sbatch), or the markers
            program = "sbatch" if "sbatch" in words else "markers"
        return self.answers[program](words, stdin)

    def open_stream(self, *args: object, **kwargs: object) -> object:
        raise NotImplementedError


def ok(stdout: str = "", stderr: str = "", rc: int = 0) -> Answer:
    return lambda argv, stdin: RunResult(rc, stdout.encode(), stderr.encode(), "login")


TASKS = [Task("a", ("true",)), Task("b", ("false",)), Task("c", ("true",))]


@pytest.fixture
def paths(tmp_path: Path) -> StatePaths:
    return StatePaths(tmp_path / "state")


def _plan(paths: StatePaths, tmp_path: Path, per: int = 2) -> Path:
    open_pack(paths, "p", TASKS)
    made = make_plan(paths, "p", profile(), tasks_per_allocation=per)
    return write_plan(tmp_path / f"plan-{len(list(tmp_path.iterdir()))}.json", made)


def _attempts(paths: StatePaths) -> list[dict[str, object]]:
    data = json.loads(paths.pack_file("p").read_bytes())
    attempts: list[dict[str, object]] = data["attempts"]
    return attempts


def test_intent_is_durable_before_sbatch_and_receipts_follow(
    paths: StatePaths, tmp_path: Path
) -> None:
    plan = _plan(paths, tmp_path)
    seen: list[str] = []

    def sbatch(argv: list[str], stdin: bytes | None) -> RunResult:
        attempts = _attempts(paths)
        seen.append(str(attempts[-1]["outcome"]))  # what the disk says while sbatch runs
        assert stdin is not None and stdin.startswith(b"#!/bin/bash\n")
        return RunResult(0, f"{100 + len(seen)};alpha\n".encode(), b"", "login")

    host = ScriptedHost({"sbatch": sbatch})
    reports: list[dict[str, object]] = []
    submit_plan(paths, "p", plan, lambda name: host, reports.append)
    assert seen == ["intent", "intent"]
    assert [(a["outcome"], a["job_id"], a["cluster"]) for a in _attempts(paths)] == [
        ("accepted", "101", "alpha"),
        ("accepted", "102", "alpha"),
    ]
    intent = _attempts(paths)[0]["intent"]
    assert isinstance(intent, dict) and intent["cpus"] == 2
    # the same plan again: reported, never sent again
    again: list[dict[str, object]] = []
    submit_plan(paths, "p", plan, lambda name: host, again.append)
    assert [r["action"] for r in again] == ["already", "already"] and len(seen) == 2


def test_a_lost_answer_stays_unknown_and_is_never_resent(paths: StatePaths, tmp_path: Path) -> None:
    plan = _plan(paths, tmp_path)

    def lost(argv: list[str], stdin: bytes | None) -> RunResult:
        raise CommandTimeout("on login: the command timed out after 30s")

    host = ScriptedHost({"sbatch": lost})
    with pytest.raises(OutcomeUnknown, match="is unknown") as raised:
        submit_plan(paths, "p", plan, lambda name: host, lambda item: None)
    assert raised.value.hint is not None and "vq pack reconcile p" in raised.value.hint
    assert [a["outcome"] for a in _attempts(paths)] == ["intent"]  # the second never started
    with pytest.raises(OutcomeUnknown):
        submit_plan(paths, "p", plan, lambda name: host, lambda item: None)
    assert len(host.calls) == 1
    alloc = str(_attempts(paths)[0]["allocation_id"])
    resolve_attempt(paths, "p", alloc, job_id=None, cluster=None, not_submitted=True)
    replanned = make_plan(paths, "p", profile(), tasks_per_allocation=2).document
    assert replanned["selection"]["selected"] == ["a", "b", "c"]


def test_an_sbatch_error_is_ambiguous_too(paths: StatePaths, tmp_path: Path) -> None:
    plan = _plan(paths, tmp_path)
    host = ScriptedHost({"sbatch": ok(stderr="sbatch: error: Socket timed out\n", rc=1)})
    with pytest.raises(OutcomeUnknown, match="exited 1"):
        submit_plan(paths, "p", plan, lambda name: host, lambda item: None)
    assert [a["outcome"] for a in _attempts(paths)] == ["intent"]


def _accepted(paths: StatePaths, tmp_path: Path) -> str:
    plan = _plan(paths, tmp_path, per=3)
    host = ScriptedHost({"sbatch": ok("77\n")})
    submit_plan(paths, "p", plan, lambda name: host, lambda item: None)
    return str(_attempts(paths)[0]["allocation_id"])


def _row(alloc: str, job: str = "77", comment: str | None = None, state: str = "COMPLETED") -> str:
    note = f"vq-pack:{alloc}" if comment is None else comment
    times = "2026-12-03T10:00:00|2026-12-03T10:00:01|2026-12-03T10:00:09"
    return f"{job}|vqp-{alloc}|{note}|{state}|0:0|{times}"


def test_inspect_reads_markers_and_accounting(paths: StatePaths, tmp_path: Path) -> None:
    alloc = _accepted(paths, tmp_path)
    host = ScriptedHost(
        {
            "squeue": ok(stderr="slurm_load_jobs error: Invalid job id specified\n", rc=1),
            "sacct": ok(
                _row(alloc, state="FAILED") + "\n" + _row(alloc, job="91", comment="") + "\n"
            ),
            "markers": ok("0|0\n1|1\n"),
        }
    )
    view = inspect_pack(paths, "p", lambda name: host).as_dict()
    assert [(t["key"], t["state"], t["exit_code"]) for t in view["tasks"]] == [
        ("a", "SUCCEEDED", 0),
        ("b", "FAILED", 1),
        ("c", "FAILED", None),  # no marker, and the allocation failed as a whole
    ]
    assert view["attempts"][0]["unattributed_jobs"] == ["91"]
    assert view["quiescent"] is True and view["results_ready"] is False


@pytest.mark.parametrize(
    "sacct",
    [
        "\n".join(["77|x|y|z"] * 129),  # too many lines
        "77|vqp-{a}|vq-pack:{a}|COMPLETED|0:0|yesterday|x|y",  # a malformed row
        "{row}\n{dup}",  # another job with the exact identity: a duplicate
        "77|vqp-{a}|vq-pack:{a}|COMPLETED|0:0|2026-12-03T10:00:00|" + "x" * 5000 + "|z",
    ],
)
def test_untrustworthy_accounting_aborts_the_view(
    paths: StatePaths, tmp_path: Path, sacct: str
) -> None:
    alloc = _accepted(paths, tmp_path)
    text = sacct.format(a=alloc, row=_row(alloc), dup=_row(alloc, job="78"))
    host = ScriptedHost({"squeue": ok(""), "sacct": ok(text), "markers": ok("")})
    before = paths.pack_file("p").read_bytes()
    with pytest.raises(ProtocolError):
        inspect_pack(paths, "p", lambda name: host)
    assert paths.pack_file("p").read_bytes() == before


def test_no_accounting_anchor_is_unknown_even_with_a_queue_row(
    paths: StatePaths, tmp_path: Path
) -> None:
    alloc = _accepted(paths, tmp_path)
    host = ScriptedHost(
        {
            "squeue": ok(f"77|vqp-{alloc}|vq-pack:{alloc}|RUNNING\n"),
            "sacct": ok(""),
            "markers": ok(""),
        }
    )
    view = inspect_pack(paths, "p", lambda name: host).as_dict()
    assert view["attempts"][0]["state"] == "UNKNOWN" and view["quiescent"] is False


def test_an_append_during_submission_stops_the_remaining_allocations(
    paths: StatePaths, tmp_path: Path
) -> None:
    plan = _plan(paths, tmp_path)

    def sbatch_then_append(argv: list[str], stdin: bytes | None) -> RunResult:
        open_pack(paths, "p", [*TASKS, Task("d", ("true",))])  # revision 2, mid-run
        return RunResult(0, b"500\n", b"", "login")

    host = ScriptedHost({"sbatch": sbatch_then_append})
    with pytest.raises(Conflict, match="revision 2"):
        submit_plan(paths, "p", plan, lambda name: host, lambda item: None)
    assert [(a["outcome"], a["job_id"]) for a in _attempts(paths)] == [("accepted", "500")]
    assert len(host.calls) == 1


def test_settling_twice_is_refused(paths: StatePaths, tmp_path: Path) -> None:
    alloc = _accepted(paths, tmp_path)
    for kwargs in ({"not_submitted": True}, {"job_id": "78"}):
        with pytest.raises(Conflict, match="already accepted"):
            resolve_attempt(
                paths,
                "p",
                alloc,
                **{"job_id": None, "cluster": None, "not_submitted": False, **kwargs},
            )
    assert _attempts(paths)[0]["job_id"] == "77"


def test_a_slot_without_marker_is_judged_by_its_own_step_row(
    paths: StatePaths, tmp_path: Path
) -> None:
    alloc = _accepted(paths, tmp_path)
    times = "2026-12-03T10:00:00|2026-12-03T10:00:01|2026-12-03T10:00:09"
    steps = [
        f"77.0|vqp-{alloc}-2|vq-pack:{alloc}|CANCELLED by 0|0:15|{times}",
        f"77.1|vqp-{alloc}-1|vq-pack:{alloc}|COMPLETED|0:0|{times}",
        f"77.2|vqp-{alloc}-0|vq-pack:{alloc}|COMPLETED|0:0|{times}",
    ]
    host = ScriptedHost(
        {
            "squeue": ok(""),
            "sacct": ok("\n".join([_row(alloc, state="COMPLETED"), *steps]) + "\n"),
            "markers": ok("0|0\n"),  # only slot 0 wrote its marker
        }
    )
    view = inspect_pack(paths, "p", lambda name: host).as_dict()
    assert [(t["state"], t["exit_code"]) for t in view["tasks"]] == [
        ("SUCCEEDED", 0),
        ("FAILED", 0),  # the step ended but never wrote the marker: not a success
        ("CANCELLED", 0),
    ]


def _wide_plan(paths: StatePaths, tmp_path: Path, count: int) -> tuple[Path, list[str]]:
    """A plan of ``count`` one-task allocations; their ids in plan order."""
    open_pack(paths, "p", [Task(f"t{n}", ("true",)) for n in range(count)])
    made = make_plan(paths, "p", profile(), tasks_per_allocation=1)
    ids = [str(a["allocation_id"]) for a in made.document["allocations"]]
    return write_plan(tmp_path / "wide.json", made), ids


def _alloc_of(stdin: bytes | None) -> str:
    assert stdin is not None
    return stdin.split(b"--comment=vq-pack:", 1)[1].split(b"\n", 1)[0].decode()


def test_allocations_go_in_windows_each_intent_on_disk_before_its_sbatch(
    paths: StatePaths, tmp_path: Path
) -> None:
    plan, ids = _wide_plan(paths, tmp_path, 10)
    recorded_when_sent: list[int] = []
    in_flight, most = [0], [0]
    lock = threading.Lock()

    def sbatch(argv: list[str], stdin: bytes | None) -> RunResult:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        attempts = {a["allocation_id"]: a for a in _attempts(paths)}
        alloc = _alloc_of(stdin)
        assert attempts[alloc]["outcome"] == "intent"
        with lock:
            recorded_when_sent.append(len(attempts))
            in_flight[0] -= 1
        return RunResult(0, f"{200 + ids.index(alloc)}\n".encode(), b"", "login")

    host = ScriptedHost({"sbatch": sbatch})
    reports: list[dict[str, object]] = []
    submit_plan(paths, "p", plan, lambda name: host, reports.append)
    # the first alone, then windows of MAX_IN_FLIGHT: a window's intents are written
    # together, and the next window's only once its receipts are in
    assert MAX_IN_FLIGHT == 4 and sorted(recorded_when_sent) == [1, 5, 5, 5, 5, 9, 9, 9, 9, 10]
    assert most[0] <= MAX_IN_FLIGHT
    assert [(a["allocation_id"], a["outcome"], a["job_id"]) for a in _attempts(paths)] == [
        (alloc, "accepted", str(200 + n)) for n, alloc in enumerate(ids)
    ]
    assert [r["allocation_id"] for r in reports] == ids


def test_a_lost_answer_in_a_window_keeps_the_others_receipts_and_stops(
    paths: StatePaths, tmp_path: Path
) -> None:
    plan, ids = _wide_plan(paths, tmp_path, 10)
    lost = {ids[2], ids[4]}  # both in the second window

    def sbatch(argv: list[str], stdin: bytes | None) -> RunResult:
        alloc = _alloc_of(stdin)
        if alloc in lost:
            raise CommandTimeout("on login: the command timed out after 30s")
        return RunResult(0, f"{300 + ids.index(alloc)}\n".encode(), b"", "login")

    host = ScriptedHost({"sbatch": sbatch})
    reports: list[dict[str, object]] = []
    with pytest.raises(OutcomeUnknown, match=f"allocation {ids[2]}.*1 more.*{ids[4]}"):
        submit_plan(paths, "p", plan, lambda name: host, reports.append)
    assert [(a["outcome"], a["job_id"]) for a in _attempts(paths)] == [
        ("accepted", "300"),
        ("accepted", "301"),
        ("intent", None),
        ("accepted", "303"),
        ("intent", None),
    ]
    assert len(host.calls) == 5  # the third window was never sent
    assert [r["allocation_id"] for r in reports] == [ids[0], ids[1], ids[3]]
    # again: the accepted ones are reported, the first unknown one stops it; nothing is sent
    again: list[dict[str, object]] = []
    with pytest.raises(OutcomeUnknown, match=f"allocation {ids[2]}: an earlier submission"):
        submit_plan(paths, "p", plan, lambda name: host, again.append)
    assert [r["action"] for r in again] == ["already", "already"] and len(host.calls) == 5
