"""Pages of a listing (vq.services.listing) hold exactly what sorting every row would.

The daemon sorts and pages specs; the API used to sort whole ``list_row`` rows and the
console folded groups over all rows. Both must see the same order, page by page.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from vq.domain.admission import Caps
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import InvalidInput
from vq.services.listing import API_SORTS, TABLE_SORTS, page_params, paged
from vq.services.query import ListFilter, list_row, select
from vq.web.pages.views import TableQuery, table_entries

NOW = datetime(2026, 5, 10, 12, 0, tzinfo=UTC)


def _specs(mixed_offsets: bool) -> list[JobSpec]:
    rng = random.Random(7)
    specs: list[JobSpec] = []
    for i in range(160):
        submitted = NOW - timedelta(seconds=rng.choice([0, 1, 2, 3, 60, 61]))
        if rng.random() < 0.3:
            submitted += timedelta(microseconds=rng.choice([0, 500]))
        if mixed_offsets and i % 5 == 0:
            submitted = submitted.astimezone(timezone(timedelta(hours=2)))
        state = rng.choice(list(JobState))
        spec = JobSpec(
            id=f"{i:012x}",
            submitted_at=submitted,
            command=["true"],
            cpus=1,
            priority=rng.choice([0, 0, 1, 5]),
            job_name=rng.choice([None, "Alpha", "alpha", "beta", "Zed"]),
            state=state,
            finished_at=NOW if state.is_terminal and rng.random() < 0.8 else None,
        )
        group = rng.random()
        if group < 0.25:
            spec.array_group_id = f"arr{i % 4}"
            spec.array_index = i
        elif group < 0.35:
            spec.chain_group_id = f"chn{i % 3}"
            spec.chain_index = i
        specs.append(spec)
    return specs


def _api_reference(rows: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    """The API's sort as it was done over whole rows."""
    key = sort.lstrip("-")
    if sort == "submitted_at":
        return rows
    present = [r for r in rows if r.get(key) is not None]
    missing = [r for r in rows if r.get(key) is None]
    present.sort(key=lambda r: r[key], reverse=sort.startswith("-"))
    return present + missing


@pytest.mark.parametrize("mixed_offsets", [False, True])
def test_api_pages_match_sorting_every_row(mixed_offsets: bool) -> None:
    selected = select(_specs(mixed_offsets), ListFilter())
    rows = [list_row(spec, Caps(), NOW) for spec in selected]
    for sort in [*API_SORTS, *(f"-{key}" for key in API_SORTS)]:
        expected = [r["id"] for r in _api_reference(rows, sort)]
        for offset, limit in ((0, 25), (25, 25), (150, 50), (0, 1000)):
            params = page_params({"sort": sort, "offset": offset, "limit": limit})
            assert params is not None
            page = paged(selected, params)
            assert [s.id for s in page.specs] == expected[offset : offset + limit], sort
            assert page.total == page.total_jobs == len(rows)


@pytest.mark.parametrize("mixed_offsets", [False, True])
def test_table_pages_fold_groups_like_the_console(mixed_offsets: bool) -> None:
    selected = select(_specs(mixed_offsets), ListFilter())
    rows = [list_row(spec, Caps(), NOW) for spec in selected]
    for sort in TABLE_SORTS:
        for direction in ("asc", "desc"):
            query = TableQuery(sort=sort, dir=direction)
            whole = table_entries(rows, query)
            seen: list[Any] = []
            for offset in range(0, len(whole) + 10, 10):
                params = page_params(
                    {"table_sort": sort, "table_dir": direction, "offset": offset, "limit": 10}
                )
                assert params is not None
                page = paged(selected, params)
                assert page.total == len(whole) and page.total_jobs == len(rows)
                by_id = {r["id"]: r for r in rows}
                seen += table_entries([by_id[s.id] for s in page.specs], query)
            assert seen == whole, (sort, direction)


def test_paging_parameters_are_checked_and_optional() -> None:
    assert page_params({"states": ["PENDING"], "name": None}) is None
    counted = page_params({"count_only": True})
    assert counted is not None and paged(_specs(False), counted).specs == []
    for bad in ({"sort": "cpus"}, {"limit": -1}, {"offset": "3"}, {"table_sort": "x"}):
        with pytest.raises(InvalidInput):
            page_params(bad)
