"""Group commit: several fsync'd spec writes paid for with about one disk flush.

A durable spec write costs two flushes (the file, then the queue directory for the
rename); on a busy disk each is milliseconds. When several jobs change at once (a
dispatch pass claiming a batch), :func:`commit_group` runs each job's whole locked
read → mutate → write on its own worker thread with the file fsync'd but the directory
not, so the file fsyncs overlap (the filesystem coalesces concurrent fsyncs into one
journal commit), then fsyncs the queue directory once. Only after it returns is any of
the writes durable, and only then may the caller act on them (launch the claimed jobs).

Every worker holds exactly one spec lock, for its own job, so the one-lock-at-a-time
rule of :func:`vq._fs.spec_lock` holds. A worker's exception is re-raised in the caller
for that item only (the others still complete and are synced).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from .specs import SpecStore

__all__ = ["GroupResult", "commit_group"]

T = TypeVar("T")

#: Worker threads shared by every group commit of this process (a dispatch pass claims at
#: most one job per free slot, so a handful covers the usual batch); also the window a
#: larger batch is handed over in.
_WORKERS = 8
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="vq-commit")
        return _pool


class GroupResult(list[T | BaseException]):
    """One entry per write, in the given order: its result or the exception it raised."""


def commit_group(store: SpecStore, writes: Sequence[Callable[[bool], T]]) -> GroupResult[T]:
    """Run ``writes`` concurrently, then make them all durable with one directory fsync.

    Each write is called with ``sync_dir=False`` as its only argument and must pass it to
    :meth:`SpecStore.update` or :meth:`SpecStore.create` (it still fsyncs its own file).
    A single write runs inline with ``sync_dir=True`` (nothing to share).

    The pool is shared (the daemon's dispatch claims, a submit's array on an RPC thread):
    a batch is handed to it one window of :data:`_WORKERS` writes at a time, so another
    caller's group waits behind at most one window, not behind a 2,000-element array.
    """
    out: GroupResult[T] = GroupResult()
    if len(writes) == 1:
        try:
            out.append(writes[0](True))
        except Exception as exc:  # reported per item, like the batched path
            out.append(exc)
        return out
    pool = _executor()
    for start in range(0, len(writes), _WORKERS):
        window = [pool.submit(write, False) for write in writes[start : start + _WORKERS]]
        for future in window:
            try:
                out.append(future.result())
            except Exception as exc:
                out.append(exc)
    store.sync()
    return out
