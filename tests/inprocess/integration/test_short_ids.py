"""Short ids like git: any unique prefix of 4+ characters names a job; `vq list` keeps ids."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import VQ_BIN, Vq


def _twin(vq: Vq, job: str) -> str:
    """A second spec whose id shares ``job``'s first 6 characters (ids are random)."""
    twin = job[:6] + ("000000" if job[6:] != "000000" else "111111")
    data = json.loads((vq.root / "queue" / f"{job}.json").read_text())
    data["id"] = twin
    (vq.root / "queue" / f"{twin}.json").write_text(json.dumps(data))
    return twin


def test_prefixes_resolve_everywhere_and_ambiguity_is_its_own_error(vq: Vq) -> None:
    job = vq.submit("--job-name", "short", "--", "true")
    assert vq.json("status", job[:4])["id"] == job
    assert vq.run("events", job[:5]).returncode == 0
    twin = _twin(vq, job)
    ambiguous = vq.run("status", job[:4], check=False)
    assert ambiguous.returncode == 8, ambiguous.stderr
    first, second = sorted([job, twin])
    assert f"ambiguous: matches {first}, {second}" in ambiguous.stderr
    assert ambiguous.stderr.startswith("vq: error: ") and "hint:" in ambiguous.stderr
    assert vq.json("status", job[:8])["id"] == job  # longer prefix: unique again
    too_short = vq.run("status", job[:3], check=False)
    assert too_short.returncode == 4 and "at least 4" in too_short.stderr
    unknown = vq.run("status", "abcdabcd" if not job.startswith("abcd") else "dcba", check=False)
    assert unknown.returncode == 3 and "no job id starts with" in unknown.stderr
    killed = vq.run("kill", job[:8], "--json")
    assert json.loads(killed.stdout)[0]["id"] == job
    after = vq.submit("--after-any", job[:8], "--", "true")
    assert vq.spec(after)["depends_on_any"] == [job]


def test_list_keeps_whole_ids_quiet_and_piped(vq: Vq) -> None:
    long_name = "n" * 80
    jobs = [vq.submit("--job-name", long_name, "--", "sh", "-c", "x" * 200) for _ in range(2)]
    assert vq.run("list", "-q").stdout.split() == jobs
    assert vq.run("list", "--quiet", "--state", "killed").stdout == ""
    piped = vq.run("list").stdout.splitlines()  # stdout is a pipe here
    assert piped[0].split()[:3] == ["ID", "NAME", "STATE"]
    for job, line in zip(jobs, piped[1:], strict=True):
        assert line.startswith(f"{job}  ") and long_name in line and line.endswith("x" * 200)
        assert "\x1b[" not in line and line == line.rstrip()


def test_narrow_terminal_shrinks_names_never_ids(vq: Vq) -> None:
    job = vq.submit("--job-name", "a-rather-long-job-name-for-a-phone", "--", "sleep", "1")
    for width in (100, 60, 40):
        env = {**vq.env, "COLUMNS": str(width), "TERM": "xterm"}
        out = subprocess.run(
            ["script", "-qc", f"{VQ_BIN} list", "/dev/null"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert job in out, (width, out)
        assert "PENDING" in out or "PENDI" in out


def test_group_prefixes_resolve_and_ambiguity_names_the_groups(vq: Vq) -> None:
    out = vq.run("submit", "--array", "0-2", "--json", "--", "true")
    group = json.loads(out.stdout)["array_group_id"]
    listed = vq.json("list", "--group", group[:5])
    assert len(listed["jobs"]) == 3 and listed["group"]["group_id"] == group
    assert f"group {group}: 3 jobs" in vq.run("status", "--group", group[:6]).stdout
    lone = vq.submit("--", "true")
    spec = vq.root / "queue" / f"{lone}.json"
    data = json.loads(spec.read_text())
    other = group[:4] + ("11111111" if group[4:] != "11111111" else "22222222")
    data.update(array_group_id=other, array_index=0, array_total=1)
    spec.write_text(json.dumps(data))
    ambiguous = vq.run("list", "--group", group[:4], check=False)
    assert ambiguous.returncode == 8, ambiguous.stderr
    first, second = sorted([group, other])
    assert f"ambiguous: matches {first}, {second}" in ambiguous.stderr
    unknown = vq.run(
        "wait", "--group", "ffff" if not group.startswith("ffff") else "eeee", check=False
    )
    assert unknown.returncode == 3 and "no group id starts with" in unknown.stderr
    killed = vq.run("kill", "--group", group[:6], "--json")
    assert sorted(r["id"] for r in json.loads(killed.stdout)) == sorted(
        row["id"] for row in listed["jobs"]
    )


def test_scheduler_resolve_takes_a_prefix(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--", "sleep", "30")
    proc = vq.run("scheduler", "resolve", job[:6], "--not-submitted", check=False)
    assert proc.returncode == 6, proc.stderr  # a local job waits for no decision
    assert job in proc.stderr and "Traceback" not in proc.stderr
    vq.run("kill", job)
