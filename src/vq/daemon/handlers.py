"""RPC methods: one small function per method, each calling the shared services.

Methods: ``ping``, ``wake``, ``submit``, ``status``, ``wait_change``, ``list``, ``kill``,
``pause``, ``resume``. Every mutation
goes through the same service the CLI uses when no daemon runs, so the two paths cannot
drift apart; the daemon additionally updates its index and wakes its loop.

``list`` takes the filters of :class:`~vq.services.query.ListFilter` and the paging
parameters of :mod:`vq.services.listing` (``sort``, ``table_sort``, ``offset``,
``limit``, ``count_only``; then ``total`` and ``total_jobs`` are added). Every listing
first re-checks the spec files for other writers' changes, unless ``max_age`` (seconds,
0-60) is given and a check started at most that long ago. A paged listing keeps its
sorted selection until an indexed spec changes (``JobIndex.generation``).

``wait_change {id, since_state?, timeout?}`` is the long-poll behind
``GET /api/v1/jobs/{id}/wait``: it answers at once when the job is terminal or its state
differs from ``since_state``, else blocks on the index's ``changed`` condition (never
holding the index lock while blocked) until the state changes or ``timeout`` seconds
(0-300, default 60) pass. Every second it re-reads the spec, so writers outside the
daemon are seen too, and checks its connection (:func:`~vq.daemon.rpc.peer_closed`): a
caller that hung up frees the thread within a second. It answers
``{id, state, changed, timed_out, job: <status>}`` (``{id, state, abandoned: true}`` to
a caller that is gone).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from vq import __version__
from vq.domain.states import JobState
from vq.errors import InvalidInput, NotFound
from vq.protocol.messages import SubmitParams, parse_params
from vq.services.capacity import advertised_caps
from vq.services.kill import kill_job
from vq.services.listing import Ordering, PageParams, order, order_key, page_of, page_params
from vq.services.pause import pause_job, resume_job
from vq.services.query import ListFilter, list_row, select, status_view, wait_answer
from vq.services.reports import EtaBasis, eta_basis, queue_eta, report_row
from vq.services.resubmit import resubmit
from vq.services.submit import result_payload, submit

from .control_methods import build_control_methods
from .health import build_health_method
from .rpc import Method, peer_closed

if TYPE_CHECKING:
    from .app import Daemon

__all__ = ["WAIT_MAX_SECONDS", "build_methods"]

#: The longest one ``wait_change`` call blocks.
WAIT_MAX_SECONDS = 300.0
#: Sorted selections kept for paged listings (one per filter and order, newest used).
KEPT_ORDERINGS = 8


def _job_id(params: dict[str, Any]) -> str:
    job_id = params.get("id")
    if not isinstance(job_id, str):
        raise InvalidInput("the request needs a job id", hint='pass params {"id": ...}')
    return job_id


def _wait_args(params: dict[str, Any]) -> tuple[float, JobState | None]:
    timeout = params.get("timeout", 60)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise InvalidInput("timeout must be a number of seconds")
    if not 0 <= timeout <= WAIT_MAX_SECONDS:
        raise InvalidInput(f"timeout must be between 0 and {WAIT_MAX_SECONDS:g} seconds")
    since = params.get("since_state")
    if since is None:
        return float(timeout), None
    if not isinstance(since, str) or since.upper() not in JobState.__members__:
        raise InvalidInput(f"since_state {since!r} is not a job state")
    return float(timeout), JobState[since.upper()]


def _max_age(params: dict[str, Any]) -> float | None:
    """``list``'s ``max_age``: how old a check for other writers' changes may be."""
    value = params.get("max_age")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 60:
        raise InvalidInput("max_age must be between 0 and 60 seconds")
    return float(value)


def build_methods(daemon: Daemon) -> dict[str, Method]:
    """The method table served on ``daemon.sock``."""
    ctx = daemon.ctx

    def ping(_: dict[str, Any]) -> dict[str, Any]:
        return {
            "version": __version__,
            "pid": os.getpid(),
            "uptime_seconds": round(time.monotonic() - daemon.started_monotonic, 3),
            "started_at": daemon.started_at.isoformat(),
            "state_root": str(ctx.paths.root),
            "methods": sorted(methods),
            "provenance": daemon.provenance,
            "cgroup_mode": daemon.cgroup.mode,
            "cgroup_reason": daemon.cgroup.reason,
            "cpu_affinity": daemon.affinity_cores() is not None,
            "dispatch_hold": daemon.dispatch_hold(),
            **advertised_caps(ctx),
        }

    def wake(_: dict[str, Any]) -> dict[str, Any]:
        daemon.wake()
        return {}

    def submit_method(params: dict[str, Any]) -> dict[str, Any]:
        result = submit(ctx, parse_params(SubmitParams, params))
        for spec in result.specs:
            daemon.remember(spec)
        daemon.wake()
        return result_payload(result)

    def status(params: dict[str, Any]) -> dict[str, Any]:
        spec = ctx.store.read(_job_id(params))
        daemon.remember(spec)
        now = ctx.now()
        view = status_view(
            spec,
            ctx.paths,
            ctx.base_caps,
            now,
            daemon.supervisor.usage(),
            daemon.index.dependency_state,
            effective=ctx.caps,
            hold=daemon.dispatch_hold(),
        )
        if spec.state is JobState.PENDING:
            basis = eta_basis_now()
            row = report_row(spec, ctx.base_caps, now)
            view["queue_eta"] = queue_eta(row, (), ctx.base_caps, now, basis=basis)
        return view

    eta_lock = threading.Lock()
    eta_cache: list[tuple[int, EtaBasis]] = []

    def eta_basis_now() -> EtaBasis:
        """The ETA basis of the index, rebuilt only after an indexed spec changed."""
        with eta_lock:
            generation = daemon.index.generation
            if eta_cache and eta_cache[0][0] == generation:
                return eta_cache[0][1]
            specs = daemon.index.all()
            if daemon.index.generation != generation:  # changed meanwhile: do not keep it
                generation = -1
            now = ctx.now()
            base = ctx.base_caps or ctx.caps  # the daemon always has its base caps
            basis = eta_basis([report_row(s, base, now) for s in specs], base)
            eta_cache[:] = [(generation, basis)]
            return basis

    def wait_change(params: dict[str, Any]) -> dict[str, Any]:
        job_id = _job_id(params)
        timeout, since = _wait_args(params)
        deadline = time.monotonic() + timeout
        spec = ctx.store.read(job_id)
        cached = daemon.index.get(job_id)
        if cached is None or cached.state is not spec.state:
            daemon.remember(spec)
        baseline = spec.state if since is None else since
        while not spec.is_terminal and spec.state is baseline:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            daemon.index.wait_for_change(job_id, baseline, min(remaining, 1.0))
            if peer_closed():  # nobody to answer: free this thread now, not at the timeout
                return {"id": job_id, "state": spec.state.value, "abandoned": True}
            try:
                spec = ctx.store.read(job_id)  # the disk decides, not the cache
            except NotFound:
                raise NotFound(f"job {job_id} was deleted while waiting") from None
        return wait_answer(spec, baseline, status({"id": job_id}))

    def list_method(params: dict[str, Any]) -> dict[str, Any]:
        flt = ListFilter.from_params(params)
        paging = page_params(params)
        daemon.index.revalidate(_max_age(params))
        now = ctx.now()
        if paging is None:
            page = None
            specs = select(daemon.index.all(), flt)
        else:
            page = page_of(ordering_for(flt, paging), paging)
            specs = page.specs
        rows = [list_row(spec, ctx.base_caps, now) for spec in specs]
        quarantined = [item.as_dict() for item in daemon.index.quarantined.values()]
        answer: dict[str, Any] = {
            "jobs": rows,
            "quarantined": quarantined,
            "counts": daemon.index.counts(),
        }
        if page is not None:
            answer.update(total=page.total, total_jobs=page.total_jobs)
        return answer

    order_lock = threading.Lock()
    orders: OrderedDict[tuple[Any, ...], tuple[int, Ordering]] = OrderedDict()

    def ordering_for(flt: ListFilter, paging: PageParams) -> Ordering:
        """The sorted selection, kept per filter and order until an indexed spec changes."""
        key = (flt, *order_key(paging))
        generation = daemon.index.generation
        with order_lock:
            kept = orders.get(key)
            if kept is not None and kept[0] == generation:
                orders.move_to_end(key)
                return kept[1]
        specs = daemon.index.all()
        ordering = order(select(specs, flt), paging)
        if daemon.index.generation == generation:  # nothing changed meanwhile: keep it
            with order_lock:
                orders[key] = (generation, ordering)
                orders.move_to_end(key)
                while len(orders) > KEPT_ORDERINGS:
                    orders.popitem(last=False)
        return ordering

    def kill(params: dict[str, Any]) -> dict[str, Any]:
        job_id = _job_id(params)
        outcome = kill_job(ctx, job_id, lifecycle=daemon.lifecycle)
        daemon.remember(outcome.spec)
        if outcome.signaled:
            daemon.call_soon(lambda: daemon.supervisor.start_grace(job_id))
        daemon.wake()
        return outcome.as_dict()

    def pause(params: dict[str, Any]) -> dict[str, Any]:
        outcome = pause_job(ctx, _job_id(params))
        daemon.remember(outcome.spec)
        return outcome.as_dict()

    def resume(params: dict[str, Any]) -> dict[str, Any]:
        outcome = resume_job(ctx, _job_id(params))
        daemon.remember(outcome.spec)
        daemon.wake()
        return outcome.as_dict()

    def resubmit_method(params: dict[str, Any]) -> dict[str, Any]:
        overrides = params.get("overrides") or {}
        if not isinstance(overrides, dict):
            raise InvalidInput("overrides must be an object")
        clone = resubmit(ctx, _job_id(params), overrides)
        daemon.remember(clone)
        daemon.wake()
        return clone.model_dump(mode="json")

    methods: dict[str, Method] = {
        "ping": ping,
        "wake": wake,
        "submit": submit_method,
        "status": status,
        "wait_change": wait_change,
        "list": list_method,
        "kill": kill,
        "pause": pause,
        "resume": resume,
        "resubmit": resubmit_method,
        **build_control_methods(daemon),
        **build_health_method(daemon),
    }
    return methods
