"""The durable floor of (c): vq's per-job promises kept by the least Python can do.

Run as ``python drain_floor.py prepare DIR JOBS`` (not timed), then ``python drain_floor.py
DIR JOBS SLOTS [COMMAND...]`` (default ``true``); prints one JSON line. No vq code is
imported: this is what any Python queue that keeps docs/architecture.md's durability
table would pay per job on this machine, with nothing else (no index, no events, no
validation, no supervision, no RPC, no resource budget):

1. the claim: the job's RUNNING record written to a temp file, fsynced, renamed over
   the PENDING one, the directory fsynced — durable before the launch;
2. the launch: a forked Python collector (the spec's single-language rule) that leads
   its own session, creates the attempt's start record exclusively and fsyncs it and its
   directory (the never-started proof) and only then ``posix_spawn``s the command with
   stdin from /dev/null and stdout/stderr appended to the job's log;
3. the end: the collector ``wait4``s the command and writes the exit marker (temp file,
   fsync, rename, directory fsync) before it exits;
4. the record: the parent reaps the collector, reads the marker and writes the
   terminal record (atomic, not fsynced: the marker backs it).

Slots turn over independently: whenever a collector is reaped, the next job is claimed
and launched at once, as vq's daemon does with ``--max-jobs SLOTS``.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _atomic_write(directory: int, name: str, data: bytes, durable: bool) -> None:
    tmp = f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=directory)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, name, src_dir_fd=directory, dst_dir_fd=directory)
    if durable:
        os.fsync(directory)


def _collector(job: str, jobs: str, argv: list[str]) -> None:
    """The forked collector's body; never returns."""
    status = 1
    try:
        os.setsid()
        meta = os.open(os.path.join(jobs, job), os.O_RDONLY | os.O_DIRECTORY)
        fd = os.open("start", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=meta)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.fsync(fd)
        os.close(fd)
        os.fsync(meta)
        log = os.open(os.path.join(jobs, job, "stdout.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        pid = os.posix_spawnp(
            argv[0],
            argv,
            {"PATH": "/usr/bin:/bin", "JOB_ID": job},
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, log, 1),
                (os.POSIX_SPAWN_DUP2, log, 2),
            ],
            setsigdef=(),
        )
        os.close(log)
        _, code, _ = os.wait4(pid, 0)
        _atomic_write(meta, "exit-code", f"{os.waitstatus_to_exitcode(code)}\n".encode(), True)
        status = 0
    finally:
        os._exit(status)


def main() -> None:
    root, count, slots = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    argv = sys.argv[4:] or ["true"]
    t0 = time.perf_counter()
    queue_dir = os.path.join(root, "queue")
    jobs_dir = os.path.join(root, "jobs")
    queue = os.open(queue_dir, os.O_RDONLY | os.O_DIRECTORY)
    pending = sorted(os.listdir(queue_dir))
    pending.reverse()
    running: dict[int, tuple[str, dict[str, object]]] = {}
    done = 0
    while done < count:
        while pending and len(running) < slots:
            name = pending.pop()
            job = name.removesuffix(".json")
            with open(name, "rb", opener=lambda p, f: os.open(p, f, dir_fd=queue)) as handle:
                record = json.loads(handle.read())
            record.update(state="RUNNING", started_at=time.time())
            _atomic_write(queue, name, json.dumps(record).encode(), True)
            pid = os.fork()
            if pid == 0:
                _collector(job, jobs_dir, argv)
            running[pid] = (name, record)
        pid, status = os.wait()
        name, record = running.pop(pid)
        job = name.removesuffix(".json")
        with open(os.path.join(jobs_dir, job, "exit-code"), "rb") as handle:
            code = int(handle.read())
        state = "COMPLETED" if os.waitstatus_to_exitcode(status) == 0 and code == 0 else "FAILED"
        record.update(state=state, exit_code=code, finished_at=time.time())
        _atomic_write(queue, name, json.dumps(record).encode(), False)
        done += 1
    elapsed = time.perf_counter() - t0
    times = os.times()
    print(
        json.dumps(
            {
                "elapsed_in_process_s": elapsed,
                "cpu_self_s": times.user + times.system,
                "cpu_collectors_and_commands_s": times.children_user + times.children_system,
            }
        )
    )


def prepare(root: str, count: int) -> None:
    """Write ``count`` PENDING records and their job directories (not timed)."""
    os.makedirs(os.path.join(root, "queue"))
    for index in range(count):
        job = f"{index:06d}"
        os.makedirs(os.path.join(root, "jobs", job))
        with open(os.path.join(root, "queue", f"{job}.json"), "w") as handle:
            json.dump({"id": job, "state": "PENDING", "command": ["true"]}, handle)


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2], int(sys.argv[3]))
    else:
        main()
