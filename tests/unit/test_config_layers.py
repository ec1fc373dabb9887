"""Layering and precedence of the configuration (property test over random layers)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from vq.config.settings import line_of, load_settings

KEYS = ("max_jobs", "max_cpus", "default_job_mem_mb")
layer = st.fixed_dictionaries({}, optional={key: st.integers(1, 64) for key in KEYS})


def _toml(values: dict[str, int]) -> str:
    return "[daemon]\n" + "".join(f"{k} = {v}\n" for k, v in values.items()) if values else ""


@settings(max_examples=60, deadline=None)
@given(site=layer, user=layer, flags=layer)
def test_last_layer_wins_key_by_key(
    site: dict[str, int], user: dict[str, int], flags: dict[str, int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "site.toml").write_text(_toml(site))
        (root / "user").mkdir()
        (root / "user" / "config.toml").write_text(_toml(user))
        loaded = load_settings(
            {"VQ_CONFIG_DIR": str(root / "user")},
            {"daemon": flags} if flags else None,
            site_config=root / "site.toml",
        )
    for key in KEYS:
        expected = flags.get(key, user.get(key, site.get(key)))
        assert getattr(loaded.daemon, key) == expected


def test_line_of_finds_keys_under_their_table() -> None:
    text = "[daemon]\nmax_jobs = 2\n\n[watchdog]\n# c\nbogus = 1\n\n[profile.a]\ncpu = 2\n"
    assert line_of(text, ("daemon", "max_jobs")) == 2
    assert line_of(text, ("watchdog", "bogus")) == 6
    assert line_of(text, ("profile", "a", "cpu")) == 9
    assert line_of(text, ("nothing", "here")) is None
