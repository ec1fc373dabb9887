"""Packing profiles: every refusal names its key path and line; layers never merge a profile."""

from __future__ import annotations

from pathlib import Path

import pytest

from vq.config.settings import check_file, load_settings, packing_profiles
from vq.errors import ConfigError
from vq.packing.profiles import ProfileError, select_profile
from vq.packing.timelimit import TimeLimitError, format_minutes, parse_time_limit

GOOD = """\
default_packing = "research"

[packing.research.target]
host = "cluster-a"
work_root = "/cluster/work/project"
log_root = "/cluster/logs/project"
partitions = ["gpu", "gpu-long"]
account = "research"
gpu_gres = "gpu"
max_tasks_per_allocation = 4
max_cpus_per_allocation = 128
max_memory_mib_per_allocation = 262144
max_gpus_per_allocation = 4
max_time_limit = "7-00:00:00"
max_allocations_per_submit = 64
max_script_bytes = 4194304

[packing.research.resources]
cpus_per_task = 32
memory_mib_per_task = 65536
gpus_per_task = 1
time_limit = "3-00:00:00"

[packing.cpu.target]
host = "cluster-a"
work_root = "/cluster/work/cpu"
log_root = "/cluster/logs/cpu"
partitions = ["normal"]
max_tasks_per_allocation = 8
max_cpus_per_allocation = 8
max_memory_mib_per_allocation = 8192
max_gpus_per_allocation = 0
max_time_limit = "04:00:00"
max_allocations_per_submit = 8
max_script_bytes = 65536

[packing.cpu.resources]
cpus_per_task = 1
memory_mib_per_task = 512
gpus_per_task = 0
time_limit = "00:10:30"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def _line_of(text: str, needle: str) -> int:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(needle):
            return number
    raise AssertionError(needle)


def _refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        check_file(_write(tmp_path, text))
    assert caught.value.exit_code == 9
    assert caught.value.hint
    return caught.value.message


def test_a_good_file_loads_both_profiles(tmp_path: Path) -> None:
    settings = check_file(_write(tmp_path, GOOD))
    profiles = packing_profiles(settings)
    assert sorted(profiles) == ["cpu", "research"]
    cpu = profiles["cpu"]
    assert cpu.resources.time_minutes == 11  # 10:30 rounds up once
    assert cpu.target.gpu_gres is None
    assert select_profile(profiles, settings.default_packing, None).name == "research"
    assert select_profile(profiles, settings.default_packing, "cpu").name == "cpu"
    with pytest.raises(ProfileError):
        select_profile(profiles, None, "nope")


# (what to replace, its replacement, the key path in the error, words of the reason)
REFUSALS = [
    (
        "max_tasks_per_allocation = 8",
        "max_tasks_per_allocation = 0",
        "packing.cpu.target.max_tasks_per_allocation",
        "at least 1",
    ),
    (
        "max_tasks_per_allocation = 8",
        "max_tasks_per_allocation = true",
        "packing.cpu.target.max_tasks_per_allocation",
        "must be a whole number, not true or false",
    ),
    (
        "max_tasks_per_allocation = 8",
        "max_tasks_per_allocation = -1",
        "packing.cpu.target.max_tasks_per_allocation",
        "unlimited",
    ),
    (
        'max_time_limit = "04:00:00"',
        'max_time_limit = "UNLIMITED"',
        "packing.cpu.target.max_time_limit",
        "unlimited",
    ),
    (
        'time_limit = "00:10:30"',
        'time_limit = "10:30"',
        "packing.cpu.resources.time_limit",
        "hours:minutes:seconds",
    ),
    (
        'time_limit = "00:10:30"',
        'time_limit = "1-25:00:00"',
        "packing.cpu.resources.time_limit",
        "canonical",
    ),
    (
        'time_limit = "00:10:30"',
        'time_limit = "00:00:00"',
        "packing.cpu.resources.time_limit",
        "zero",
    ),
    ('gpu_gres = "gpu"', 'gpu_gres = "gpu:2"', "packing.research.target.gpu_gres", "counted GRES"),
    (
        'gpu_gres = "gpu"',
        'gpu_gres = "gpu:a100:2"',
        "packing.research.target.gpu_gres",
        "counted GRES",
    ),
    (
        'work_root = "/cluster/work/cpu"',
        'work_root = "cluster/work"',
        "packing.cpu.target.work_root",
        "absolute",
    ),
    (
        'log_root = "/cluster/logs/cpu"',
        'log_root = "/cluster/../etc"',
        "packing.cpu.target.log_root",
        "safe absolute path",
    ),
    (
        'account = "research"',
        'account = "re search"',
        "packing.research.target.account",
        "safe Slurm name",
    ),
    (
        'account = "research"',
        'account = "re\\u0007s"',
        "packing.research.target.account",
        "control characters",
    ),
    (
        'partitions = ["normal"]',
        'partitions = ["normal;rm"]',
        "packing.cpu.target.partitions.0",
        "safe Slurm name",
    ),
    ('partitions = ["normal"]', "partitions = []", "packing.cpu.target.partitions", "empty"),
    (
        'host = "cluster-a"\nwork_root = "/cluster/work/cpu"',
        'host = "a b"\nwork_root = "/cluster/work/cpu"',
        "packing.cpu.target.host",
        "lane name",
    ),
    ("gpus_per_task = 0", "gpus_per_task = 1", "packing.cpu.resources", "gpu_gres"),
    (
        "max_gpus_per_allocation = 0",
        "max_gpus_per_allocation = 2",
        "packing.cpu.target",
        "gpu_gres is omitted",
    ),
    ("cpus_per_task = 1", "cpus_per_task = 9", "packing.cpu.resources", "cpus_per_task exceeds"),
    (
        'time_limit = "00:10:30"',
        'time_limit = "05:00:00"',
        "packing.cpu.resources",
        "time_limit exceeds",
    ),
    (
        "max_script_bytes = 65536",
        "max_script_bytes = 65536\nslurm_flags = '--exclusive'",
        "packing.cpu.target.slurm_flags",
        "unknown key",
    ),
    (
        "max_script_bytes = 65536",
        'max_script_bytes = 65536\napptainer = "/usr/bin/apptainer"',
        "packing.cpu.target",
        "apptainer and image",
    ),
    ("gpus_per_task = 0\n", "", "packing.cpu.resources.gpus_per_task", "is required"),
    (
        'default_packing = "research"',
        'default_packing = "nope"',
        "default_packing",
        "names no profile",
    ),
]


@pytest.mark.parametrize(("old", "new", "loc", "words"), REFUSALS)
def test_each_refusal_names_the_key_and_its_line(
    tmp_path: Path, old: str, new: str, loc: str, words: str
) -> None:
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    message = (
        _refusal(tmp_path, text) if loc != "default_packing" else _merged_refusal(tmp_path, text)
    )
    assert f": {loc}: " in message, message
    assert words in message, message
    assert "Value error" not in message and "Input should" not in message
    if loc == "default_packing":
        return
    parts = [part for part in loc.split(".") if not part.isdigit()]
    where = message.split(":")[1]
    assert where.isdigit(), message
    header = _line_of(text, "[" + ".".join(parts[:3]) + "]") if len(parts) >= 3 else 0
    lines = text.splitlines()
    expected = header  # a table-level problem or a missing key: its table's header
    for number in range(header, len(lines)):
        if lines[number].startswith(f"{parts[-1]} ="):
            expected = number + 1
            break
        if number > header and lines[number].startswith("["):
            break
    assert int(where) == expected, message


def _merged_refusal(tmp_path: Path, text: str) -> str:
    config = tmp_path / "cfg"
    config.mkdir()
    (config / "config.toml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings({"VQ_CONFIG_DIR": str(config)}, site_config=tmp_path / "none.toml")
    return caught.value.message


def test_an_incomplete_profile_is_refused_even_unselected(tmp_path: Path) -> None:
    text = GOOD + '\n[packing.spare.target]\nhost = "x"\n'
    message = _refusal(tmp_path, text)
    assert "packing.spare" in message and "is required (a profile is complete" in message


def test_a_profile_lives_whole_in_one_layer(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text(GOOD)
    config = tmp_path / "cfg"
    config.mkdir()
    (config / "config.toml").write_text("[packing.cpu.resources]\ncpus_per_task = 2\n")
    with pytest.raises(ConfigError) as caught:
        load_settings({"VQ_CONFIG_DIR": str(config)}, site_config=site)
    assert "packing.cpu" in caught.value.message
    # A different profile in the user layer is fine, and the site's default still resolves.
    user_profile = GOOD.split("[packing.cpu.target]")[1].replace("/cpu", "/mine")
    (config / "config.toml").write_text(
        "[packing.mine.target]"
        + user_profile.replace("[packing.cpu.resources]", "[packing.mine.resources]")
    )
    settings = load_settings({"VQ_CONFIG_DIR": str(config)}, site_config=site)
    assert sorted(packing_profiles(settings)) == ["cpu", "mine", "research"]


def test_time_limits() -> None:
    assert parse_time_limit("1-02:03:04") == 93784
    assert parse_time_limit("48:00:00") == 172800
    assert format_minutes(61) == "01:01:00"
    assert format_minutes(24 * 60 + 1) == "1-00:01:00"
    for bad in ("", "1:00:00", "00:60:00", "INFINITE", "-1", "1-24:00:00"):
        with pytest.raises(TimeLimitError):
            parse_time_limit(bad)
