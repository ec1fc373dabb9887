"""(p) Campaign artifact hashing: publishing a 1 GiB output against ``sha256sum``.

Both sides read the same file from the page cache (it is read once before timing), so the
ratio compares hashing and reading, not the disk. The vq side runs
``vq.store.campaign_tree`` in this process exactly as ``vq campaign artifact-publish``
does (descriptor-relative walk, no-follow opens, 1 MiB reads); ``sha256sum`` is
coreutils. ``VQ_BENCH_SCALE`` scales the size (1.0 → 1 GiB).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common import Figure, Result, Target, scale

SAMPLES = 3


def _write(path: Path, size: int) -> None:
    block = os.urandom(1 << 20)
    with open(path, "wb") as handle:
        written = 0
        while written < size:
            chunk = block[: min(len(block), size - written)]
            handle.write(chunk)
            written += len(chunk)


def artifact_hashing() -> Result:
    from vq.store.campaign_tree import descend, hash_strict

    size = max(1 << 20, int((1 << 30) * scale()))
    directory = Path(tempfile.mkdtemp(prefix="vq-bench-hash-", dir="/tmp"))
    try:
        out = directory / "out"
        out.mkdir()
        target = out / "density.bin"
        _write(target, size)
        subprocess.run(["sha256sum", str(target)], check=True, capture_output=True)  # warm
        ours: list[float] = []
        theirs: list[float] = []
        expected = ""
        for _ in range(SAMPLES):
            start = time.perf_counter()
            proc = subprocess.run(
                ["sha256sum", str(target)], check=True, capture_output=True, text=True
            )
            theirs.append(time.perf_counter() - start)
            expected = proc.stdout.split()[0]
            start = time.perf_counter()
            opened = descend(directory, "out", "benchmark workspace")
            assert opened is not None
            fd, info = opened
            try:
                entries = hash_strict(fd, info, "output")
            finally:
                os.close(fd)
            ours.append(time.perf_counter() - start)
        if entries[0].sha256 != expected:
            raise RuntimeError("vq and sha256sum disagree on the digest")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    mib = size / (1 << 20)
    return Result(
        "campaign_artifact_hash",
        f"(p) campaign: hash a {mib:,.0f} MiB output (artifact-publish)",
        Figure("vq.store.campaign_tree", "s", ours, note=f"{mib / min(ours):,.0f} MiB/s"),
        Figure("sha256sum (coreutils)", "s", theirs, note=f"{mib / min(theirs):,.0f} MiB/s"),
        Target("≤ 1.2× sha256sum", "ratio", 1.2),
    )


def run() -> list[Result]:
    return [artifact_hashing()]
