"""When the daemon writes the terminal index (:mod:`vq.store.summaries`).

The file only makes the next start faster, so it is written off the loop, on a thread
of its own, and a failure is logged, never fatal:

* after the start-up load, when that load parsed at least :data:`REWRITE_AFTER` finished
  specs (the file was missing, stale or of another version);
* on the loop, at most every :data:`REFRESH_SECONDS`, once :data:`REWRITE_AFTER` more
  jobs have ended since the last write (a daemon that is killed then loses little);
* at shutdown, when any job ended since the last write (synchronously: the next start
  reads it).
"""

from __future__ import annotations

import logging
import threading
import time

from .index import JobIndex

__all__ = ["REFRESH_SECONDS", "REWRITE_AFTER", "TerminalIndexKeeper"]

log = logging.getLogger(__name__)

#: Finished specs parsed (or ended) since the last write that make a rewrite worth it.
REWRITE_AFTER = 1000
#: The least time between two rewrites while the daemon runs.
REFRESH_SECONDS = 600.0


class TerminalIndexKeeper:
    """Writes one index's summaries at the moments the module doc names."""

    def __init__(self, index: JobIndex) -> None:
        self._index = index
        self._saved_generation: int | None = None
        self._saved_finished = 0
        self._saved_at = time.monotonic()
        self._thread: threading.Thread | None = None
        self._loaded = False  # nothing is written for an index that was never loaded

    def after_load(self, summarized: int) -> None:
        """The index was just loaded, ``summarized`` finished jobs from the file."""
        self._loaded = True
        finished = self._index.finished_count()
        self._saved_finished = summarized
        self._saved_generation = None if finished > summarized else self._index.generation
        if finished - summarized >= REWRITE_AFTER:
            self._save_in_background()

    def tick(self) -> None:
        """On the loop: rewrite when enough jobs ended since the last write."""
        if not self._loaded or time.monotonic() - self._saved_at < REFRESH_SECONDS:
            return
        if abs(self._index.finished_count() - self._saved_finished) >= REWRITE_AFTER:
            self._save_in_background()

    def close(self) -> None:
        """At shutdown: wait for a write under way, then write if anything changed."""
        if self._thread is not None:
            self._thread.join()
        if self._loaded and self._saved_generation != self._index.generation:
            self._save()

    def _save_in_background(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._saved_at = time.monotonic()
        self._thread = threading.Thread(target=self._save, name="vq-terminal-index", daemon=True)
        self._thread.start()

    def _save(self) -> None:
        generation = self._index.generation
        started = time.monotonic()
        try:
            count = self._index.save_summaries()
        except OSError as exc:
            log.warning("terminal index not written (the next start parses more): %s", exc)
            return
        self._saved_at = time.monotonic()
        self._saved_generation = generation
        self._saved_finished = count
        log.info(
            "terminal index written: %d finished jobs in %.2f s", count, time.monotonic() - started
        )
