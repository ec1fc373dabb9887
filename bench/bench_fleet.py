"""fleet (a)–(c): the fleet console (`vq web serve --fleet`) over three namespace hosts.

- fleet (a): p95 of a warm ``GET /fleet`` (3 hosts × 10,000 jobs, requests 1 s apart so
  the 5 s cache refreshes during the run) against its floor, the single-host ``GET /`` p95
  of the same server over a local queue of as many jobs (daemon up) plus one SSH round
  trip of the host read (``vq web fleet-snapshot --json`` over the master connection).
  Target ≤ 1.5×.
- fleet (b): SSH calls per host per minute while 10 browsers each load ``/fleet`` every
  5 s for 30 s, counted on the hosts (a wrapper in ``vq_command`` appends one line per
  call). Target ≤ the page's refresh rate, 12 per minute.
- fleet (c): with h3 partitioned, ``GET /fleet`` once a second for 12 s (past a cache
  refresh): the extra time over the healthy median, summed over every request. Target
  ≤ ``ssh_timeout`` + 1 s: the partition is paid once, not on every refresh.

Each host's private state root (and the local one) is seeded with
``JOBS_PER_HOST`` × ``VQ_BENCH_SCALE`` jobs (at least 2,000, so every host holds more than
a snapshot lists): specs written straight to the store by :func:`common.write_specs_at`,
run *on the host* over SSH as the host's user before its daemon starts (9 in 10
COMPLETED, 1 in 10 PENDING a day ahead, so nothing runs). The daemons are stopped and the
state roots removed afterwards, also when the benchmark fails.

Needs root and the testbed (three namespace hosts); reuses remote (b)–(d)'s set-up.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench_remote import HOSTS, SSH_TIMEOUT, VENV_PYTHON, _Fleet
from common import PYTHON, REPO, Figure, Result, Target, scaled, write_specs_at
from vq.paths import StatePaths

REFRESH_S = 5.0
#: Jobs on each host (and on the local queue of the floor) at scale 1, as issue (a) says.
JOBS_PER_HOST = 10_000
_SEED_TIMEOUT_S = 600.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _counted(fleet: _Fleet) -> None:
    """Rewrite the hosts' vq_command so each SSH call appends a line on the host."""
    tables = []
    for host in HOSTS:
        log = f"{fleet.remote_state(host)}-calls.log"
        command = ["sh", "-c", f'echo x >> {shlex.quote(log)}; exec "$@"', "sh"]
        tables.append(
            f'[hosts.{host}]\nssh = "vq-{host}"\nssh_timeout = {SSH_TIMEOUT}\n'
            f'ssh_options = ["-F", "{fleet.ssh_config}"]\n'
            f"vq_command = {json.dumps(command + fleet.vq_command(host))}\n"
        )
    (fleet.config / "config.toml").write_text("\n".join(tables))


def _calls(fleet: _Fleet, host: str) -> int:
    path = Path(f"{fleet.remote_state(host)}-calls.log")
    return len(path.read_text().splitlines()) if path.exists() else 0


def _seed(fleet: _Fleet, host: str, jobs: int) -> None:
    """Write ``jobs`` specs into ``host``'s state root, on the host, as its user."""
    code = (
        "from vq.paths import StatePaths; from common import write_specs_at; "
        f"write_specs_at(StatePaths.from_env(), {jobs}, pending_every=10)"
    )
    command = fleet.vq_command(host)
    words = [
        *command[: command.index(VENV_PYTHON)],
        f"PYTHONPATH={REPO / 'src'}:{REPO / 'bench'}",
        VENV_PYTHON,
        "-B",
        "-c",
        code,
    ]
    done = subprocess.run(
        ["ssh", "-F", str(fleet.ssh_config), f"vq-{host}", shlex.join(words)],
        capture_output=True,
        text=True,
        timeout=_SEED_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"seeding {host}: {done.stderr.strip()[-400:]}")


def _get_ms(client: httpx.Client, path: str) -> float:
    start = time.perf_counter()
    answer = client.get(path)
    if answer.status_code != 200:
        raise RuntimeError(f"GET {path}: {answer.status_code}")
    return (time.perf_counter() - start) * 1000


def run() -> list[Result]:
    jobs = scaled(JOBS_PER_HOST, minimum=2000)
    names = {
        "fleet_page": f"fleet (a) warm GET /fleet, 3 hosts × {jobs:,} jobs, vs GET / + SSH read",
        "fleet_calls": "fleet (b) SSH calls per host per minute, 10 browsers",
        "fleet_partition": "fleet (c) GET /fleet with h3 partitioned: total extra time",
    }
    if not Path("/run/netns/vq-h3").exists():
        why = "needs root and the testbed with 3 namespace hosts (VQ_TESTBED_NETNS_HOSTS=3)"
        return [Result(key, name, None, error=why) for key, name in names.items()]
    subprocess.run(
        [VENV_PYTHON, "-m", "compileall", "-q", str(REPO / "src")], capture_output=True, check=False
    )
    base = Path(tempfile.mkdtemp(prefix="vqbf-", dir="/tmp"))
    fleet = _Fleet(base)
    _counted(fleet)
    started: list[str] = []
    server = None
    local_daemon = False
    try:
        for host in HOSTS:
            started.append(host)  # from here on its state root is removed at the end
            _seed(fleet, host, jobs)
            done = fleet.ssh(host, *fleet.vq_command(host), "daemon", "start")
            if done.returncode != 0:
                raise RuntimeError(f"remote daemon on {host}: {done.stderr.strip()}")
        write_specs_at(StatePaths.from_env(fleet.env()), jobs, pending_every=10)
        done = fleet.vq("daemon", "start", "--allow-root")
        if done.returncode != 0:
            raise RuntimeError(f"local daemon: {done.stderr.strip()}")
        local_daemon = True
        port = _free_port()
        server = subprocess.Popen(
            [PYTHON, "-m", "vq", "web", "serve", "--fleet", "--port", str(port)],
            env=fleet.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if client.get("/health/live").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("vq web serve --fleet did not start")
                time.sleep(0.2)
            return [
                _page(fleet, client, names["fleet_page"], jobs),
                _browsers(fleet, client, names["fleet_calls"]),
                _partition(fleet, client, names["fleet_partition"]),
            ]
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)
        if local_daemon:
            fleet.vq("daemon", "stop")
        for host in started:
            fleet.ssh(host, *fleet.vq_command(host), "daemon", "stop")
            shutil.rmtree(fleet.remote_state(host), ignore_errors=True)
            shutil.rmtree(f"{fleet.remote_state(host)}-config", ignore_errors=True)
            Path(f"{fleet.remote_state(host)}-calls.log").unlink(missing_ok=True)
        for control in (fleet.runtime / "vq").glob("cm-*"):
            subprocess.run(
                ["ssh", "-o", f"ControlPath={control}", "-O", "exit", "x"],
                capture_output=True,
                timeout=10,
                check=False,
            )
        shutil.rmtree(base, ignore_errors=True)


def _page(fleet: _Fleet, client: httpx.Client, name: str, jobs: int) -> Result:
    for _ in range(3):
        _get_ms(client, "/fleet")  # warm: master connections, bytecode, cache
    n = scaled(20, minimum=8)
    fleet_ms, single_ms = [], []
    for _ in range(n):
        fleet_ms.append(_get_ms(client, "/fleet"))
        single_ms.append(_get_ms(client, "/"))
        time.sleep(1.0)
    control = next((fleet.runtime / "vq").glob("cm-*"))
    reads = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run(
            [
                "ssh",
                "-F",
                str(fleet.ssh_config),
                "-o",
                f"ControlPath={control}",
                "vq-h1",
                shlex.join([*fleet.vq_command("h1"), "web", "fleet-snapshot", "--json"]),
            ],
            check=False,
            capture_output=True,
        )
        reads.append((time.perf_counter() - start) * 1000)
    floor = [a + b for a, b in zip(sorted(single_ms), sorted(reads), strict=True)]
    return Result(
        "fleet_page",
        name,
        Figure("GET /fleet (3 hosts, warm)", "ms", fleet_ms, headline="p95", show_p95=True),
        Figure("GET / + ssh host read (muxed)", "ms", floor, headline="p95"),
        Target("≤ 1.5× (p95)", "ratio", 1.5),
        extra={
            "jobs_per_host": jobs,
            "single_host_page_ms": sorted(single_ms),
            "ssh_host_read_ms": sorted(reads),
            "load_average": os.getloadavg(),
        },
    )


def _browsers(fleet: _Fleet, client: httpx.Client, name: str) -> Result:
    window = max(20.0, 30.0 * min(1.0, scaled(1, minimum=1)))
    before = {host: _calls(fleet, host) for host in HOSTS}
    stop = time.monotonic() + window
    errors: list[str] = []

    def browser(offset: float) -> None:
        time.sleep(offset)
        with httpx.Client(base_url=client.base_url, timeout=60) as own:
            while time.monotonic() < stop:
                try:
                    own.get("/fleet/fragments/fleet")
                except httpx.HTTPError as exc:
                    errors.append(str(exc))
                time.sleep(REFRESH_S)

    threads = [threading.Thread(target=browser, args=(i * 0.5,)) for i in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    per_minute = [(_calls(fleet, h) - before[h]) * 60.0 / window for h in HOSTS]
    return Result(
        "fleet_calls",
        name,
        Figure("SSH calls per host per minute", "calls/min", per_minute, headline="max"),
        None,
        Target(f"≤ {60 / REFRESH_S:.0f}/min (one browser's refresh rate)", "value", 60 / REFRESH_S),
        extra={"window_s": window, "browsers": 10, "errors": errors[:3]},
    )


def _partition(fleet: _Fleet, client: httpx.Client, name: str) -> Result:
    healthy = sorted(_get_ms(client, "/fleet") for _ in range(5))[2]
    extra: list[float] = []
    with fleet.partition("h3"):
        for _ in range(scaled(12, minimum=8)):  # ≥ 8 s: at least one cache refresh
            extra.append(max(0.0, _get_ms(client, "/fleet") - healthy) / 1000)
            time.sleep(1.0)
    limit = SSH_TIMEOUT + 1.0
    return Result(
        "fleet_partition",
        name,
        Figure("extra seconds over all requests (sum)", "s", [sum(extra)]),
        None,
        Target(f"≤ ssh_timeout + 1 s = {limit:g} s (paid once)", "value", limit),
        extra={
            "per_request_extra_s": [round(x, 3) for x in extra],
            "requests_over_1s": sum(1 for x in extra if x > 1.0),
            "healthy_median_ms": healthy,
        },
    )
