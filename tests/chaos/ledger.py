"""The jobs of a chaos run and their ledger: each job appends ``<id> start`` and
``<id> end`` to a file outside the state root, which tells how often it really ran."""

from __future__ import annotations

import re
import shlex
from collections import Counter
from pathlib import Path

__all__ = ["job_command", "parse_ledger"]

_LEDGER_LINE = re.compile(r"^([0-9a-f]{12}) (start|end)$")


def job_command(ledger: Path, sleep_seconds: float) -> list[str]:
    """argv of one job: a ``start`` line, a sleep, an ``end`` line (one echo per line)."""
    target = shlex.quote(str(ledger))
    script = (
        f'echo "$VQ_JOB_ID start" >> {target}; sleep {sleep_seconds:.2f}; '
        f'echo "$VQ_JOB_ID end" >> {target}'
    )
    return ["sh", "-c", script]


def parse_ledger(ledger: Path) -> tuple[dict[str, Counter[str]], list[str]]:
    """Per job id, how many ``start`` and ``end`` lines; plus any unparsable lines."""
    seen: dict[str, Counter[str]] = {}
    garbage: list[str] = []
    try:
        text = ledger.read_text()
    except FileNotFoundError:
        return seen, garbage
    for line in text.splitlines():
        match = _LEDGER_LINE.match(line)
        if match is None:
            garbage.append(line)
            continue
        seen.setdefault(match.group(1), Counter())[match.group(2)] += 1
    return seen, garbage
