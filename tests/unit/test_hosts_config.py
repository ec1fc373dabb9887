"""``[hosts.NAME]`` and ``default_host`` (§2.2): accepted shapes and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from vq.config.hosts import daemon_hosts, is_local_name, lanes_of
from vq.config.settings import load_settings
from vq.errors import ConfigError


def _load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    cfg = tmp_path / "cfg"
    cfg.mkdir(exist_ok=True)
    (cfg / "config.toml").write_text(text)
    return load_settings({"VQ_CONFIG_DIR": str(cfg)}, site_config=tmp_path / "none.toml")


def test_a_host_with_defaults(tmp_path: Path) -> None:
    settings = _load(tmp_path, 'default_host = "h1"\n[hosts.h1]\nssh = "vq@node1"\n')
    host = settings.hosts["h1"]
    assert (host.ssh, host.vq_command, host.host_key_policy) == ("vq@node1", ["vq"], "strict")
    assert (host.scheduler, host.down, host.ssh_timeout) == ("local", False, 10.0)
    assert settings.default_host == "h1"


def test_every_key(tmp_path: Path) -> None:
    settings = _load(
        tmp_path,
        '[hosts.gpu-2]\nssh = "gpu2"\nvq_command = ["/opt/vq/bin/vq"]\nssh_timeout = 3\n'
        'ssh_options = ["-F", "/x/config"]\nhost_key_policy = "accept-new"\ndown = true\n',
    )
    host = settings.hosts["gpu-2"]
    assert host.vq_command == ["/opt/vq/bin/vq"] and host.ssh_options == ["-F", "/x/config"]
    assert host.down and host.host_key_policy == "accept-new" and host.ssh_timeout == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[hosts.H1]\nssh = "a"\n', "hosts: host name 'H1' must match"),
        ('[hosts.-a]\nssh = "a"\n', "host name '-a' must match"),
        ('[hosts."a_b"]\nssh = "a"\n', "host name 'a_b' must match"),
        ("[hosts." + "a" * 64 + ']\nssh = "a"\n', "must match"),
        ('[hosts.localhost]\nssh = "a"\n', "reserved for this queue"),
        ('[hosts.h1]\nssh = "-oProxyCommand=x"\n', "hosts.h1.ssh: must be an SSH alias"),
        ("[hosts.h1]\n", "hosts.h1.ssh: is required"),
        ('[hosts.h1]\nssh = "a"\nflavour = 1\n', "hosts.h1.flavour: unknown key"),
        ('[hosts.h1]\nssh = "a"\nscheduler = "slurm"\n', "hosts.h1.scheduler"),
        ('[hosts.h1]\nssh = "a"\nscheduler_dialect = "slurm"\n', "needs scratch_root"),
        ('[hosts.h1]\nssh = "a"\nscheduler_dialect = "pbspro"\n', "'pbspro' is not implemented"),
        ('[hosts.h1]\nssh = "a"\nscheduler_dialect = "sge"\n', "'sge' is not implemented"),
        ('[hosts.h1]\nssh = "a"\nscheduler_dialect = "lsf"\n', "unknown scheduler_dialect"),
        (
            '[hosts.h1]\nssh = "a"\nscheduler_dialect = "slurm"\nscratch_root = "rel/x"\n',
            "scratch_root must be an absolute path",
        ),
        (
            '[hosts.h1]\nssh = "a"\nscheduler_dialect = "slurm"\nscratch_root = "/s"\n'
            'partition = "a b"\n',
            "hosts.h1.partition",
        ),
        ('[hosts.h1]\nssh = "a"\npartition = "debug"\n', "only apply to a scheduler lane"),
        ('[hosts.h1]\nssh = "a"\nssh_options = ["-o", "StrictHostKeyChecking=no"]\n', "refused"),
        ('[hosts.h1]\nssh = "a"\nvq_command = []\n', "hosts.h1.vq_command"),
        ('default_host = "h9"\n[hosts.h1]\nssh = "a"\n', "default_host: default_host 'h9'"),
    ],
)
def test_refusals_name_the_key(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, text)
    assert expected in caught.value.message
    assert "Value error" not in caught.value.message


def test_localhost_is_always_a_valid_default(tmp_path: Path) -> None:
    assert _load(tmp_path, 'default_host = "localhost"\n').default_host == "localhost"
    assert is_local_name("localhost") and not is_local_name("h1")


def test_a_slurm_lane_with_every_key(tmp_path: Path) -> None:
    settings = _load(
        tmp_path,
        '[hosts.h1]\nssh = "n1"\n'
        '[hosts.cluster]\nssh = "login1"\nscheduler_dialect = "slurm"\n'
        'scratch_root = "/scratch/me"\nscheduler_driver = "localhost"\npartition = "debug"\n'
        'account = "proj-1"\nqos = "normal"\nscheduler_mem_directive = "omit"\n'
        'node_scratch_dir = "/tmp/node"\nprologue = ["module load x"]\nepilogue = ["true"]\n'
        'scheduler_gnu_time_command = "/usr/bin/time"\nmax_scheduler_jobs = 4\n'
        'poll_interval = 5\nscheduler_rpc_per_minute = 60\nscheduler_accounting = "none"\n'
        '[hosts.cluster.scheduler_program_hooks.vasp]\ncommand_wrapper = ["srun"]\n',
    )
    lanes = lanes_of(settings.hosts)
    assert list(lanes) == ["cluster"] and list(daemon_hosts(settings.hosts)) == ["h1"]
    lane = lanes["cluster"]
    assert (lane.dialect, lane.driver, lane.partition, lane.mem_directive) == (
        "slurm",
        "localhost",
        "debug",
        "omit",
    )
    assert lane.remote_workspace("abc") == "/scratch/me/.vibeqc-cluster/jobs/abc"
    assert (lane.max_jobs, lane.poll_interval, lane.rpc_per_minute) == (4, 5.0, 60)
    assert lane.accounting == "none" and lane.prologue == ("module load x",)
    assert lane.program_hooks["vasp"].command_wrapper == ["srun"]


def test_lane_defaults(tmp_path: Path) -> None:
    settings = _load(
        tmp_path, '[hosts.c]\nssh = "l"\nscheduler_dialect = "torque"\nscratch_root = "/s"\n'
    )
    lane = lanes_of(settings.hosts)["c"]
    assert (lane.poll_interval, lane.rpc_per_minute, lane.accounting) == (30.0, 6, "sacct")
    assert (lane.driver, lane.gnu_time_command, lane.mem_directive) == (
        "localhost",
        "/usr/bin/time",
        "request",
    )


def test_a_lane_program_registry_entry_is_checked() -> None:
    from vq.config.hosts import HostSettings

    lane = {"ssh": "login", "scheduler_dialect": "slurm", "scratch_root": "/scratch"}
    entry = {"python": "/opt/fit/bin/python", "git_dir": "/opt/fit/src"}
    settings = HostSettings.model_validate({**lane, "scheduler_programs": {"fit": entry}})
    built = settings.lane("cluster")
    assert built is not None and built.programs["fit"].git_dir == "/opt/fit/src"
    for bad in (
        {"fit/../x": entry},
        {"fit": {**entry, "python": "bin/python"}},
        {"fit": {**entry, "git_dir": "/opt/../src"}},
        {"fit": {**entry, "expected_git_sha": "not-hex"}},
        {"fit": {**entry, "colour": "red"}},
    ):
        with pytest.raises(ValueError):
            HostSettings.model_validate({**lane, "scheduler_programs": bad})
    with pytest.raises(ValueError, match="only apply to a scheduler lane"):
        HostSettings.model_validate({"ssh": "login", "scheduler_programs": {"fit": entry}})
