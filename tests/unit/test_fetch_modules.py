"""The fetch service stays split along its seam: tree copy vs. snapshot sidecars."""

from __future__ import annotations

import importlib
import inspect

import pytest


@pytest.mark.parametrize("name", ["vq.services.fetch", "vq.services.fetch_snapshot"])
def test_fetch_modules_are_small_and_documented(name: str) -> None:
    module = importlib.import_module(name)
    source = inspect.getsource(module)
    assert len(source.splitlines()) < 400
    assert module.__doc__ and len(module.__doc__.strip()) > 80


def test_one_manifest_writer_for_fetch_and_outputs() -> None:
    from vq.services import fetch, fetch_snapshot, outputs

    assert fetch.fetch_manifest is fetch_snapshot.fetch_manifest
    assert outputs.fetch_manifest is fetch_snapshot.fetch_manifest
    assert fetch.MANIFEST_SCHEMA == "vq.fetch-manifest.v1"
