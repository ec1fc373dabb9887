"""Physical floors measured in the same run (informational): process spawn, durable write."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common import Figure, Result, scaled


def spawn_true() -> Result:
    """``subprocess.run(["/bin/true"])``: fork+exec+wait of the cheapest program."""
    n = scaled(200, minimum=20)
    for _ in range(10):
        subprocess.run(["/bin/true"], check=True)
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run(["/bin/true"], check=True)
        samples.append((time.perf_counter() - start) * 1000)
    return Result(
        "floor_spawn",
        "floor: fork+exec /bin/true (subprocess.run)",
        Figure("subprocess.run(['/bin/true'])", "ms", samples),
    )


def atomic_write() -> Result:
    """One fsync'd atomic 1 KB write (vq._fs.atomic_write_bytes), on the state roots' fs."""
    from vq._fs import atomic_write_bytes

    n = scaled(200, minimum=20)
    directory = Path(tempfile.mkdtemp(prefix="vq-bench-fsync-", dir="/tmp"))
    try:
        payload = os.urandom(512).hex().encode()  # 1,024 bytes
        target = directory / "spec.json"
        for _ in range(5):
            atomic_write_bytes(target, payload)
        samples = []
        for _ in range(n):
            start = time.perf_counter()
            atomic_write_bytes(target, payload)
            samples.append((time.perf_counter() - start) * 1000)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return Result(
        "floor_atomic_write",
        "floor: atomic 1 KB write + fsync + dir fsync",
        Figure("vq._fs.atomic_write_bytes, 1 KB", "ms", samples),
    )


def run() -> list[Result]:
    return [spawn_true(), atomic_write()]
