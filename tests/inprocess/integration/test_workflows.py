"""Workflows end to end: dependencies, arrays, chains, retries, reruns, resubmit, keys."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

from tests.conftest import VQ_BIN, Vq, wait_until


def test_dependency_diamond_cascades_exactly_the_right_jobs(vq: Vq) -> None:
    vq.start_daemon("--max-cpus", "8")
    a = vq.submit("--job-name", "a", "--", "true")
    b = vq.submit("--after", a, "--", "sh", "-c", "exit 5")
    c = vq.submit("--after", a, "--", "true")
    d = vq.submit("--after", b, "--after", c, "--after", b, "--", "true")
    e = vq.submit("--after", d, "--", "true")
    f = vq.submit("--after-any", b, "--", "true")
    g = vq.submit("--after", c, "--", "true")
    assert vq.spec(d)["depends_on"] == [b, c]  # deduplicated
    for job, state in ((a, "COMPLETED"), (b, "FAILED"), (c, "COMPLETED"), (g, "COMPLETED")):
        vq.wait_state(job, state)
    vq.wait_state(d, "FAILED")
    vq.wait_state(e, "FAILED")
    vq.wait_state(f, "COMPLETED")
    assert vq.spec(d)["failure_reason"] == f"dependency {b} ended FAILED"
    assert vq.spec(e)["failure_reason"] == f"dependency {d} ended FAILED"
    assert vq.spec(d)["started_at"] is None  # never ran


def test_pending_job_says_what_it_waits_for(vq: Vq, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    vq.start_daemon("--max-cpus", "8")
    first = vq.submit("--", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")
    second = vq.submit("--after", first, "--", "true")
    vq.wait_state(first, "RUNNING")
    assert vq.status(second)["pending_reason"] == f"waiting for {first} (RUNNING)"
    gate.touch()
    vq.wait_state(second, "COMPLETED")


def test_unknown_dependency_is_refused_and_nothing_written(vq: Vq) -> None:
    result = vq.run("submit", "--after", "0123456789ab", "--", "true", check=False)
    assert result.returncode == 3
    assert "dependency '0123456789ab' is not a job in this queue" in result.stderr
    assert not list((vq.root / "queue").glob("*.json")) if (vq.root / "queue").exists() else True


def _max_concurrency(ledger: Path) -> tuple[int, set[int]]:
    running, peak, seen = 0, 0, set()
    for line in ledger.read_text().splitlines():
        sign, index = line.split()
        if sign == "+":
            running += 1
            seen.add(int(index))
        else:
            running -= 1
        peak = max(peak, running)
    return peak, seen


def test_array_with_max_parallel(vq: Vq, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    vq.start_daemon("--max-jobs", "10", "--max-cpus", "16")
    script = (
        f'echo "+ $VQ_ARRAY_INDEX" >> {ledger}; sleep 0.05; echo "- $VQ_ARRAY_INDEX" >> {ledger}'
    )
    out = vq.run("submit", "--array", "0-99", "--max-parallel", "3", "--", "sh", "-c", script)
    ids = out.stdout.split()
    assert len(ids) == 100 and len(set(ids)) == 100
    specs = [vq.spec(job) for job in ids]
    assert [s["array_index"] for s in specs] == list(range(100))
    group = specs[0]["array_group_id"]
    assert all(s["array_group_id"] == group and s["array_total"] == 100 for s in specs)
    waited = vq.run("wait", "--group", group, "--timeout", "3m", timeout=200)
    assert waited.returncode == 0
    peak, seen = _max_concurrency(ledger)
    assert seen == set(range(100)), "every index runs exactly once"
    assert len(ledger.read_text().splitlines()) == 200
    assert 1 <= peak <= 3
    summary = vq.json("status", "--group", group)
    assert summary["total"] == 100 and summary["counts"] == {"COMPLETED": 100}
    assert vq.run("status", "--group", group).stdout.strip() == (
        f"group {group}: 100 jobs: 100 COMPLETED"
    )


def test_array_from_file_exports_values(vq: Vq, tmp_path: Path) -> None:
    params = tmp_path / "params.txt"
    params.write_text("H2O 0.5\n\nCH4 1.0\nNH3 1.5\n")
    vq.start_daemon("--max-cpus", "8")
    payload = json.loads(
        vq.run(
            "submit",
            "--array-from",
            str(params),
            "--json",
            "--",
            "sh",
            "-c",
            'echo "$VQ_ARRAY_INDEX/$VQ_ARRAY_TOTAL $VQ_ARRAY_VALUE"',
        ).stdout
    )
    jobs = payload["jobs"]
    assert payload["array_group_id"] == jobs[0]["array_group_id"]
    vq.run("wait", *[j["id"] for j in jobs])
    outputs = [vq.run("logs", j["id"]).stdout for j in jobs]
    assert outputs == ["0/3 H2O 0.5\n", "1/3 CH4 1.0\n", "2/3 NH3 1.5\n"]


def test_chain_shares_a_directory_and_stops_at_a_failure(vq: Vq) -> None:
    vq.start_daemon("--max-cpus", "8")
    script = (
        'echo "segment $VQ_CHAIN_INDEX" >> restart.log; '
        '[ "$VQ_CHAIN_INDEX" = 1 ] && exit 9; cat restart.log'
    )
    ids = vq.run("submit", "--chain", "4", "--", "sh", "-c", script).stdout.split()
    assert len(ids) == 4
    specs = [vq.spec(job) for job in ids]
    assert [s["chain_index"] for s in specs] == [0, 1, 2, 3]
    assert specs[1]["depends_on"] == [ids[0]] and specs[3]["depends_on"] == [ids[2]]
    assert len({s["cwd"] for s in specs}) == 1  # one working directory for the chain
    vq.wait_state(ids[0], "COMPLETED")
    vq.wait_state(ids[1], "FAILED")
    vq.wait_state(ids[2], "FAILED")
    vq.wait_state(ids[3], "FAILED")
    assert vq.spec(ids[2])["failure_reason"] == f"dependency {ids[1]} ended FAILED"
    assert Path(specs[0]["cwd"], "restart.log").read_text() == "segment 0\nsegment 1\n"
    group = specs[0]["chain_group_id"]
    assert vq.json("list", "--group", group)["group"]["counts"] == {"COMPLETED": 1, "FAILED": 3}


def test_flaky_job_succeeds_on_second_retry(vq: Vq, tmp_path: Path) -> None:
    counter = tmp_path / "attempts"
    vq.start_daemon()
    script = (
        f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; [ $n -ge 3 ]"
    )
    job = vq.submit("--retry", "3", "--retry-backoff", "1s", "--", "sh", "-c", script)
    vq.wait_state(job, "COMPLETED", timeout=30)
    spec = vq.spec(job)
    assert spec["retry_count"] == 2 and spec["exit_code"] == 0
    assert counter.read_text().strip() == "3"

    def transitions() -> list[tuple[str, str]]:
        events = vq.json("events", job)
        return [(e["from"], e["to"]) for e in events if e["kind"] == "state_transition"]

    # The last event is appended just after the spec write that ended the job.
    final = wait_until(lambda: transitions()[-1] == ("running", "completed") and transitions())
    assert final.count(("running", "pending")) == 2


def test_retry_budget_exhausted_fails(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--retry", "1", "--retry-backoff", "1s", "--", "sh", "-c", "exit 2")
    vq.wait_state(job, "FAILED", timeout=30)
    assert vq.spec(job)["retry_count"] == 1


def test_rerun_until_file_exists(vq: Vq) -> None:
    vq.start_daemon()
    script = (
        "n=$(cat runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > runs; "
        "[ $n -ge 3 ] && touch done.flag; true"
    )
    first = vq.submit(
        "--rerun-until-file-exists", "done.flag", "--rerun-max", "5", "--", "sh", "-c", script
    )

    def lineage() -> list[dict[str, object]]:
        rows = vq.json("list")["jobs"]
        return rows if len(rows) == 3 and all(r["state"] == "COMPLETED" for r in rows) else []

    rows = wait_until(lineage, timeout=30)
    by_id = {r["id"]: vq.spec(str(r["id"])) for r in rows}
    chain = [first]
    while True:
        children = [i for i, s in by_id.items() if s["parent_jobid"] == chain[-1]]
        if not children:
            break
        chain.extend(children)
    assert len(chain) == 3
    assert [by_id[i]["rerun_count"] for i in chain] == [0, 1, 2]
    assert len({by_id[i]["cwd"] for i in chain}) == 1
    assert Path(str(by_id[first]["cwd"]), "done.flag").exists()


def test_resubmit_clones_without_old_results(vq: Vq) -> None:
    vq.start_daemon()
    original = vq.submit("--cpus", "1", "--", "sh", "-c", "echo run >> history; cat history")
    vq.wait_state(original, "COMPLETED")
    clone = vq.run("resubmit", original, "--cpus", "2").stdout.strip()
    assert clone != original
    vq.wait_state(clone, "COMPLETED")
    spec = vq.spec(clone)
    assert spec["cpus"] == 2 and spec["parent_jobid"] == original
    assert vq.run("logs", clone).stdout == "run\nrun\n"  # the workspace was copied
    running = vq.submit("--", "sleep", "30")
    refused = vq.run("resubmit", running, check=False)
    assert refused.returncode == 6 and "only an ended job" in refused.stderr


def _submit_keyed(vq: Vq, key: str, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VQ_BIN, "submit", "--idempotency-key", key, "--", *command],
        env=vq.env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_idempotent_submit_concurrently_gives_one_job(vq: Vq) -> None:
    vq.start_daemon()
    results: list[subprocess.CompletedProcess[str]] = []
    lock = threading.Lock()

    def one() -> None:
        result = _submit_keyed(vq, "run-42", "echo", "hello")
        with lock:
            results.append(result)

    threads = [threading.Thread(target=one) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    ids = {r.stdout.strip() for r in results}
    assert len(ids) == 1
    assert len(list((vq.root / "queue").glob("*.json"))) == 1
    conflict = _submit_keyed(vq, "run-42", "echo", "something else")
    assert conflict.returncode == 6 and "different submission" in conflict.stderr


def test_idempotent_repeat_with_a_relative_not_before_returns_the_original(vq: Vq) -> None:
    def keyed(*options: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [VQ_BIN, "submit", "--idempotency-key", "later", *options, "--", "true"],
            env=vq.env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    first = keyed("--not-before", "1h")
    assert first.returncode == 0, first.stderr
    repeat = keyed("--not-before", "1h")  # resolves to a later instant, same request
    assert repeat.returncode == 0, repeat.stderr
    assert repeat.stdout.strip() == first.stdout.strip()
    other = keyed("--not-before", "2h")
    assert other.returncode == 6 and "different submission" in other.stderr


def test_idempotency_claim_repaired_and_survives_deletion(vq: Vq) -> None:
    first = _submit_keyed(vq, "k1", "true").stdout.strip()  # no daemon: the CLI writes
    claims = list((vq.root / "idempotency").glob("*.json"))
    assert len(claims) == 1
    claims[0].unlink()  # a crash between the spec write and the claim write
    again = _submit_keyed(vq, "k1", "true")
    assert again.returncode == 0 and again.stdout.strip() == first
    assert len(list((vq.root / "idempotency").glob("*.json"))) == 1
    (vq.root / "queue" / f"{first}.json").unlink()  # deleting the job keeps the key taken
    replay = _submit_keyed(vq, "k1", "true")
    assert replay.returncode == 0 and replay.stdout.strip() == first
    assert not list((vq.root / "queue").glob("*.json"))


def test_clean_workdir_on_terminal(vq: Vq) -> None:
    vq.start_daemon()
    kept = vq.submit("--", "sh", "-c", 'echo scratch > "$VQ_WORKDIR/big.tmp"')
    cleaned = vq.submit("--clean-workdir", "--", "sh", "-c", 'echo scratch > "$VQ_WORKDIR/big.tmp"')
    vq.wait_state(kept, "COMPLETED")
    vq.wait_state(cleaned, "COMPLETED")
    wait_until(lambda: vq.spec(cleaned)["workdir_swept_at"], timeout=15)
    assert not (vq.root / "workdirs" / cleaned).exists()
    assert (vq.root / "workdirs" / kept / "big.tmp").read_text() == "scratch\n"
    assert vq.spec(kept)["workdir_swept_at"] is None


def test_profiles_fill_what_the_flags_do_not_give(vq: Vq) -> None:
    config_dir = Path(vq.env["VQ_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(
        "[profile.orca-fast]\ncpus = 2\nmem_mb = 300\nwall_time_seconds = 3600\n"
        'tags = ["orca"]\nretry_max = 1\n'
    )
    listed = vq.json("profiles")
    assert listed["orca-fast"]["cpus"] == 2
    vq.start_daemon("--max-cpus", "8")
    plain = vq.submit("--profile", "orca-fast", "--", "true")
    spec = vq.spec(plain)
    assert (spec["cpus"], spec["mem_mb"], spec["wall_time_seconds"]) == (2, 300, 3600)
    assert spec["tags"] == ["orca"] and spec["retry_max"] == 1
    explicit = vq.submit("--profile", "orca-fast", "--cpus", "1", "--tag", "mine", "--", "true")
    spec = vq.spec(explicit)
    assert spec["cpus"] == 1 and spec["tags"] == ["mine"] and spec["mem_mb"] == 300
    vq.stop_daemon()  # the same without a daemon (the CLI writes the spec itself)
    offline = vq.submit("--profile", "orca-fast", "--priority", "3", "--", "true")
    assert vq.spec(offline)["cpus"] == 2 and vq.spec(offline)["priority"] == 3
    unknown = vq.run("submit", "--profile", "nope", "--", "true", check=False)
    assert unknown.returncode == 3 and "unknown profile 'nope'" in unknown.stderr
    (config_dir / "config.toml").write_text("[profile.bad]\ncpu = 2\n")
    bad = vq.run("profiles", check=False)
    assert bad.returncode == 9 and "profile.bad.cpu: unknown key" in bad.stderr
