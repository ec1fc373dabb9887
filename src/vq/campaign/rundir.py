"""A campaign's run directory: its layout, the journal file and the controller lock.

Layout (docs/campaigns.md)::

    RUN_DIR/journal.json                              vq.campaign-journal/1
    RUN_DIR/controller.lock                           flock held by a controller or cleanup
    RUN_DIR/payloads/<node>/<attempt>/                what an attempt was submitted with
    RUN_DIR/incoming/<node>/<attempt>/                an output while fetched and hashed
    RUN_DIR/artifacts/<node>/<attempt>/<output>       the verified copy of an output
    RUN_DIR/artifacts/<node>/<attempt>/<output>.manifest.json
    RUN_DIR/artifacts/<node>/<attempt>/<output>.seal.json
                                                      its files' stat keys, once published

Contracts: the journal is rewritten atomically (:func:`vq._fs.atomic_write_json`) after
every change and checked (:func:`vq.campaign.journal.check_journal`) every time it is
read; :func:`hold_lock` refuses (Conflict) while another process holds the lock.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from vq._fs import atomic_write_json, try_lock_file
from vq.campaign.files import LoadedCampaign, read_json_file
from vq.campaign.journal import Journal, check_journal, empty_journal, parse_journal
from vq.errors import Conflict, NotFound

__all__ = ["RunDir", "hold_lock", "load_journal", "read_journal", "write_journal"]


@dataclass(frozen=True)
class RunDir:
    root: Path

    @property
    def journal(self) -> Path:
        return self.root / "journal.json"

    @property
    def lock(self) -> Path:
        return self.root / "controller.lock"

    def payload(self, node: str, attempt: int) -> Path:
        return self.root / "payloads" / node / str(attempt)

    def incoming(self, node: str, attempt: int) -> Path:
        return self.root / "incoming" / node / str(attempt)

    def artifact(self, node: str, attempt: int, output: str) -> Path:
        return self.root / "artifacts" / node / str(attempt) / output

    def manifest(self, node: str, attempt: int, output: str) -> Path:
        return self.root / "artifacts" / node / str(attempt) / f"{output}.manifest.json"

    def seal(self, node: str, attempt: int, output: str) -> Path:
        return self.root / "artifacts" / node / str(attempt) / f"{output}.seal.json"


def read_journal(path: Path, loaded: LoadedCampaign) -> Journal:
    """The checked journal at ``path`` (NotFound when absent; JournalRefused when invalid)."""
    journal = parse_journal(read_json_file(path, "journal"), source=str(path))
    check_journal(loaded.campaign, loaded.digest, journal, source=str(path))
    return journal


def load_journal(run_dir: RunDir, loaded: LoadedCampaign) -> Journal:
    """The run directory's checked journal, or an empty one when there is none yet."""
    try:
        return read_journal(run_dir.journal, loaded)
    except NotFound:
        return empty_journal(loaded.campaign, loaded.digest)


def write_journal(run_dir: RunDir, journal: Journal) -> None:
    """Replace the journal atomically and durably."""
    atomic_write_json(run_dir.journal, journal.model_dump(mode="json", exclude_none=True))


@contextlib.contextmanager
def hold_lock(run_dir: RunDir) -> Iterator[None]:
    """Hold ``controller.lock`` for the body; Conflict when another process holds it."""
    if not run_dir.root.is_dir():
        raise NotFound(f"the run directory {run_dir.root} does not exist")
    fd = try_lock_file(run_dir.lock)
    if fd is None:
        raise Conflict(
            f"{run_dir.lock} is held: a campaign controller or cleanup runs on this directory",
            hint="wait for it to finish, or stop it first",
            reference="campaign-locked",
        )
    try:
        yield
    finally:
        os.close(fd)
