"""Derived views of the job index kept between requests until an indexed spec changes.

* the ETA basis behind every PENDING job's ``queue_eta`` (``status``);
* the sorted selections of paged listings (``list``), one per filter and order, the
  :data:`KEPT_ORDERINGS` most recently used.

Both are keyed on :attr:`JobIndex.generation`: a view built while the index changed is
answered but not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from vq.services.context import ServiceContext
from vq.services.listing import Ordering, PageParams, order, order_key
from vq.services.query import ListFilter, select
from vq.services.reports import EtaBasis, eta_basis, report_row

from ..index import JobIndex

__all__ = ["KEPT_ORDERINGS", "IndexViews"]

#: Sorted selections kept for paged listings (one per filter and order, newest used).
KEPT_ORDERINGS = 8


class IndexViews:
    """The ETA basis and the paged listings' orderings of one index (thread-safe)."""

    def __init__(self, ctx: ServiceContext, index: JobIndex) -> None:
        self._ctx = ctx
        self._index = index
        self._eta_lock = threading.Lock()
        self._eta: tuple[int, EtaBasis] | None = None
        self._order_lock = threading.Lock()
        self._orders: OrderedDict[tuple[Any, ...], tuple[int, Ordering]] = OrderedDict()

    def eta_basis(self) -> EtaBasis:
        """The ETA basis of the index, rebuilt only after an indexed spec changed."""
        with self._eta_lock:
            generation = self._index.generation
            if self._eta is not None and self._eta[0] == generation:
                return self._eta[1]
            specs = self._index.all()
            if self._index.generation != generation:  # changed meanwhile: do not keep it
                generation = -1
            now = self._ctx.now()
            base = self._ctx.base_caps or self._ctx.caps  # the daemon always has its base caps
            basis = eta_basis([report_row(s, base, now) for s in specs], base)
            self._eta = (generation, basis)
            return basis

    def ordering(self, flt: ListFilter, paging: PageParams) -> Ordering:
        """The sorted selection, kept per filter and order until an indexed spec changes."""
        key = (flt, *order_key(paging))
        generation = self._index.generation
        with self._order_lock:
            kept = self._orders.get(key)
            if kept is not None and kept[0] == generation:
                self._orders.move_to_end(key)
                return kept[1]
        specs = self._index.all()
        ordering = order(select(specs, flt), paging)
        if self._index.generation == generation:  # nothing changed meanwhile: keep it
            with self._order_lock:
                self._orders[key] = (generation, ordering)
                self._orders.move_to_end(key)
                while len(self._orders) > KEPT_ORDERINGS:
                    self._orders.popitem(last=False)
        return ordering
