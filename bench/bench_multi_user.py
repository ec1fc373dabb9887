"""Multi-user mode (a)–(c): the root daemon over per-user trees against one tree.

Needs root, writable cgroups, the testbed accounts (``scripts/testbed/users.sh``) and the
world-readable ``/opt/vq-testbed/venv``; otherwise each row reports why it did not run.

* (a) submit → RUNNING: ``vq submit -- true`` as a user (``runuser``, the testbed venv,
  this checkout) against the multi-user root daemon, from spawning the CLI to the
  collector's receipt ``started_at`` (after the privilege drop and the job's cgroup), vs
  the same CLI and interpreter submitting to a single-user daemon run as that user.
  Target: ≤ 1.5× single-user + 5 ms (medians). Both daemons run at once and the two
  sides alternate round by round, so machine load hits both alike.
* (b) start-up: ``vq daemon start`` (system tree check, recovery, index load) over 10,000
  specs, 200 for each of the testbed's 50 accounts ``vqmu01`` … ``vqmu50``
  (``scripts/testbed/users.sh``; without them, spread over the few other testbed
  accounts). Target: < 5 s. A single-user daemon starting over the same count in one
  tree is timed in alternation beside it.
* (c) admin ``vq list --json`` over those 10,000 specs across users (daemon up) against
  the same count in one single-user tree, the two listings alternating. Target: ≤ 1.2×.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import VQ, Figure, Result, StateRoot, Target, child_env, scaled, time_process

REPO_SRC = str(Path(__file__).resolve().parent.parent / "src")
USER_PYTHON = "/opt/vq-testbed/venv/bin/python"
ACCOUNTS = ("vqa", "vqb", "vqadm", "vqteam1", "vqteam2", "vqtest", "vqnoisy")
#: (b) and (c): the issue's 50 users (``scripts/testbed/users.sh`` creates them)
OWNERS = tuple(f"vqmu{i:02d}" for i in range(1, 51))
SPECS = 10_000
LATENCY_JOBS = 20
WARMUPS = 3
RUNS = 5
#: (a) alternates the two sides in this many rounds
ROUNDS = 5
POLL_SECONDS = 0.002
TERMINAL = {"COMPLETED", "FAILED", "KILLED", "OOM_KILLED", "TIME_EXCEEDED", "ABORTED_BY_QUEUE"}


def _owners() -> list[pwd.struct_passwd]:
    """The 50 benchmark accounts when all exist, else the testbed's few."""
    found = _accounts(OWNERS)
    return found if len(found) == len(OWNERS) else _accounts()


def _accounts(names: tuple[str, ...] = ACCOUNTS) -> list[pwd.struct_passwd]:
    found = []
    for name in names:
        try:
            found.append(pwd.getpwnam(name))
        except KeyError:
            continue
    return found


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if not os.access(USER_PYTHON, os.X_OK):
        return f"needs {USER_PYTHON} (scripts/testbed/up.sh)"
    if len(_accounts()) < 2:
        return "needs the testbed accounts (scripts/testbed/users.sh)"
    return None


class System:
    """A fresh 0755 system root with the policy, torn down (daemon stopped) on exit."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="vq-bench-multi-", dir="/tmp"))
        self.dir.chmod(0o755)
        self.config = self.dir / "etc"
        self.config.mkdir(mode=0o755)
        (self.config / "config.toml").write_text(
            '[multi_user]\nenabled = true\nprivilege_drop = "collector"\n'
        )
        (self.config / "config.toml").chmod(0o644)
        self.root = self.dir / "system"
        env = child_env({"VQ_CONFIG_DIR": str(self.config), "VQ_MULTI_USER_ROOT": str(self.root)})
        env.pop("VQ_ALLOW_ROOT", None)
        self.env = env

    def __enter__(self) -> System:
        return self

    def __exit__(self, *exc_info: object) -> None:
        subprocess.run(
            [VQ, "daemon", "stop"], env=self.env, capture_output=True, timeout=90, check=False
        )
        if not os.environ.get("VQ_BENCH_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def provision(self, who: pwd.struct_passwd) -> Path:
        subprocess.run(
            [VQ, "admin", "user", "add", who.pw_name], env=self.env, check=True, capture_output=True
        )
        return self.root / "users" / str(who.pw_uid)

    def start(self) -> float:
        t0 = time.perf_counter()
        subprocess.run([VQ, "daemon", "start"], env=self.env, check=True, capture_output=True)
        return time.perf_counter() - t0


def user_cli(user: str, env: dict[str, str]) -> list[str]:
    """``vq`` as ``user``: runuser, the world-readable venv, this checkout."""
    pairs = [f"{k}={v}" for k, v in env.items() if k.startswith("VQ_")]
    return ["runuser", "-u", user, "--", "env", f"PYTHONPATH={REPO_SRC}", "HOME=/tmp", *pairs]


def _wait_receipt(spec_path: Path, receipt: Path, deadline: float) -> float:
    """The receipt's ``started_at`` (epoch seconds) once the job is terminal."""
    while True:
        try:
            spec = json.loads(spec_path.read_bytes())
        except (OSError, ValueError):
            spec = {}
        if spec.get("state") in TERMINAL:
            if spec["state"] != "COMPLETED":
                raise RuntimeError(f"{spec_path.name} ended {spec['state']}: {spec}")
            return datetime.fromisoformat(
                json.loads(receipt.read_bytes())["started_at"]
            ).timestamp()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{spec_path.name} not terminal in time")
        time.sleep(POLL_SECONDS)


def _submit_to_started(
    argv: list[str], env: dict[str, str], tree: Path, jobs: int, warmups: int = WARMUPS
) -> list[float]:
    samples = []
    for i in range(warmups + jobs):
        t0 = time.time()
        out = subprocess.run(
            [*argv, USER_PYTHON, "-m", "vq", "submit", "--", "true"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        job_id = out.stdout.strip()
        started = _wait_receipt(
            tree / "queue" / f"{job_id}.json",
            tree / "jobs" / job_id / "_vq" / "resource-usage.json",
            time.monotonic() + 60,
        )
        if i >= warmups:
            samples.append((started - t0) * 1000)
    return samples


def submit_latency() -> list[Result]:
    title = "(a) multi-user: submit → command started, vs single-user"
    why = _unavailable()
    if why is not None:
        return [Result("multi_user_latency", title, None, error=why)]
    jobs = scaled(LATENCY_JOBS, minimum=5)
    rounds = min(ROUNDS, jobs)
    who = _accounts()[0]
    multi: list[float] = []
    single: list[float] = []
    # The single-user reference: the same user, CLI and interpreter, their own daemon.
    single_dir = Path(tempfile.mkdtemp(prefix="vq-bench-single-", dir="/tmp"))
    with System() as system:
        tree = system.provision(who)
        system.start()
        multi_argv = user_cli(who.pw_name, system.env)
        try:
            single_dir.chmod(0o755)
            state = single_dir / "state"
            env = child_env({"VQ_STATE_DIR": str(state), "VQ_CONFIG_DIR": str(single_dir / "c")})
            env.pop("VQ_ALLOW_ROOT", None)
            shutil.chown(single_dir, who.pw_uid, who.pw_gid)
            argv = user_cli(who.pw_name, env)
            daemon = [*argv, USER_PYTHON, "-m", "vq", "daemon"]
            subprocess.run([*daemon, "start"], env=env, check=True, timeout=120)
            try:
                for index in range(rounds):  # alternate: both sides see the same load
                    share = jobs // rounds + (1 if index < jobs % rounds else 0)
                    warm = WARMUPS if index == 0 else 0
                    multi += _submit_to_started(multi_argv, system.env, tree, share, warm)
                    single += _submit_to_started(argv, env, state, share, warm)
            finally:
                subprocess.run([*daemon, "stop"], env=env, timeout=90, check=False)
        finally:
            shutil.rmtree(single_dir, ignore_errors=True)
    single_median = sorted(single)[len(single) // 2]
    return [
        Result(
            "multi_user_latency",
            title,
            Figure("vq submit (as vqa) → receipt started_at", "ms", multi, show_p95=True),
            comparison=Figure("single-user daemon of the same user", "ms", single),
            target=Target("median ≤ 1.5× single-user + 5 ms", "value", 1.5 * single_median + 5.0),
            extra={"jobs": jobs, "warmups": WARMUPS, "rounds": rounds, "user": who.pw_name},
        )
    ]


def _write_specs(queue: Path, n: int, owner: pwd.struct_passwd | None) -> None:
    """``n`` COMPLETED specs (with their lock files) straight into ``queue``."""
    from vq.domain.spec import JobSpec
    from vq.domain.states import JobState
    from vq.store.specs import encode_spec

    base = datetime.now(UTC) - timedelta(hours=1)
    for i in range(n):
        job_id = os.urandom(6).hex()
        spec = JobSpec(
            id=job_id,
            submitted_at=base + timedelta(milliseconds=i),
            command=["true"],
            cwd="/tmp",
            cpus=1,
            submitter=str(owner.pw_uid) if owner else None,
        )
        spec.state = JobState.COMPLETED
        spec.started_at = spec.submitted_at + timedelta(milliseconds=5)
        spec.finished_at = spec.submitted_at + timedelta(milliseconds=9)
        spec.exit_code = 0
        path = queue / f"{job_id}.json"
        path.write_bytes(encode_spec(spec))
        path.with_name(path.name + ".lock").touch()
        if owner is not None:
            os.chown(path, owner.pw_uid, owner.pw_gid)
            os.chown(path.with_name(path.name + ".lock"), owner.pw_uid, owner.pw_gid)


def _list_rows(argv: list[str], env: dict[str, str]) -> int:
    out = subprocess.run(argv, env=env, capture_output=True, timeout=300, check=True)
    return len(json.loads(out.stdout)["jobs"])


def startup_and_listing() -> list[Result]:
    title_b = "(b) multi-user daemon start over 10k specs across users"
    title_c = "(c) admin vq list --json, 10k specs across users vs one tree"
    why = _unavailable()
    if why is not None:
        return [
            Result("multi_user_start", title_b, None, error=why),
            Result("multi_user_list", title_c, None, error=why),
        ]
    n = scaled(SPECS, minimum=500)
    runs = scaled(RUNS, minimum=2)
    owners = _owners()
    argv = [VQ, "list", "--json"]
    stop = [VQ, "daemon", "stop"]
    multi: list[float] = []
    single: list[float] = []
    starts: list[float] = []
    single_starts: list[float] = []
    with System() as system, StateRoot("multi-ref") as state:
        for index, who in enumerate(owners):
            tree = system.provision(who)
            share = n // len(owners) + (1 if index < n % len(owners) else 0)
            _write_specs(tree / "queue", share, who)
        state.paths.ensure()
        _write_specs(state.paths.queue_dir, n, None)
        os.sync()
        for index in range(runs):  # (b) alternating: stop both, then start each in turn
            if index:
                subprocess.run(stop, env=system.env, capture_output=True, timeout=90, check=True)
                subprocess.run(stop, env=state.env, capture_output=True, timeout=90, check=True)
            starts.append(system.start())
            t0 = time.perf_counter()
            state.start_daemon()
            single_starts.append(time.perf_counter() - t0)
        if _list_rows(argv, system.env) != n:
            raise RuntimeError("the multi-user listing does not show every spec")
        if _list_rows(argv, state.env) != n:
            raise RuntimeError("the single-tree listing does not show every spec")
        for _ in range(runs):  # (c) alternating
            multi.append(time_process(argv, system.env, timeout=300))
            single.append(time_process(argv, state.env, timeout=300))
    single_median = sorted(single)[len(single) // 2]
    extra: dict[str, Any] = {"specs": n, "owners": len(owners), "runs": runs}
    return [
        Result(
            "multi_user_start",
            f"(b) multi-user daemon start, {n} specs across {len(owners)} users",
            Figure("vq daemon start (as root)", "s", starts),
            comparison=Figure(
                "single-user daemon start, same count in one tree", "s", single_starts
            ),
            target=Target("< 5 s", "value", 5.0),
            extra=extra,
        ),
        Result(
            "multi_user_list",
            f"(c) admin vq list --json, {n} specs across {len(owners)} users vs one tree",
            Figure("vq list --json, multi-user", "s", multi),
            comparison=Figure("vq list --json, one tree", "s", single),
            target=Target("median ≤ 1.2× one tree", "value", 1.2 * single_median),
            extra=extra,
        ),
    ]


def run() -> list[Result]:
    return [*submit_latency(), *startup_and_listing()]
