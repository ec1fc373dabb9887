"""The fetch service stays split along its seam: tree copy vs. snapshot sidecars."""

from __future__ import annotations

import importlib
import inspect

import pytest


@pytest.mark.parametrize("name", ["vq.fetch.local", "vq.fetch.snapshot"])
def test_fetch_modules_are_small_and_documented(name: str) -> None:
    module = importlib.import_module(name)
    source = inspect.getsource(module)
    assert len(source.splitlines()) < 400
    assert module.__doc__ and len(module.__doc__.strip()) > 80


def test_one_manifest_writer_for_fetch_and_outputs() -> None:
    from vq.fetch import local, snapshot
    from vq.services import outputs

    assert local.fetch_manifest is snapshot.fetch_manifest
    assert outputs.fetch_manifest is snapshot.fetch_manifest
    assert local.MANIFEST_SCHEMA == "vq.fetch-manifest.v1"
