"""(q) Publication: ``vq publish DEST --from SRC`` of 1,000 files against ``cp -r`` + ``sync``.

Both sides copy the same tree of 1,000 4 KiB files (10 directories of 100) from the page
cache to a new destination on the same filesystem and make it durable: vq by syncing the
stage (one ``syncfs`` for a tree this size), committing it with a no-replace rename and
syncing the parent; the comparison with coreutils ``cp -r`` then ``sync``. vq's figure is
the whole CLI process (interpreter start included). Runs are interleaved; each destination
is removed after its run, and ``os.sync()`` runs before each timed side so neither
pays for the other's writeback. ``VQ_BENCH_SCALE`` scales the number of runs.

``extra`` splits vq's figure: each round also times ``vq --version`` (the interpreter and
the CLI's start-up, which any ``vq`` command pays), and the publication beyond that floor
is compared with ``cp -r`` + ``sync``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common import VQ, Figure, Result, Target, child_env, scaled

FILES = 1000


def _tree(root: Path) -> None:
    block = bytes(range(256)) * 16
    for directory in range(10):
        sub = root / f"d{directory}"
        sub.mkdir(parents=True)
        for number in range(FILES // 10):
            (sub / f"f{number}.dat").write_bytes(block)


def publish_vs_cp() -> Result:
    runs = scaled(7, minimum=3)
    work = Path(tempfile.mkdtemp(prefix="vq-bench-publish-", dir="/var/tmp"))
    env = child_env({"VQ_STATE_DIR": str(work / "state"), "VQ_CONFIG_DIR": str(work / "cfg")})
    try:
        source = work / "src"
        _tree(source)
        subprocess.run(["sync"], check=True)
        ours: list[float] = []
        theirs: list[float] = []
        floor: list[float] = []  # `vq --version`: the CLI's start-up alone
        for run in range(runs + 1):  # the first round warms both sides up, not counted
            dest = work / f"vq-{run}"
            os.sync()  # each side starts with nothing dirty (the last round's removals)
            start = time.perf_counter()
            subprocess.run(
                [VQ, "publish", str(dest), "--from", str(source)],
                env=env,
                check=True,
                capture_output=True,
            )
            vq_time = time.perf_counter() - start
            if sum(1 for _ in dest.rglob("*.dat")) != FILES:
                raise RuntimeError("vq publish did not copy every file")
            copy = work / f"cp-{run}"
            os.sync()
            start = time.perf_counter()
            subprocess.run(
                ["bash", "-c", 'cp -r "$1" "$2" && sync', "-", str(source), str(copy)],
                check=True,
            )
            cp_time = time.perf_counter() - start
            start = time.perf_counter()
            subprocess.run([VQ, "--version"], env=env, check=True, capture_output=True)
            start_up = time.perf_counter() - start
            if run:
                ours.append(vq_time)
                theirs.append(cp_time)
                floor.append(start_up)
            shutil.rmtree(dest)
            shutil.rmtree(copy)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Result(
        "publish_1000_files",
        f"(q) publish {FILES:,} files (vq publish CLI)",
        Figure("vq publish DEST --from SRC", "s", ours),
        Figure("cp -r SRC DEST && sync", "s", theirs),
        Target("≤ 1.5× cp -r + sync", "ratio", 1.5),
        extra={
            "vq_version_median_s": _median(floor),
            "publish_beyond_start_up_over_cp": (_median(ours) - _median(floor)) / _median(theirs),
            "load_1min": os.getloadavg()[0],
        },
    )


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def run() -> list[Result]:
    return [publish_vs_cp()]
