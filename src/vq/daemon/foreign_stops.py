"""Finishing the stops another writer wrote: held jobs whose spec is terminal on disk.

In multi-user mode a user's ``vq kill`` runs in their own CLI: it writes KILLED to the
spec in the owner's tree through the lifecycle writer, then signals the job's group
itself. While that group still holds only root's processes (the collector, or the
command before it drops to the user) the signal is refused, so the kill is durable but
the processes live on. The root daemon finishes it: at each rescan (``Daemon.tick``)
:func:`stop_ended_elsewhere` rereads the spec of every job it holds and cancels the ones
another writer ended.

Contract:

* Candidates are the supervisor's attempts that are launched (a recorded group), not yet
  in their kill grace and not owed an end-of-attempt write
  (:meth:`HeldAttempts.awaiting_stop_check`); nothing else is looked at.
* A candidate whose spec reads terminal is cancelled through the executor protocol
  (``Executor.cancel``: SIGTERM + SIGCONT after the identity check, never to a reused
  pid); when that reached the group its grace starts (:meth:`HeldAttempts.start_grace`),
  and the supervisor's ordinary grace handling sends SIGKILL after it and frees the
  budget once the group is gone.
* A spec that cannot be read this pass (:class:`~vq.errors.VqError`: gone, corrupt) is
  skipped and looked at again at the next rescan. A candidate that is not terminal, or
  whose group the executor did not reach, is left as it is.
* Nothing is written: the state is already terminal, and the lifecycle writer's end of
  attempt runs when the collector exits, as for any kill.
* Loop only: the candidates are loop-owned state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from vq.domain.spec import JobSpec
from vq.errors import VqError
from vq.executors.base import Executor, JobHandle

__all__ = ["HeldAttempts", "stop_ended_elsewhere"]

log = logging.getLogger(__name__)


class HeldAttempts(Protocol):
    """The part of the supervisor this check needs."""

    def awaiting_stop_check(self) -> list[JobHandle]:
        """The held attempts that are launched, not in their grace, owed no write."""
        ...

    def start_grace(self, job_id: str) -> None:
        """A SIGTERM reached this job's group: it is owed the grace before SIGKILL."""
        ...


def stop_ended_elsewhere(
    held: HeldAttempts, read: Callable[[str], JobSpec], executor: Executor
) -> list[str]:
    """Cancel the held jobs whose spec another writer made terminal; their ids, in the
    order they were signalled (see the module's contract)."""
    stopped: list[str] = []
    for handle in held.awaiting_stop_check():
        try:
            ended = read(handle.job_id).is_terminal
        except VqError:
            continue
        if ended and executor.cancel(handle):
            log.info("job %s: ended on disk; SIGTERM to its process group", handle.job_id)
            held.start_grace(handle.job_id)
            stopped.append(handle.job_id)
    return stopped
