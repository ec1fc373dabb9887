"""An invalid config is named as such (not "unknown profile"); `config show` tells values."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import Vq, wait_until


def _config(vq: Vq) -> Path:
    path = Path(vq.env["VQ_CONFIG_DIR"]) / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_profile_of_an_invalid_config_says_the_config_is_invalid(vq: Vq) -> None:
    config = _config(vq)
    config.write_text("[profile.slow]\ncpus = 1\n")
    vq.start_daemon()
    config.write_text('[profile.quick]\ncpus = "many"\n')
    stamp = config.stat().st_mtime_ns
    os.utime(config, ns=(stamp + 10**9, stamp + 10**9))  # a new mtime even on coarse clocks

    def refused() -> str | None:
        proc = vq.run("submit", "--profile", "quick", "--", "true", check=False)
        return proc.stderr if proc.returncode == 9 else None

    stderr = wait_until(refused, timeout=20)
    assert "the configuration is invalid" in stderr
    assert f"{config}:2: profile.quick.cpus" in stderr
    assert "unknown profile" not in stderr and "none are configured" not in stderr
    assert not list((vq.root / "queue").glob("*.json"))


def test_unknown_profile_of_a_valid_config_mentions_reload(vq: Vq) -> None:
    vq.start_daemon()
    proc = vq.run("submit", "--profile", "quick", "--", "true", check=False)
    assert proc.returncode == 3
    assert "unknown profile 'quick'" in proc.stderr and "vq daemon reload" in proc.stderr


def test_without_a_daemon_an_invalid_config_is_named(vq: Vq) -> None:
    _config(vq).write_text('[profile.quick]\ncpus = "many"\n')
    proc = vq.run("submit", "--profile", "quick", "--", "true", check=False)
    assert proc.returncode == 9 and "profile.quick.cpus" in proc.stderr


def test_config_show_prints_effective_values(vq: Vq) -> None:
    lines = vq.run("config", "show").stdout.splitlines()
    cpus = os.cpu_count()
    assert f"daemon.max_cpus = {cpus}  (detected)" in lines
    assert "daemon.max_jobs = unlimited  (default)" in lines
    assert not any(line.endswith("= None  (default)") for line in lines), lines
    assert "quotas.default_max_pending_jobs = unlimited  (default)" in lines
    assert "default_host = localhost (this queue)  (default)" in lines
    assert "daemon.cpu_affinity = true  (default)" in lines
    shown = vq.json("config", "show")
    assert shown["settings"]["daemon.max_cpus"] is None  # the configured value, unchanged
    assert shown["effective"]["daemon.max_cpus"] == cpus
    assert "daemon.max_cpus" in shown["detected"]


def test_profile_takes_wall_time_and_mem_with_units(vq: Vq) -> None:
    config = _config(vq)
    config.write_text('[profile.quick]\ncpus = 1\nwall_time = "10m"\nmem = "2G"\n')
    assert vq.run("config", "check", str(config)).returncode == 0
    job = vq.submit("--profile", "quick", "--", "true")
    spec = vq.spec(job)
    assert (spec["wall_time_seconds"], spec["mem_mb"]) == (600, 2048)
    config.write_text('[profile.quick]\nmem = "2G"\nmem_mb = 100\n')
    both = vq.run("config", "check", str(config), check=False)
    assert both.returncode == 9 and "give mem or mem_mb, not both" in both.stderr
    config.write_text('[profile.quick]\nmem = "lots"\n')
    bad = vq.run("config", "check", str(config), check=False)
    assert bad.returncode == 9 and "profile.quick" in bad.stderr and "mem:" in bad.stderr
    assert "Traceback" not in bad.stderr and "Value error" not in bad.stderr


def test_config_check_without_a_path_checks_the_files_vq_reads(vq: Vq) -> None:
    assert "the defaults apply" in vq.run("config", "check").stdout
    config = _config(vq)
    config.write_text("[daemon]\nmax_jobs = 3\n")
    assert vq.run("config", "check").stdout == f"{config}: valid\n"
    config.write_text('[daemon]\nmax_jobs = "x"\n')
    bad = vq.run("config", "check", check=False)
    assert bad.returncode == 9 and f"{config}:2: daemon.max_jobs" in bad.stderr


def _default_of_hosts(vq: Vq) -> str:
    proc = vq.run("hosts", check=False)
    line = next(line for line in proc.stdout.splitlines() if line.startswith("default host: "))
    return line.removeprefix("default host: ").split()[0]


def _default_of_config_show(lines: list[str]) -> str:
    line = next(line for line in lines if line.startswith("default_host = "))
    return line.removeprefix("default_host = ").split()[0].strip("'")


def test_config_show_lists_lane_keys_only_for_lanes_and_agrees_on_the_default_host(
    vq: Vq,
) -> None:
    """Issue 30 item 13: a plain host shows no lane-only key, and `vq config show` and
    `vq hosts` name the same default host."""
    lane_keys = (
        "scratch_root", "scheduler_driver", "partition", "node_scratch_dir",
        "max_scheduler_jobs", "poll_interval", "scheduler_accounting", "scheduler_min_job_age",
    )  # fmt: skip
    config = _config(vq)
    plain_and_lane = (
        '[hosts.h1]\nssh = "me@h1"\ndown = true\n\n'
        '[hosts.cluster]\nssh = "me@login"\nscheduler_dialect = "slurm"\n'
        'scratch_root = "/scratch/me"\ndown = true\n'
    )
    config.write_text(plain_and_lane)
    lines = vq.run("config", "show").stdout.splitlines()
    plain = [line for line in lines if line.startswith("hosts.h1.")]
    assert "hosts.h1.ssh = 'me@h1'  (user:" + str(config) + ")" in plain
    for key in lane_keys:
        assert not any(line.startswith(f"hosts.h1.{key} ") for line in plain), key
        assert any(line.startswith(f"hosts.cluster.{key} ") for line in lines), key
    assert "default_host = localhost (this queue)  (default)" in lines
    assert _default_of_config_show(lines) == _default_of_hosts(vq) == "localhost"
    assert vq.json("config", "show")["effective"]["default_host"] == "localhost (this queue)"

    config.write_text('default_host = "h1"\n' + plain_and_lane)
    lines = vq.run("config", "show").stdout.splitlines()
    assert f"default_host = 'h1'  (user:{config})" in lines
    assert _default_of_config_show(lines) == _default_of_hosts(vq) == "h1"
