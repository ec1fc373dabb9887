"""A campaign node's host that is a remote vq daemon host (``[hosts.NAME]``), over SSH.

:class:`RemoteQueue` implements :class:`vq.campaign.hosts.CampaignHost` with the
same remote verbs ``vq HOST …`` uses (:mod:`vq.remote`), over the host's one SSH
connection:

* ``submit``: ``vq submit HOST --dir PAYLOAD --idempotency-key KEY`` (the payload is
  uploaded as a tar; the remote queue's keyed submission returns the job it already
  accepted under that key). An answer lost after the call may have started is
  :class:`~vq.errors.OutcomeUnknown`: the attempt stays submitting and is resent under
  its key on the next pass.
* ``observe``: one ``vq list --json --name HINT`` on the host per pass.
* ``runtime``: ``vq status ID --json`` once the job was dispatched (a daemon host resolves
  the runtime itself, so a started job's record is proof).
* ``fetch``: the workspace snapshot streamed by the host's ``vq fetch ID --tar-stream``,
  every member checked (:func:`vq.fetch.remote.fetch_workspace_copy`: one SSH call; like
  an artifact fetch it does not stamp the job's ``last_fetched_at``).

A transport failure is a :class:`~vq.errors.TransportError` (a VqError): the controller
retries it next pass and never marks anything failed for it.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from vq.campaign.hosts import (
    ExecutedRuntime,
    Observation,
    SubmitRequest,
    observation_of,
    runtime_of,
)
from vq.fetch.remote import fetch_workspace_copy
from vq.protocol.answers import ListRow
from vq.protocol.remote_answers import ListAnswer, StatusAnswer
from vq.remote.host import RemoteHost, job_words
from vq.remote.submit import delegate_submit, options_from_fields

__all__ = ["RemoteQueue"]


class RemoteQueue:
    """A configured daemon host as a campaign host (see the module docstring)."""

    def __init__(self, host: RemoteHost) -> None:
        self.host = host
        self.name = host.name

    def submit(self, request: SubmitRequest) -> str:
        options = [*options_from_fields(dict(request.fields())), "--idempotency-key", request.key]
        payload = delegate_submit(
            self.host, options, request.command, request.payload, idempotency_key=request.key
        )
        return str(payload["id"])

    def observe(self, job_ids: Sequence[str], name_hint: str) -> dict[str, Observation]:
        wanted = set(job_ids)
        listing = self.host.run_json(["list", "--json", "--name", name_hint], ListAnswer)
        rows: list[ListRow] = listing["jobs"]  # ids and states checked by ListAnswer
        return {str(row["id"]): observation_of(row) for row in rows if row["id"] in wanted}

    def runtime(self, job_id: str, seen: Observation) -> ExecutedRuntime | None:
        view = self.host.run_json(job_words(["status", "--json"], [job_id]), StatusAnswer)
        return runtime_of(view) if view["id"] == job_id else None

    def fetch(self, job_id: str, dest: Path) -> list[dict[str, str]]:
        if dest.exists():
            shutil.rmtree(dest)
        return fetch_workspace_copy(self.host, job_id, dest)

    def close(self) -> None:
        self.host.close()
