"""campaign (a) and (c): the campaign controller against real daemons on three hosts.

- campaign (a): a pass over a done 64-node campaign spread over h1..h3 (32 producers, each
  feeding one consumer on the next host, all run to success first by the real controller):
  ``vq campaign run FILE RUN_DIR --once`` as a whole CLI process, timed, and the SSH calls
  it makes, counted on the hosts (a wrapper in ``vq_command`` appends one line per call).
  Targets: ≤ 1 s, and SSH calls ≤ hosts (3).
- campaign (c): relaying a 200 MB output of a job on h1, in process, as a pass does it:
  fetch the workspace over SSH (``vq fetch`` stream), hash the output, publish it through a
  verified stage into ``artifacts/``, and stage it into a consumer's payload verified
  against its manifest. Against ``ssh vq-h1 tar c … | tar x`` over the same master plus
  ``sha256sum``. Target ≤ 1.5×.

Needs root and the testbed (three namespace hosts); reuses remote (b)–(d)'s set-up.
``VQ_BENCH_SCALE`` scales the node count (minimum 8) and the relayed size (minimum 8 MB).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_fleet import _calls, _counted
from bench_remote import HOSTS, VENV_PYTHON, _Fleet
from common import PYTHON, REPO, Figure, Result, Target, scale, scaled

NAMES = {
    "campaign_pass": "campaign (a) `vq campaign run --once` over a done 64-node campaign",
    "campaign_pass_ssh": "campaign (a) SSH calls of that pass (3 hosts)",
    "campaign_relay": "campaign (c) relay 200 MB: fetch, hash, verify, stage",
}


def _campaign(directory: Path, nodes: int) -> Path:
    """``nodes`` // 2 producers round-robin over the hosts, each consumed on the next host."""
    pairs = max(1, nodes // 2)
    items: list[dict[str, Any]] = []
    for i in range(pairs):
        host, other = HOSTS[i % 3], HOSTS[(i + 1) % 3]
        items.append(
            {
                "id": f"p{i}",
                "kind": "compute",
                "host": host,
                "command": ["sh", "-c", f"echo {i} > o.txt"],
                "outputs": [{"name": "o", "path": "o.txt", "kind": "file"}],
            }
        )
        items.append(
            {
                "id": f"c{i}",
                "kind": "other",
                "host": other,
                "command": ["sh", "-c", "cat in.txt > r.txt"],
                "inputs": [{"name": "o", "source": f"p{i}.o", "path": "in.txt"}],
                "outputs": [{"name": "r", "path": "r.txt", "kind": "file"}],
            }
        )
    path = directory / "campaign.json"
    data = {"schema_name": "vq.campaign/1", "campaign_id": "bench-pass", "nodes": items}
    path.write_text(json.dumps(data))
    return path


def _timed_ms(fleet: _Fleet, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = fleet.vq(*args)
    return (time.perf_counter() - start) * 1000, done


def _pass(fleet: _Fleet, base: Path) -> list[Result]:
    nodes = max(8, scaled(64))
    path = _campaign(base, nodes)
    run_dir = base / "run"
    done = subprocess.run(
        [
            PYTHON,
            "-m",
            "vq",
            "campaign",
            "run",
            str(path),
            str(run_dir),
            "--interval",
            "0.5",
            "--json",
        ],
        env=fleet.env(),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the campaign did not succeed: {done.stderr[-2000:]}")
    before = {host: _calls(fleet, host) for host in HOSTS}
    runs = scaled(10, minimum=3)
    times, calls = [], []
    for _ in range(runs):
        counted = {host: _calls(fleet, host) for host in HOSTS}
        elapsed, once = _timed_ms(fleet, "campaign", "run", str(path), str(run_dir), "--once")
        if once.returncode != 0:
            raise RuntimeError(f"--once over the done campaign: {once.stderr[-2000:]}")
        times.append(elapsed)
        calls.append(float(sum(_calls(fleet, host) - counted[host] for host in HOSTS)))
    total = sum(_calls(fleet, host) - before[host] for host in HOSTS)
    note = f"{nodes} nodes, {runs} passes"
    return [
        Result(
            "campaign_pass",
            NAMES["campaign_pass"],
            Figure("vq campaign run --once (whole CLI)", "ms", times, note=note),
            None,
            Target("≤ 1 s", "value", 1000.0),
            extra={"nodes": nodes},
        ),
        Result(
            "campaign_pass_ssh",
            NAMES["campaign_pass_ssh"],
            Figure("SSH calls per pass, all hosts", "calls", calls, note=f"{total} in all"),
            None,
            Target("≤ hosts (3)", "value", 3.0),
        ),
    ]


def _relay(fleet: _Fleet, base: Path) -> Result:
    from vq.campaign.files import read_campaign
    from vq.campaign.journal import Attempt, InputBinding
    from vq.campaign.publish import publish_outputs
    from vq.campaign.remote import RemoteQueue
    from vq.campaign.rundir import RunDir
    from vq.campaign.stage import stage_payload
    from vq.config.hosts import HostSettings
    from vq.domain.artifact import manifest_sha256, parse_manifest
    from vq.remote.fleet import Fleet

    mib = max(8, int(200 * scale()))
    job = fleet.vq(
        "submit", "h1", "--", "sh", "-c", f"mkdir -p out && head -c {mib}M /dev/urandom > out/blob"
    ).stdout.strip()
    waited = fleet.vq("wait", "h1", job)
    if waited.returncode != 0:
        raise RuntimeError(f"the producing job failed: {waited.stderr}")
    data = {
        "schema_name": "vq.campaign/1",
        "campaign_id": "bench-relay",
        "nodes": [
            {
                "id": "make",
                "kind": "compute",
                "host": "h1",
                "command": ["true"],
                "outputs": [{"name": "blob", "path": "out", "kind": "directory"}],
            },
            {
                "id": "use",
                "kind": "other",
                "command": ["true"],
                "inputs": [{"name": "blob", "source": "make.blob", "path": "in"}],
            },
        ],
    }
    (base / "relay.json").write_text(json.dumps(data))
    loaded = read_campaign(base / "relay.json")
    host_settings = HostSettings(
        ssh="vq-h1",
        ssh_options=["-F", str(fleet.ssh_config)],
        vq_command=fleet.vq_command("h1"),
    )
    remote = Fleet({"h1": host_settings}, None, fleet.local).host("h1")
    queue = RemoteQueue(remote)
    producer, consumer = loaded.campaign.nodes
    workspace = fleet.remote_state("h1") / "jobs" / job
    control_dir = base / "cm"
    control_dir.mkdir()
    master = ["-o", f"ControlPath={control_dir}/m", "-o", "ControlMaster=auto"]
    master += ["-o", "ControlPersist=60"]
    ours: list[float] = []
    theirs: list[float] = []
    phases: dict[str, list[float]] = {"fetch": [], "hash+publish": [], "stage": []}
    runs = scaled(3, minimum=2)
    subprocess.run(  # warm both masters
        ["ssh", "-F", str(fleet.ssh_config), *master, "vq-h1", "true"], check=True
    )
    remote.run(["--version"])
    try:
        for round_ in range(runs):
            run_dir = RunDir(base / f"relay-{round_}")
            attempt = Attempt(node="make", attempt=1, state="succeeded", key="k" * 64, job_id=job)
            start = time.perf_counter()
            incoming = run_dir.incoming("make", 1)
            skipped = queue.fetch(job, incoming)
            phases["fetch"].append(time.perf_counter() - start)
            records = publish_outputs(loaded, run_dir, producer, attempt, incoming, skipped)
            phases["hash+publish"].append(time.perf_counter() - start - phases["fetch"][-1])
            if records[0].status != "verified":
                raise RuntimeError(f"publish: {records[0].status} {records[0].message}")
            manifest = parse_manifest(json.loads(run_dir.manifest("make", 1, "blob").read_text()))
            binding = InputBinding(
                name="blob",
                producer="make",
                attempt=1,
                output="blob",
                manifest_sha256=manifest_sha256(manifest),
            )
            stage_payload(loaded, run_dir, consumer, 1, [binding])
            ours.append(time.perf_counter() - start)
            phases["stage"].append(ours[-1] - phases["fetch"][-1] - phases["hash+publish"][-1])
            shutil.rmtree(run_dir.root)
            dest = base / f"tar-{round_}"
            dest.mkdir()
            start = time.perf_counter()
            subprocess.run(
                f"ssh -F {fleet.ssh_config} {' '.join(master)} vq-h1 "
                f"tar c -C {workspace} out | tar x -C {dest}",
                shell=True,
                check=True,
            )
            subprocess.run(
                ["sha256sum", str(dest / "out" / "blob")], check=True, capture_output=True
            )
            theirs.append(time.perf_counter() - start)
            shutil.rmtree(dest)
    finally:
        subprocess.run(
            ["ssh", "-o", f"ControlPath={control_dir}/m", "-O", "exit", "x"],
            capture_output=True,
            check=False,
        )
        remote.close()
    return Result(
        "campaign_relay",
        NAMES["campaign_relay"].replace("200 MB", f"{mib} MB"),
        Figure("fetch + hash + publish + stage (verified)", "s", ours, note=f"{mib} MiB"),
        Figure("ssh tar c | tar x + sha256sum", "s", theirs),
        Target("≤ 1.5×", "ratio", 1.5),
        extra={f"{name}_median_s": sorted(v)[len(v) // 2] for name, v in phases.items()},
    )


def run() -> list[Result]:
    if not Path("/run/netns/vq-h3").exists():
        why = "needs root and the testbed with 3 namespace hosts (VQ_TESTBED_NETNS_HOSTS=3)"
        return [Result(key, name, None, error=why) for key, name in NAMES.items()]
    subprocess.run(
        [VENV_PYTHON, "-m", "compileall", "-q", str(REPO / "src")], capture_output=True, check=False
    )
    base = Path(tempfile.mkdtemp(prefix="vqbc-", dir="/tmp"))
    fleet = _Fleet(base)
    _counted(fleet)
    started: list[str] = []
    try:
        for host in HOSTS:
            done = fleet.ssh(host, *fleet.vq_command(host), "daemon", "start")
            if done.returncode != 0:
                raise RuntimeError(f"remote daemon on {host}: {done.stderr.strip()}")
            started.append(host)
        return [*_pass(fleet, base), _relay(fleet, base)]
    finally:
        for host in started:
            fleet.ssh(host, *fleet.vq_command(host), "daemon", "stop")
            shutil.rmtree(fleet.remote_state(host), ignore_errors=True)
            shutil.rmtree(f"{fleet.remote_state(host)}-config", ignore_errors=True)
            Path(f"{fleet.remote_state(host)}-calls.log").unlink(missing_ok=True)
        for socket in (fleet.runtime / "vq").glob("cm-*"):
            subprocess.run(
                ["ssh", "-o", f"ControlPath={socket}", "-O", "exit", "x"],
                capture_output=True,
                timeout=10,
                check=False,
            )
        shutil.rmtree(base, ignore_errors=True)
