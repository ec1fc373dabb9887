"""State-root and config-root resolution, and the §2.4 filesystem layout as path arithmetic.

Nothing here touches the disk except :meth:`StatePaths.ensure`, which creates the tree.

State root: ``VQ_STATE_DIR`` → ``$XDG_DATA_HOME/vq`` → ``~/.local/share/vq``.
Config root: ``VQ_CONFIG_DIR`` → ``$XDG_CONFIG_HOME/vq`` → ``~/.config/vq``.

Layout (single user)::

    <state-root>/
      queue/<jobid>.json            authoritative JobSpec
      queue/<jobid>.json.lock       advisory writer lock
      queue/.vq-daemon.lock         one-daemon lock
      jobs/<jobid>/                 workspace: stdout.log, stderr.log, _vq/…, payload
      workdirs/<jobid>/             VQ_WORKDIR scratch
      archive/                      cleanup archives (VQ_ARCHIVE_DIR moves it)
      packs/<name>/pack.json        a packed sweep's roster and attempts (0600)
      daemon.pid  daemon.log  daemon.sock
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from vq import _roots

__all__ = ["StatePaths", "resolve_config_root", "resolve_state_root"]

SPEC_SUFFIX = ".json"


def resolve_state_root(env: Mapping[str, str] | None = None) -> Path:
    """The state root for this environment (not created)."""
    return Path(_roots.state_root(os.environ if env is None else env))


def resolve_config_root(env: Mapping[str, str] | None = None) -> Path:
    """The config root for this environment (not created)."""
    return Path(_roots.config_root(os.environ if env is None else env))


@dataclass(frozen=True)
class StatePaths:
    """Every path of one state root. Pure arithmetic; job ids must already be validated."""

    root: Path
    archive_override: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> StatePaths:
        env = os.environ if env is None else env
        archive = env.get("VQ_ARCHIVE_DIR")
        return cls(
            resolve_state_root(env), Path(archive).expanduser().absolute() if archive else None
        )

    # --- top level -------------------------------------------------------------------
    @cached_property
    def queue_dir(self) -> Path:
        return self.root / "queue"

    @cached_property
    def jobs_dir(self) -> Path:
        return self.root / "jobs"

    @cached_property
    def workdirs_dir(self) -> Path:
        return self.root / "workdirs"

    @cached_property
    def packs_dir(self) -> Path:
        return self.root / "packs"

    def pack_file(self, name: str) -> Path:
        """``packs/<name>/pack.json``; ``name`` must already be validated."""
        return self.packs_dir / name / "pack.json"

    @property
    def archive_dir(self) -> Path:
        return self.archive_override or self.root / "archive"

    @property
    def daemon_lock(self) -> Path:
        return self.queue_dir / ".vq-daemon.lock"

    @property
    def daemon_pid(self) -> Path:
        return self.root / "daemon.pid"

    @property
    def daemon_log(self) -> Path:
        return self.root / "daemon.log"

    @property
    def daemon_sock(self) -> Path:
        return self.root / "daemon.sock"

    # --- per job ---------------------------------------------------------------------
    def spec(self, job_id: str) -> Path:
        return self.queue_dir / f"{job_id}{SPEC_SUFFIX}"

    def workspace(self, job_id: str) -> Path:
        return self.jobs_dir / job_id

    def meta_dir(self, job_id: str) -> Path:
        return self.workspace(job_id) / "_vq"

    def events(self, job_id: str) -> Path:
        return self.meta_dir(job_id) / "events.jsonl"

    def exit_code(self, job_id: str) -> Path:
        return self.meta_dir(job_id) / "exit-code"

    def collector_pid(self, job_id: str) -> Path:
        """``<pid> <start ticks>`` of the job's collector, written as it starts."""
        return self.meta_dir(job_id) / "collector.pid"

    def resource_usage(self, job_id: str) -> Path:
        return self.meta_dir(job_id) / "resource-usage.json"

    def samples(self, job_id: str) -> Path:
        return self.meta_dir(job_id) / "samples.jsonl"

    def workdir(self, job_id: str) -> Path:
        return self.workdirs_dir / job_id

    def ensure(self) -> None:
        """Create the state tree (idempotent). The root is private to its owner."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        for directory in (self.queue_dir, self.jobs_dir, self.workdirs_dir):
            directory.mkdir(exist_ok=True)
