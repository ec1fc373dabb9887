"""The web console and the HTTP API: page and listing latency, detail throughput, the
agent round trip, and 100 long-pollers.

(k) Over 10,000 specs (9 in 10 COMPLETED, 1 in 10 PENDING a day ahead, written straight
    to the store) with the daemon up and a real ``vq web serve``: request latency of the
    queue page ``GET /`` and of ``GET /api/v1/jobs`` (default page), measured one request
    at a time on a keep-alive connection. Target: p95 < 300 ms each. The comparison is
    ``GET /health/live`` on the same server — the cost of the HTTP stack itself.
(l) ``GET /api/v1/jobs/{id}`` requests per second, 4 client threads for a fixed window.
(m) Submit → result round trip of a ``true`` job through the HTTP API with the Python
    client (``submit`` + long-poll ``wait`` until terminal), median and p95, beside the
    same through the CLI (``vq submit -- true`` then ``vq wait ID``) as the comparison.
(n) 100 agents long-polling at once: 100 jobs (``sleep``), held by a drain until 100
    client threads each hold ``GET /api/v1/jobs/{id}/wait``, then released together.
    Reported: how many waiters were woken by their job's end, the wake latency (return −
    the spec's ``finished_at``), and the CPU the daemon (with its collectors' fork
    server) and the web process used meanwhile.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import uuid
from datetime import datetime

import httpx

from common import (
    CLOCK_TICKS,
    VQ,
    Figure,
    Result,
    StateRoot,
    Target,
    cpu_ticks,
    run_checked,
    scaled,
    write_specs,
)
from vq.domain.states import TERMINAL_NAMES as TERMINAL

SPECS = 10_000
PAGE_RUNS = 60
RPS_SECONDS = 5.0
RPS_THREADS = 4
ROUND_TRIPS = 30
WAITERS = 100
WAITER_JOB_SECONDS = 4.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class WebServer:
    """``vq web serve`` on a free loopback port over a bench state root."""

    def __init__(self, state: StateRoot) -> None:
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log = open(state.dir / "web.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [VQ, "web", "serve", "--port", str(self.port)],
            env=state.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.base_url}/health/live", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("vq web serve did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def _token(state: StateRoot) -> str:
    run_checked([VQ, "web", "init-token", "--force"], state.env)
    return (state.config / "web-token").read_text().strip()


def _time_gets(client: httpx.Client, path: str, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        response = client.get(path)
        samples.append((time.perf_counter() - t0) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"GET {path} answered {response.status_code}: {response.text}")
    return samples


def listing() -> list[Result]:
    n = scaled(SPECS, minimum=500)
    runs = scaled(PAGE_RUNS, minimum=10)
    with StateRoot("web") as state:
        ids = write_specs(state, n, pending_every=10)
        state.start_daemon()
        server = WebServer(state)
        try:
            with httpx.Client(base_url=server.base_url, timeout=60) as client:
                listed = client.get("/api/v1/jobs").json()
                if listed.get("total") != n:
                    raise RuntimeError(f"GET /api/v1/jobs total {listed.get('total')} != {n}")
                for path in ("/", "/api/v1/jobs", "/health/live"):  # warm-ups
                    _time_gets(client, path, 3)
                page_ms = _time_gets(client, "/", runs)
                api_ms = _time_gets(client, "/api/v1/jobs", runs)
                floor_ms = _time_gets(client, "/health/live", runs)
            rps, errors = _detail_rps(server.base_url, ids[1::97][:200])
        finally:
            server.stop()
    extra = {"specs": n, "runs": runs}
    floor = Figure("GET /health/live (HTTP stack floor)", "ms", floor_ms, show_p95=True)
    return [
        Result(
            "web_queue_page",
            f"(k) queue page GET / over {n} specs",
            Figure("GET / (p95)", "ms", page_ms, headline="p95", show_p95=True),
            comparison=floor,
            target=Target("p95 < 300 ms", "value", 300.0, strict=True),
            extra=extra,
        ),
        Result(
            "web_api_jobs",
            f"(k) GET /api/v1/jobs over {n} specs",
            Figure("GET /api/v1/jobs (p95)", "ms", api_ms, headline="p95", show_p95=True),
            comparison=floor,
            target=Target("p95 < 300 ms", "value", 300.0, strict=True),
            extra=extra,
        ),
        Result(
            "web_job_detail_rps",
            f"(l) GET /api/v1/jobs/{{id}} throughput, {RPS_THREADS} client threads",
            Figure("requests per second", "req/s", [rps], note=f"{errors} errors"),
            extra={"threads": RPS_THREADS, "seconds": RPS_SECONDS, "errors": errors},
        ),
    ]


def _detail_rps(base_url: str, ids: list[str]) -> tuple[float, int]:
    counts = [0] * RPS_THREADS
    errors = [0] * RPS_THREADS
    stop_at = time.monotonic() + RPS_SECONDS

    def worker(slot: int) -> None:
        with httpx.Client(base_url=base_url, timeout=30) as client:
            i = slot
            while time.monotonic() < stop_at:
                response = client.get(f"/api/v1/jobs/{ids[i % len(ids)]}")
                if response.status_code == 200:
                    counts[slot] += 1
                else:
                    errors[slot] += 1
                i += RPS_THREADS

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(RPS_THREADS)]
    t0 = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - t0), sum(errors)


def round_trip() -> list[Result]:
    from vq.api_client import Client

    runs = scaled(ROUND_TRIPS, minimum=5)
    with StateRoot("web-rt") as state:
        state.start_daemon()
        server = WebServer(state)
        try:
            api = Client(server.base_url, token=_token(state))
            http_ms: list[float] = []
            for i in range(runs + 3):
                t0 = time.perf_counter()
                job = api.submit(["true"], idempotency_key=f"bench-{i}-{uuid.uuid4()}")
                state_now = job.state
                while state_now not in TERMINAL:
                    state_now = api.wait(job.id, timeout=30).state
                if i >= 3:
                    http_ms.append((time.perf_counter() - t0) * 1000)
            cli_ms: list[float] = []
            for i in range(runs + 3):
                t0 = time.perf_counter()
                job_id = run_checked([VQ, "submit", "--", "true"], state.env).stdout.strip()
                run_checked([VQ, "wait", job_id], state.env)
                if i >= 3:
                    cli_ms.append((time.perf_counter() - t0) * 1000)
        finally:
            server.stop()
    return [
        Result(
            "web_round_trip",
            "(m) submit → result of `true` via HTTP + Python client",
            Figure("api_client submit + wait", "ms", http_ms, show_p95=True),
            comparison=Figure("vq submit + vq wait (CLI)", "ms", cli_ms, show_p95=True),
            extra={"runs": runs},
        )
    ]


def _process_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            own, children = cpu_ticks(pid)
        except OSError:
            continue
        total += own
        del children
    return total


def long_pollers() -> list[Result]:
    waiters = scaled(WAITERS, minimum=10)
    with StateRoot("web-wait") as state:
        state.start_daemon(max_jobs=waiters, max_cpus=waiters)
        server = WebServer(state)
        try:
            token = _token(state)
            # Held by a drain so every job starts (and ends) after all waiters are in place.
            run_checked([VQ, "daemon", "drain"], state.env)
            ids = [
                run_checked(
                    [VQ, "submit", "--mem-mb", "10", "--", "sleep", str(WAITER_JOB_SECONDS)],
                    state.env,
                ).stdout.strip()
                for _ in range(waiters)
            ]
            returned: dict[str, float] = {}
            woken: dict[str, bool] = {}
            lock = threading.Lock()
            barrier = threading.Barrier(waiters + 1)

            def waiter(job_id: str) -> None:
                headers = {"Authorization": f"Bearer {token}"}
                with httpx.Client(base_url=server.base_url, timeout=120, headers=headers) as c:
                    barrier.wait()
                    state_now = ""
                    while state_now not in TERMINAL:
                        answer = c.get(
                            f"/api/v1/jobs/{job_id}/wait",
                            params={"timeout": 60, "since_state": state_now or "PENDING"},
                        ).json()
                        state_now = answer["state"]
                    with lock:
                        returned[job_id] = time.time()
                        woken[job_id] = True

            threads = [threading.Thread(target=waiter, args=(j,)) for j in ids]
            for thread in threads:
                thread.start()
            daemon_pids = [state.daemon_pid or 0, *_forkserver_pids(state)]
            web_pid = server.process.pid
            t0 = time.perf_counter()
            d0, w0 = _process_ticks(daemon_pids), _process_ticks([web_pid])
            barrier.wait()
            run_checked([VQ, "daemon", "undrain"], state.env)
            for thread in threads:
                thread.join(timeout=WAITER_JOB_SECONDS * 10 + 120)
            wall = time.perf_counter() - t0
            d1, w1 = _process_ticks(daemon_pids), _process_ticks([web_pid])
        finally:
            server.stop()
        latencies = []
        for job_id, at in returned.items():
            spec = json.loads((state.root / "queue" / f"{job_id}.json").read_text())
            finished = datetime.fromisoformat(spec["finished_at"]).timestamp()
            latencies.append((at - finished) * 1000)
    daemon_cpu = (d1 - d0) / CLOCK_TICKS / wall * 100
    web_cpu = (w1 - w0) / CLOCK_TICKS / wall * 100
    note = f"{sum(woken.values())}/{waiters} woken; daemon {daemon_cpu:.1f} %, web {web_cpu:.1f} %"
    return [
        Result(
            "web_long_poll",
            f"(n) {waiters} agents long-polling while their jobs end",
            Figure("wake latency after finished_at", "ms", latencies, show_p95=True, note=note),
            extra={
                "waiters": waiters,
                "woken": sum(woken.values()),
                "daemon_cpu_percent_of_core": daemon_cpu,
                "web_cpu_percent_of_core": web_cpu,
                "window_seconds": wall,
            },
            error=None if sum(woken.values()) == waiters else "not every waiter was woken",
        )
    ]


def _forkserver_pids(state: StateRoot) -> list[int]:
    from common import children_of

    pid = state.daemon_pid
    return children_of(pid) if pid else []
