"""Handlers of the read methods over the index: ``list`` and ``wait_change``.

``list`` takes the filters of :class:`~vq.services.query.ListFilter` and the paging
parameters of :mod:`vq.services.listing`; every listing first re-checks the spec files
for other writers' changes, unless ``max_age`` says a check that recent is good enough
(the check is one directory stat while nothing was renamed into the queue, see
``JobIndex.revalidate``). A listing filtered by state walks only those states' specs.

``wait_change`` is the long-poll behind ``GET /api/v1/jobs/{id}/wait``: it answers at
once when the job is terminal or its state differs from ``since_state``, else blocks on
the index's ``changed`` condition (never holding the index lock while blocked) until the
state changes or ``timeout`` seconds pass. Every second it re-reads the spec, so writers
outside the daemon are seen too, and checks its connection (``peer_closed``): a caller
that hung up frees the thread within a second (``abandoned: true``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from vq.domain.states import JobState
from vq.errors import InvalidInput, NotFound
from vq.protocol.methods import (
    ListParams,
    ListResult,
    StatusParams,
    WaitChangeParams,
    WaitChangeResult,
)
from vq.services.context import ServiceContext
from vq.services.listing import page_of, page_params
from vq.services.query import ListFilter, list_row, select, wait_answer

from ..index import JobIndex
from .views import IndexViews

__all__ = ["ReadHandlers"]


def _since_state(value: str | None) -> JobState | None:
    if value is None:
        return None
    if value.upper() not in JobState.__members__:
        raise InvalidInput(
            f"since_state {value!r} is not a job state",
            hint="states are " + ", ".join(s.value for s in JobState),
        )
    return JobState[value.upper()]


class ReadHandlers:
    """``list`` and ``wait_change`` over one index.

    ``status`` builds the job view a ``wait_change`` answer embeds; ``peer_closed``
    says whether the caller of the request being served hung up.
    """

    def __init__(
        self,
        ctx: ServiceContext,
        index: JobIndex,
        views: IndexViews,
        status: Callable[[StatusParams], Any],
        peer_closed: Callable[[], bool],
    ) -> None:
        self._ctx = ctx
        self._index = index
        self._views = views
        self._status = status
        self._peer_closed = peer_closed

    def list(self, params: ListParams) -> ListResult:
        query = params.query()
        flt = ListFilter.from_params(query)
        paging = page_params(query)
        self._index.revalidate(params.max_age)
        now = self._ctx.now()
        if paging is None:
            page = None
            pool = self._index.in_states(flt.states) if flt.states else self._index.all()
            specs = select(pool, flt)
        else:
            page = page_of(self._views.ordering(flt, paging), paging)
            specs = page.specs
        answer: dict[str, Any] = {
            "jobs": [list_row(spec, self._ctx.base_caps, now, self._ctx.lanes) for spec in specs],
            "quarantined": [
                item.as_dict()
                for item in (*self._index.quarantined.values(), *self._ctx.store.impostor_copies())
            ],
            "counts": {state.value: 0 for state in JobState} | self._index.counts(),
        }
        if page is not None:
            answer.update(total=page.total, total_jobs=page.total_jobs)
        return ListResult.model_construct(set(answer), **answer)

    def wait_change(self, params: WaitChangeParams) -> WaitChangeResult:
        job_id = params.id
        since = _since_state(params.since_state)
        deadline = time.monotonic() + params.timeout
        store = self._ctx.store
        spec = store.read(job_id)
        cached = self._index.get(job_id)
        if cached is None or cached.state is not spec.state:
            self._index.upsert(spec)
        baseline = spec.state if since is None else since
        while not spec.is_terminal and spec.state is baseline:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._index.wait_for_change(job_id, baseline, min(remaining, 1.0))
            if self._peer_closed():  # nobody to answer: free this thread now
                return WaitChangeResult(id=job_id, state=spec.state.value, abandoned=True)
            try:
                spec = store.read(job_id)  # the disk decides, not the cache
            except NotFound:
                raise NotFound(f"job {job_id} was deleted while waiting") from None
        view = self._status(StatusParams(id=job_id)).model_dump(mode="json")
        return WaitChangeResult.model_validate(wait_answer(spec, baseline, view))
