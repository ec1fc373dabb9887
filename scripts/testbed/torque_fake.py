#!/usr/bin/python3
"""A small Torque server for the testbed: qsub, qstat, qdel, qhold, qrls as one program.

Installed by scripts/testbed/up.sh as symlinks named after each command (the name it is
called by picks the command) on one namespace host's PATH. There is no server daemon:
the state is one JSON file per user under ``$VQ_TORQUE_FAKE_DIR`` (default
``~/.vq-torque-fake``), read and written under an exclusive ``flock``, and every command
runs one scheduling pass first. A job that starts gets its own detached runner process,
which runs the job script with ``/bin/sh`` in a new session (stdout/stderr to the
``-o``/``-e`` paths, ``$PBS_JOBID`` set, working directory ``$HOME``), enforces the
walltime, records ``exit_status`` (the script's code, or 256 + the signal that ended it)
and schedules the next jobs when its job ends.

What it imitates, from the Torque admin guide (the shapes ``vq.dialects.torque_parse``
reads): ``qsub`` prints ``N.<server>``; ``qstat -f`` prints ``Job Id:`` blocks with
four-space ``name = value`` attributes and a tab-continued ``Variable_List``; an unknown
id is ``qstat: Unknown Job Id Error ID`` on stderr with exit 153 while the known ones
are still printed; ``qhold`` of a running job is refused with ``Request invalid for
state of job``; ``qdel`` of a completed one with ``invalid state for job - COMPLETE``.
Completed jobs stay visible for ``keep_completed`` (300 s). The node has ``CORES`` (2)
cores; a job starts when its ``ppn`` fits, in submission order.

Standard library only: it runs under Debian's /usr/bin/python3 as any user.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SERVER = "vq-torque"
CORES = 2
KEEP_COMPLETED = 300.0
KILL_DELAY = 5.0
UNKNOWN_EXIT = 153


def _state_dir() -> Path:
    return Path(os.environ.get("VQ_TORQUE_FAKE_DIR") or Path.home() / ".vq-torque-fake")


class Server:
    """The JSON state under its lock, held for the life of the ``with`` block."""

    def __enter__(self) -> Server:
        root = _state_dir()
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = root / "state.json"
        self._lock = open(root / "lock", "a")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        try:
            self.state: dict[str, Any] = json.loads(self.path.read_text())
        except FileNotFoundError:
            self.state = {"next_id": 1, "jobs": {}}
        return self

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1))
        os.replace(tmp, self.path)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._lock, fcntl.LOCK_UN)
        self._lock.close()

    def job(self, job_id: str) -> dict[str, Any] | None:
        return self.state["jobs"].get(job_id.split(".", 1)[0])

    def schedule(self) -> None:
        """Purge expired completed jobs, then start queued jobs that fit, in order."""
        now = time.time()
        jobs = self.state["jobs"]
        for number in [n for n, j in jobs.items() if j["state"] == "C"]:
            if now - jobs[number].get("comp_time", now) > KEEP_COMPLETED:
                del jobs[number]
        used = sum(j["ppn"] for j in jobs.values() if j["state"] in ("R", "E"))
        for number in sorted((n for n, j in jobs.items() if j["state"] == "Q"), key=int):
            job = jobs[number]
            if used + job["ppn"] > CORES:
                break
            used += job["ppn"]
            job.update(state="R", start_time=now, comment=None)
            subprocess.Popen(
                [sys.executable, os.path.realpath(__file__), "_run", number],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        for job in jobs.values():
            if job["state"] == "Q":
                job["comment"] = "Not Running: Not enough of the right type of nodes are available"
        self.save()


def _seconds(text: str) -> int:
    total = 0
    for part in text.split(":"):
        total = total * 60 + int(part)
    return total


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _directives(script: Path) -> list[str]:
    """The words of the script's ``#PBS`` lines, up to its first command line."""
    words: list[str] = []
    for line in script.read_text().splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#PBS"):
            words += stripped[len("#PBS") :].split()
        elif stripped and not stripped.startswith("#"):
            break
    return words


def _slow_submit(script: Path) -> None:
    """The testbed's slow-submit fault, as ``slow_submit.sh`` does for sbatch: a
    ``.vq-testbed-submit-delay`` file in a directory above the script makes qsub log the
    call in ``.vq-testbed-submit-calls`` beside it, then stall that many seconds."""
    for folder in script.absolute().parents:
        delay = folder / ".vq-testbed-submit-delay"
        if folder == Path("/") or not delay.is_file():
            continue
        with open(folder / ".vq-testbed-submit-calls", "a") as calls:
            calls.write(f"{os.getpid()} {time.time():.6f} {script}\n")
        time.sleep(float(delay.read_text().strip() or 0))
        return


def qsub(argv: list[str]) -> int:
    if not argv:
        print("usage: qsub [-h] script", file=sys.stderr)
        return 2
    script = Path(argv[-1])
    _slow_submit(script)
    if not script.is_file():
        print(
            f"qsub: script file cannot be loaded - No such file or directory: {script}",
            file=sys.stderr,
        )
        return 1
    job: dict[str, Any] = {
        "name": script.name,
        "ppn": 1,
        "walltime": None,
        "mem": None,
        "out": None,
        "err": None,
        "queue": "batch",
        "held": False,
        "script": str(script.resolve()),
        "ctime": time.time(),
        "owner": f"{os.environ.get('USER', 'unknown')}@{os.uname().nodename}",
        "workdir": os.getcwd(),
    }
    words = _directives(script) + argv[:-1]
    i = 0
    while i < len(words):
        flag = words[i]
        value = words[i + 1] if i + 1 < len(words) else ""
        step = 2
        if flag == "-h":
            job["held"], step = True, 1
        elif flag == "-N":
            job["name"] = value
        elif flag == "-o":
            job["out"] = value
        elif flag == "-e":
            job["err"] = value
        elif flag == "-q":
            job["queue"] = value
        elif flag == "-l":
            for item in value.split(","):
                key, _, val = item.partition("=")
                if key == "nodes" and ":ppn=" in val:
                    job["ppn"] = int(val.split(":ppn=", 1)[1])
                elif key == "walltime":
                    job["walltime"] = _seconds(val)
                elif key == "mem":
                    job["mem"] = val
        elif flag in ("-S", "-r", "-A"):
            pass
        else:
            print(f"qsub: invalid option -- '{flag}'", file=sys.stderr)
            return 2
        i += step
    if job["ppn"] > CORES:
        print("qsub: submit error (Job exceeds queue resource limits)", file=sys.stderr)
        return 1
    with Server() as server:
        number = str(server.state["next_id"])
        server.state["next_id"] += 1
        job["state"] = "H" if job["held"] else "Q"
        server.state["jobs"][number] = job
        server.schedule()
    print(f"{number}.{SERVER}")
    return 0


def _block(number: str, job: dict[str, Any]) -> str:
    now = time.time()
    lines = [f"Job Id: {number}.{SERVER}", f"    Job_Name = {job['name']}"]
    lines.append(f"    Job_Owner = {job['owner']}")
    if job.get("start_time"):
        end = job.get("comp_time") or now
        lines.append(f"    resources_used.walltime = {_clock(end - job['start_time'])}")
    lines += [
        f"    job_state = {job['state']}",
        f"    queue = {job['queue']}",
        f"    server = {SERVER}",
        f"    ctime = {time.ctime(job['ctime'])}",
        f"    Error_Path = {os.uname().nodename}:{job['err']}",
        f"    Hold_Types = {'u' if job['state'] == 'H' else 'n'}",
        f"    Output_Path = {os.uname().nodename}:{job['out']}",
        "    Rerunable = False",
        f"    Resource_List.nodes = 1:ppn={job['ppn']}",
    ]
    if job["mem"]:
        lines.append(f"    Resource_List.mem = {job['mem']}")
    if job["walltime"] is not None:
        lines.append(f"    Resource_List.walltime = {_clock(job['walltime'])}")
    if job.get("start_time"):
        lines.append(f"    exec_host = {os.uname().nodename}/0")
    if job.get("pid"):
        lines.append(f"    session_id = {job['pid']}")
    lines.append(f"    Variable_List = PBS_O_QUEUE={job['queue']},PBS_O_HOME={Path.home()},")
    lines.append(f"\tPBS_O_WORKDIR={job['workdir']},PBS_O_SERVER={SERVER}")
    if job.get("comment"):
        lines.append(f"    comment = {job['comment']}")
    lines.append(f"    submit_args = {job['script']}")
    if job.get("comp_time"):
        lines.append(f"    comp_time = {time.ctime(job['comp_time'])}")
    if job.get("exit_status") is not None:
        lines.append(f"    exit_status = {job['exit_status']}")
    return "\n".join(lines) + "\n"


def qstat(argv: list[str]) -> int:
    ids = [word for word in argv if word != "-f"]
    out: list[str] = []
    code = 0
    with Server() as server:
        server.schedule()
        jobs = server.state["jobs"]
        numbers = [i.split(".", 1)[0] for i in ids] or sorted(jobs, key=int)
        for asked, number in zip(ids or numbers, numbers, strict=True):
            if number in jobs:
                out.append(_block(number, jobs[number]))
            else:
                print(f"qstat: Unknown Job Id Error {asked}", file=sys.stderr)
                code = UNKNOWN_EXIT
    sys.stdout.write("\n".join(out))
    return code


def _control(command: str, argv: list[str]) -> int:
    if len(argv) != 1:
        print(f"usage: {command} job_identifier", file=sys.stderr)
        return 2
    with Server() as server:
        server.schedule()
        job = server.job(argv[0])
        if job is None:
            print(f"{command}: Unknown Job Id {argv[0]}", file=sys.stderr)
            return UNKNOWN_EXIT
        state = job["state"]
        if state == "C":
            print(
                f"{command}: Request invalid for state of job "
                f"MSG=invalid state for job - COMPLETE {argv[0]}",
                file=sys.stderr,
            )
            return 35
        if command == "qdel":
            if state in ("R", "E") and job.get("pgid"):
                job["delete_at"] = time.time()
                try:
                    os.killpg(job["pgid"], signal.SIGTERM)
                except ProcessLookupError:
                    pass
            elif state in ("Q", "H"):
                job.update(state="C", comp_time=time.time(), comment=None)
        elif command == "qhold":
            if state not in {"Q", "H"}:
                print(f"qhold: Request invalid for state of job {argv[0]}", file=sys.stderr)
                return 35
            job.update(state="H", comment=None)
        elif command == "qrls":
            if state != "H":
                print(f"qrls: Request invalid for state of job {argv[0]}", file=sys.stderr)
                return 35
            job["state"] = "Q"
        server.schedule()
    return 0


def _launch(job: dict[str, Any], env: dict[str, str]) -> subprocess.Popen[bytes]:
    with (
        open(job["out"] or os.devnull, "ab") as out,
        open(job["err"] or os.devnull, "ab") as err,
    ):
        return subprocess.Popen(
            ["/bin/sh", job["script"]],
            cwd=Path.home(),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )


def _run(number: str) -> int:
    """The runner of one started job (a detached process of its own)."""
    with Server() as server:
        job = server.job(number)
        if job is None or job["state"] != "R":
            return 0
        env = {
            **os.environ,
            "PBS_JOBID": f"{number}.{SERVER}",
            "PBS_JOBNAME": job["name"],
            "PBS_O_WORKDIR": job["workdir"],
            "PBS_QUEUE": job["queue"],
        }
        try:
            proc = _launch(job, env)
        except OSError as exc:  # pbs_mom's -1: the job could not start (no script, no -o dir)
            job.update(state="C", comp_time=time.time(), exit_status=-1, comment=str(exc))
            server.schedule()
            return 0
        job.update(pid=proc.pid, pgid=proc.pid)
        server.save()
        start, walltime = job["start_time"], job["walltime"]
    termed_at: float | None = None
    while True:
        try:
            rc = proc.wait(timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            pass
        now = time.time()
        if termed_at is None and walltime is not None and now - start >= walltime:
            termed_at = now
            os.killpg(proc.pid, signal.SIGTERM)
        if termed_at is None:
            with Server() as server:
                job = server.job(number) or {}
                if job.get("delete_at"):
                    termed_at = job["delete_at"]
        if termed_at is not None and now - termed_at >= KILL_DELAY:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    with Server() as server:
        job = server.job(number)
        if job is not None:
            status = rc if rc >= 0 else 256 - rc
            if termed_at is not None and rc >= 0:
                status = 256 + signal.SIGTERM  # pbs_mom reports the kill, not the trap's code
            job.update(state="C", comp_time=time.time(), exit_status=status, comment=None)
        server.schedule()
    return 0


def main() -> int:
    name = Path(sys.argv[0]).name
    argv = sys.argv[1:]
    if name == "qsub":
        return qsub(argv)
    if name == "qstat":
        return qstat(argv)
    if name in ("qdel", "qhold", "qrls"):
        return _control(name, argv)
    if argv[:1] == ["_run"] and len(argv) == 2:
        return _run(argv[1])
    print(f"torque_fake: unknown command {name}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
