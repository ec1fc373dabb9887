"""Terminal bookkeeping: what happens once for every job that has fully ended.

Listeners run on the loop, in order; one that raises is logged and the others still
run. The daemon registers the rerun policy (``--rerun-until-file-exists``), the
workdir sweep (``--clean-workdir``) and the terminal webhook.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from vq.cleanup.jobs import sweep_workdir
from vq.domain.spec import JobSpec
from vq.errors import VqError
from vq.services.context import ServiceContext
from vq.services.rerun import maybe_rerun

__all__ = ["EndedJobs"]

log = logging.getLogger("vq.daemon")


class EndedJobs:
    """Runs the terminal listeners for each ended job.

    ``remember`` records a spec the bookkeeping wrote (a rerun sibling, a swept job)
    in the daemon's index.
    """

    def __init__(
        self,
        ctx: ServiceContext,
        remember: Callable[[JobSpec], None],
        extra: Iterable[Callable[[JobSpec], None]] = (),
    ) -> None:
        self._ctx = ctx
        self._remember = remember
        self.listeners: list[Callable[[JobSpec], None]] = [self._rerun, self._sweep, *extra]

    def job_ended(self, spec: JobSpec) -> None:
        """Terminal bookkeeping for one ended job (on the loop; never raises)."""
        for listener in self.listeners:
            try:
                listener(spec)
            except Exception:
                log.exception("terminal bookkeeping failed for job %s", spec.id)

    def _rerun(self, spec: JobSpec) -> None:
        sibling = maybe_rerun(self._ctx, spec)
        if sibling is not None:
            self._remember(sibling)

    def _sweep(self, spec: JobSpec) -> None:
        """``--clean-workdir``: remove VQ_WORKDIR off the loop (a big tree takes a while)."""
        if not spec.clean_workdir_on_terminal or spec.workdir_swept_at is not None:
            return

        def work() -> None:
            try:
                self._remember(sweep_workdir(self._ctx, spec))
            except VqError as exc:
                log.warning("job %s: workdir not swept: %s", spec.id, exc.message)

        threading.Thread(target=work, name=f"vq-sweep-{spec.id}", daemon=True).start()
